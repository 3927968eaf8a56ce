// Whole jobs whose switches run on a thread of their own
// (LocalClusterOptions::fabric_thread: the loopback wire's stepped
// processor): with the endpoints on one shared thread or a thread each, over
// one switch and two levels, with loss on every hop, with the parameter
// server's loop on the fabric thread too (ps_on_fabric_thread), every result
// is exact and identical on every worker, and the fabric's work ran on its
// thread.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/runtime/loop_threads.h"
#include "testbed/local_cluster.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/unit/runtime/affinity_probe.h"

namespace atp::integration {
namespace {

using testbed::FabricAggregation;
using testbed::LocalClusterOptions;

std::vector<size_t> MixedSizes() { return {1, 62, 63, 62 * 256, 62 * 1000 + 17, 100'000, 3}; }

struct Shape {
  uint32_t shared_threads;  // 0: a thread per loop
  int racks;
  int workers_per_rack;
  bool ps_on_fabric_thread = false;
};

class FabricThreadClusterTest : public ::testing::TestWithParam<Shape> {};

TEST_P(FabricThreadClusterTest, EveryResultIsExactAndIdentical) {
  const Shape shape = GetParam();
  LocalClusterOptions options;
  options.aggregation =
      shape.racks == 1 ? FabricAggregation::kSingleSwitch : FabricAggregation::kTwoLevel;
  options.shared_threads = shape.shared_threads;
  options.fabric_thread = true;
  options.ps_on_fabric_thread = shape.ps_on_fabric_thread;
  options.jobs.push_back(TestJob(31, shape.racks, shape.workers_per_rack));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  ASSERT_GE(cluster->wire()->processor_wait_fd(), 0) << "the wire's processor is stepped";
  // The fabric thread's steps: the fabric's, and the PS's one loop if it is there.
  ASSERT_NE(cluster->fabric_thread(), nullptr);
  EXPECT_EQ(cluster->fabric_thread()->threads().all[0]->steps(),
            shape.ps_on_fabric_thread ? 2u : 1u);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = seed}));
  }
  const testbed::FabricStats fabric = cluster->fabric()->stats();
  EXPECT_GT(fabric.frames, 0u);
  EXPECT_EQ(fabric.malformed, 0u);
  uint64_t completed = 0;
  for (const auto& sw : fabric.switches) completed += sw.completed;
  EXPECT_GT(completed, 0u) << "the switches aggregated";
}

INSTANTIATE_TEST_SUITE_P(Shapes, FabricThreadClusterTest,
                         ::testing::Values(Shape{1, 1, 2}, Shape{1, 2, 2}, Shape{0, 1, 3},
                                           Shape{0, 2, 2}, Shape{1, 1, 2, true},
                                           Shape{0, 2, 2, true}),
                         [](const ::testing::TestParamInfo<Shape>& param) {
                           return "Shared" + std::to_string(param.param.shared_threads) + "Racks" +
                                  std::to_string(param.param.racks) + "Workers" +
                                  std::to_string(param.param.racks * param.param.workers_per_rack) +
                                  (param.param.ps_on_fabric_thread ? "PsOnFabricThread" : "");
                         });

// Operations one at a time, each smaller than a transmit burst: the worker
// keeps the frames its last burst did not use (allocated in the loopback
// ingress ring, which hands frames over in allocation order), and a later
// control frame (the next operation's kOpBegin) allocated behind them was
// held back until they were sent, which a job of small operations never did:
// its second operation stalled. Every size up to a burst, several times.
TEST(FabricThreadClusterSmallOperationsTest, OperationsSmallerThanABurstFollowOneAnother) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kSingleSwitch;
  options.fabric_thread = true;
  options.shared_threads = 1;
  options.jobs.push_back(TestJob(33, /*racks=*/1, /*workers_per_rack=*/2, /*io_threads=*/1));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  uint64_t seed = 1;
  for (const size_t size : {size_t{1}, size_t{62}, size_t{63}, size_t{62 * 15}, size_t{1}}) {
    for (int round = 0; round < 3; ++round) {
      ASSERT_TRUE(RunCollective(*cluster, 0,
                                {.sizes = {size}, .seed = seed++, .deadline = absl::Seconds(20)}))
          << size << " floats, round " << round;
    }
  }
}

