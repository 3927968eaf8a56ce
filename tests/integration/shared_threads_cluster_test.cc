// Whole jobs whose I/O loops share threads (LocalClusterOptions::
// shared_threads, atp/shared_io_threads.h): with one thread for every loop
// of the process and with two, over one rack and two, with several workers
// and I/O threads each, every result is exact and identical on every worker;
// workers and a parameter server restart on the shared threads; a bad thread
// count is refused.
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "testbed/local_cluster.h"
#include "tests/integration/cluster_test_util.h"

namespace atp::integration {
namespace {

using testbed::FabricAggregation;
using testbed::LocalClusterOptions;

std::vector<size_t> MixedSizes() { return {1, 62, 63, 62 * 256, 62 * 1000 + 17, 100'000, 3}; }

struct Shape {
  uint32_t threads;
  int racks;
  int workers_per_rack;
};

class SharedThreadsClusterTest : public ::testing::TestWithParam<Shape> {};

TEST_P(SharedThreadsClusterTest, EveryResultIsExactAndIdentical) {
  const Shape shape = GetParam();
  LocalClusterOptions options;
  options.aggregation =
      shape.racks == 1 ? FabricAggregation::kSingleSwitch : FabricAggregation::kTwoLevel;
  options.shared_threads = shape.threads;
  options.jobs.push_back(TestJob(21, shape.racks, shape.workers_per_rack));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  ASSERT_NE(cluster->shared_threads(), nullptr);
  EXPECT_EQ(cluster->shared_threads()->size(), shape.threads);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = seed}));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SharedThreadsClusterTest,
                         ::testing::Values(Shape{1, 1, 2}, Shape{1, 1, 3}, Shape{1, 2, 2},
                                           Shape{2, 1, 2}, Shape{2, 1, 3}, Shape{2, 2, 2}),
                         [](const ::testing::TestParamInfo<Shape>& param) {
                           return "Threads" + std::to_string(param.param.threads) + "Racks" +
                                  std::to_string(param.param.racks) + "Workers" +
                                  std::to_string(param.param.racks * param.param.workers_per_rack);
                         });

TEST(SharedThreadsClusterRestartTest, WorkersAndAParameterServerRestartOnTheSharedThreads) {
  LocalClusterOptions options;
  options.shared_threads = 1;
  options.jobs.push_back(TestJob(22, /*racks=*/2, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 4}));
  ASSERT_TRUE(cluster->RecreateWorkers(0).ok());
  ASSERT_TRUE(cluster->RestartParameterServer(0, 0).ok());
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 5}));
}

TEST(SharedThreadsClusterRestartTest, RefusesABadThreadCount) {
  LocalClusterOptions options;
  options.shared_threads = 65;
  options.jobs.push_back(TestJob(23, 1, 2));
  absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> cluster =
      testbed::LocalCluster::Create(options);
  ASSERT_FALSE(cluster.ok());
  EXPECT_NE(cluster.status().message().find("LocalClusterOptions.shared_threads"),
            std::string::npos)
      << cluster.status();
}

}  // namespace
}  // namespace atp::integration
