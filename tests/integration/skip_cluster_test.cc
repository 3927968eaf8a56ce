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

// The contribution variant: every fragment aggregated from the contributors
// the reference names, with switches aggregating (two levels: whole racks
// drop out of some fragments; one switch) and with the PS alone.
void RunContributionModes(FabricAggregation aggregation, uint8_t id, int racks,
                          int workers_per_rack) {
  LocalClusterOptions options;
  options.aggregation = aggregation;
  options.jobs.push_back(TestJob(id, racks, workers_per_rack));
  options.jobs[0].contribution_skipping = true;
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  const int n = racks * workers_per_rack;
  std::vector<SkipOptions> modes;
  for (int k = 1; k < n; ++k) {
    modes.push_back({.mode = SkipMode::kStatic, .reduce_scatter_steps = k});
    modes.push_back({.mode = SkipMode::kRandom, .reduce_scatter_steps = k, .seed = 5,
                     .iteration = static_cast<uint64_t>(k)});
  }
  modes.push_back({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1,
                   .divisor = SkipDivisor::kContributors});
  uint64_t seed = 1;
  for (SkipOptions mode : modes) {
    mode.variant = SkipVariant::kContributions;
    const Reduction reduction =
        mode.divisor == SkipDivisor::kContributors ? Reduction::kAverage : Reduction::kSum;
    const bool ok = RunCollective(*cluster, 0,
                              {.sizes = Sizes(), .seed = seed++, .reduction = reduction,
                               .deadline = absl::Seconds(20),
                               .skip = [mode](size_t op) {
                                 SkipOptions s = mode;
                                 s.tensor = op;
                                 return s;
                               }});
    EXPECT_TRUE(ok);
    if (!ok) {
      const ParameterServerStats p = cluster->parameter_server(0, 0).stats();
      // What each side did, to tell a lost result from a refused packet.
      ADD_FAILURE() << "k = " << mode.reduce_scatter_steps << ", mode "
                    << static_cast<int>(mode.mode) << "; PS: received " << p.frames_received << " grad " << p.gradients << " contrib "
                    << p.contributions << " completed " << p.completed << " mismatch "
                    << p.shape_mismatch << " malformed " << p.malformed << " dup " << p.duplicates
                    << " pulls answered " << p.pulls_answered << " ignored " << p.pulls_ignored
                    << " stale " << p.stale << " ahead " << p.ahead;
      for (size_t r = 0; r < cluster->num_workers(0); ++r) {
        const WorkerStats w = cluster->worker(0, r).stats();
        ADD_FAILURE() << "worker " << r << " sent " << w.fragments_sent << " notc "
                      << w.fragments_not_contributed << " pulls " << w.pulls_sent << " retx "
                      << w.retransmissions << " timeouts " << w.timeouts;
      }
      return;
    }
  }
  const WorkerStats s = cluster->worker(0, 0).stats();
  EXPECT_GT(s.fragments_not_contributed, 0u);
  EXPECT_EQ(s.fragments_skipped, 0u);
  EXPECT_EQ(cluster->fabric()->stats().malformed, 0u);
}

TEST(SkipClusterTest, ContributionsWithTwoLevelsOfSwitches) {
  RunContributionModes(FabricAggregation::kTwoLevel, 5, /*racks=*/2, /*workers_per_rack=*/2);
}

TEST(SkipClusterTest, ContributionsWithOneSwitch) {
  RunContributionModes(FabricAggregation::kSingleSwitch, 6, /*racks=*/1, /*workers_per_rack=*/3);
}

TEST(SkipClusterTest, ContributionsWithThePsAlone) {
  RunContributionModes(FabricAggregation::kNone, 7, /*racks=*/2, /*workers_per_rack=*/2);
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
  SkipOptions bad_variant{.mode = SkipMode::kStatic, .reduce_scatter_steps = 1};
  bad_variant.variant = static_cast<SkipVariant>(7);
  auto unknown_variant = w.PushPull(in, out, {.skip = bad_variant});
  ASSERT_FALSE(unknown_variant.ok());
  EXPECT_NE(unknown_variant.status().message().find("OpOptions.skip.variant"), std::string::npos)
      << unknown_variant.status();
  auto none_with_steps = w.PushPull(in, out, {.skip = {.reduce_scatter_steps = 1}});
  ASSERT_FALSE(none_with_steps.ok());
  EXPECT_NE(none_with_steps.status().message().find("OpOptions.skip.mode"), std::string::npos)
      << none_with_steps.status();
  auto bad_reduction = w.PushPull(in, out, {.reduction = static_cast<Reduction>(7)});
  ASSERT_FALSE(bad_reduction.ok());
  EXPECT_NE(bad_reduction.status().message().find("OpOptions.reduction: 7"), std::string::npos)
      << bad_reduction.status();
  // A refused call started nothing: the job's next collective still works.
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {1000}, .seed = 3}));
}

}  // namespace
}  // namespace atp::integration