// polling.cpus: the fabric's thread on the first CPU, the shared I/O thread
// on the second, and the job exact; so too with endpoints on threads of
// their own (which take the other CPUs in turn).
TEST(FabricThreadClusterPinnedTest, TheFabricAndTheIoThreadEachOnTheirCpu) {
  const std::vector<int> allowed = host::AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs this process may run on";
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kSingleSwitch;
  options.fabric_thread = true;
  options.shared_threads = 1;
  options.polling.cpus = {allowed[1], allowed[0]};
  options.jobs.push_back(TestJob(34, /*racks=*/1, /*workers_per_rack=*/2));
  // Declared first: the probes outlive the cluster's threads.
  host::AffinityProbe fabric_probe;
  host::AffinityProbe io_probe;
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  cluster->fabric_thread()->threads().all[0]->Add({}, fabric_probe.Step());
  cluster->shared_threads()->threads().all[0]->Add({}, io_probe.Step());
  EXPECT_EQ(fabric_probe.Cpus(), std::vector<int>{allowed[1]});
  EXPECT_EQ(io_probe.Cpus(), std::vector<int>{allowed[0]});
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 9}));

}

TEST(FabricThreadClusterPinnedTest, EndpointsWithThreadsOfTheirOwnTakeTheCpusInTurn) {
  const std::vector<int> allowed = host::AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs this process may run on";
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kSingleSwitch;
  options.fabric_thread = true;
  options.shared_threads = 0;  // the PS and each worker a thread of its own
  options.polling.cpus = {allowed[0], allowed[1], allowed[0]};
  options.jobs.push_back(TestJob(35, /*racks=*/1, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 10}));
}

TEST(FabricThreadClusterLossTest, LossOnEveryHopStillGivesExactResults) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kTwoLevel;
  options.fabric_thread = true;
  options.shared_threads = 1;
  options.loss_rate = 0.01;
  options.seed = 78;
  options.jobs.push_back(TestJob(32, /*racks=*/2, /*workers_per_rack=*/2));
  // As LoopbackClusterTest's loss test: cap the backed-off timeout.
  options.jobs[0].job.initial_retransmission_timeout = absl::Milliseconds(5);
  options.jobs[0].job.max_retransmission_timeout = absl::Milliseconds(20);
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {62 * 2000, 1000, 62 * 300 + 1, 7}, .seed = 6}));
  EXPECT_GT(cluster->fabric()->stats().lost, 0u);
}

TEST(FabricThreadClusterRestartTest, WorkersAndAParameterServerRestart) {
  // With the PS on the fabric thread, the restarted PS's loop joins that
  // thread again (the fabric's step never stopped).
  for (const bool ps_on_fabric_thread : {false, true}) {
    LocalClusterOptions options;
    options.fabric_thread = true;
    options.ps_on_fabric_thread = ps_on_fabric_thread;
    options.shared_threads = 1;
    options.jobs.push_back(TestJob(33, /*racks=*/2, /*workers_per_rack=*/2));
    auto cluster = MakeCluster(options);
    ASSERT_NE(cluster, nullptr);
    EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 7}));
    ASSERT_TRUE(cluster->RecreateWorkers(0).ok());
    ASSERT_TRUE(cluster->RestartParameterServer(0, 0).ok());
    EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 8}))
        << "ps_on_fabric_thread " << ps_on_fabric_thread;
  }
}

TEST(FabricThreadClusterOptionsTest, ThePsGoesOnTheFabricThreadOnlyWhereThereIsOne) {
  LocalClusterOptions options;
  options.ps_on_fabric_thread = true;
  options.jobs.push_back(TestJob(34, /*racks=*/1, /*workers_per_rack=*/2));
  absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> cluster =
      testbed::LocalCluster::Create(options);
  ASSERT_FALSE(cluster.ok());
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cluster.status().message().find("ps_on_fabric_thread"), std::string::npos)
      << cluster.status();
}

}  // namespace
}  // namespace atp::integration
