// SkipReduce on ATP through the whole product (Worker::PushPull with
// OpOptions::skip): jobs as threads over the loopback wire with ATP switch
// hosts, as in loopback_cluster_test.cc. Every worker's result equals the
// reference (tests/common/skip_reference.h) bit for bit: the dropped
// fragments zero, the others the exact sum, an average divided by N or, with
// DropReduce, N - k. The switches and the PS never see a dropped fragment,
// and bad options are refused with the field's name.
#include <cstdint>
#include <memory>
#include <vector>

#include "atp/skip_reduce.h"
#include "gtest/gtest.h"
#include "testbed/local_cluster.h"
#include "tests/integration/cluster_test_util.h"

namespace atp::integration {
namespace {

using testbed::FabricAggregation;
using testbed::LocalClusterOptions;


// Sizes: tiny (fewer fragments than workers), odd, and several pieces.
std::vector<size_t> Sizes() { return {5, 61, 1000, 62 * 100 + 17, 40'000}; }

TEST(SkipClusterTest, TwoRacksTwoLevelsEveryModeMatchesTheReference) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kTwoLevel;
  options.jobs.push_back(TestJob(1, /*racks=*/2, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  const std::vector<SkipOptions> modes = {
      {.mode = SkipMode::kStatic, .reduce_scatter_steps = 1},
      {.mode = SkipMode::kStatic, .reduce_scatter_steps = 3},
      {.mode = SkipMode::kRandom, .reduce_scatter_steps = 2, .seed = 5, .iteration = 0},
      {.mode = SkipMode::kRandom, .reduce_scatter_steps = 2, .seed = 5, .iteration = 1},
  };
  uint64_t seed = 1;
  for (const SkipOptions& mode : modes) {
    // Each op its own tensor, so random mode's shift differs between them.
    EXPECT_TRUE(RunCollective(*cluster, 0,
                              {.sizes = Sizes(), .seed = seed++, .skip = [mode](size_t op) {
                                 SkipOptions s = mode;
                                 s.tensor = op;
                                 return s;
                               }}));
  }
  // The fragments sent and skipped add up to every fragment of every op.
  const WorkerStats s = cluster->worker(0, 0).stats();
  EXPECT_GT(s.fragments_skipped, 0u);
  EXPECT_EQ(cluster->fabric()->stats().malformed, 0u);
}

TEST(SkipClusterTest, AveragesDivideByNOrByTheContributorsWithDropReduce) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kSingleSwitch;
  options.jobs.push_back(TestJob(2, /*racks=*/1, /*workers_per_rack=*/4));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  for (SkipDivisor divisor : {SkipDivisor::kAllRanks, SkipDivisor::kContributors}) {
    EXPECT_TRUE(RunCollective(
        *cluster, 0,
        {.sizes = Sizes(), .seed = 9, .reduction = Reduction::kAverage, .skip = [divisor](size_t) {
           return SkipOptions{.mode = SkipMode::kStatic, .reduce_scatter_steps = 1,
                              .divisor = divisor};
         }}));
  }
}

TEST(SkipClusterTest, SelectivePolicyOverBucketsAndIterations) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kNone;  // the PS alone
  options.jobs.push_back(TestJob(3, /*racks=*/1, /*workers_per_rack=*/3));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  SkipPolicy policy{.mode = SkipMode::kRandom, .rate = 0.34, .seed = 11};
  policy.protected_tensors = {1};
  for (uint64_t iteration = 0; iteration < 3; ++iteration) {
    EXPECT_TRUE(RunCollective(*cluster, 0,
                              {.sizes = Sizes(), .seed = 20 + iteration,
                               .skip = [&policy, iteration](size_t op) {
                                 return policy.ForTensor(op, iteration, 3);
                               }}));
  }
}

TEST(SkipClusterTest, BadOptionsAreRefusedNamingTheField) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kNone;
  options.jobs.push_back(TestJob(4, /*racks=*/1, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  std::vector<float> in(100, 1.0f), out(100);
  Worker& w = cluster->worker(0, 0);
  auto too_many = w.PushPull(in, out, {.skip = {.mode = SkipMode::kStatic, .reduce_scatter_steps = 2}});
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("OpOptions.skip.reduce_scatter_steps"),
            std::string::npos)
      << too_many.status();
  auto all_gather = w.Push(7, in, {.skip = {.mode = SkipMode::kStatic, .all_gather_steps = 1}});
  ASSERT_FALSE(all_gather.ok());
  EXPECT_NE(all_gather.status().message().find("OpOptions.skip.all_gather_steps"),
            std::string::npos)
      << all_gather.status();
  auto none_with_steps = w.PushPull(in, out, {.skip = {.reduce_scatter_steps = 1}});
  ASSERT_FALSE(none_with_steps.ok());
  EXPECT_NE(none_with_steps.status().message().find("OpOptions.skip.mode"), std::string::npos)
      << none_with_steps.status();
  // A refused call started nothing: the job's next collective still works.
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {1000}, .seed = 3}));
}

}  // namespace
}  // namespace atp::integration
