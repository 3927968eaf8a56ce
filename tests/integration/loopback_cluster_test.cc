// Whole jobs as threads over the loopback wire, with ATP switch hosts (what
// atp-switchd runs) in the wire's frame processor: every result is exact (ATP-SPEC section 8.1:
// the dequantized exact int32 sum, or the float32 overflow result) and
// bit-identical on every worker (8.2), with two levels of switches, one
// switch, or none; with loss; with the switches losing their state; with two
// jobs sharing the switches; with the PS sharded over two hosts. And idle
// I/O threads back off instead of burning cores.
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "testbed/local_cluster.h"
#include "tests/integration/cluster_test_util.h"

namespace atp::integration {
namespace {

using testbed::FabricAggregation;
using testbed::FabricStats;
using testbed::LocalClusterOptions;
using testbed::LocalJob;


// A mix of sizes: tiny, odd, one window, far beyond a window.
std::vector<size_t> MixedSizes() {
  return {1, 61, 62, 63, 1000, 62 * 256, 62 * 1000 + 17, 5, 100'000, 3};
}

uint64_t Completed(const FabricStats& s, size_t sw) { return s.switches[sw].completed; }

TEST(LoopbackClusterTest, TwoRacksTwoLevelsOfSwitchesGiveExactIdenticalResults) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kTwoLevel;
  options.jobs.push_back(TestJob(1, /*racks=*/2, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 1}));
  // Both levels aggregated: the ToRs of racks 0 and 1 completed level 1, the
  // PS rack's ToR level 2, so the PS saw whole-job packets.
  const FabricStats s = cluster->fabric()->stats();
  ASSERT_EQ(s.switches.size(), 3u);
  EXPECT_GT(Completed(s, 0), 0u);
  EXPECT_GT(Completed(s, 1), 0u);
  EXPECT_GT(Completed(s, 2), 0u);
  EXPECT_EQ(s.malformed, 0u);
  EXPECT_TRUE(EventuallyPsStats(*cluster, 0, 0, [](const ParameterServerStats& ps) {
    return ps.completed > 0 && ps.decode_errors == 0;
  }));
}

TEST(LoopbackClusterTest, OneSwitchForASingleRackAggregatesBothLevels) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kSingleSwitch;
  options.jobs.push_back(TestJob(2, /*racks=*/1, /*workers_per_rack=*/3));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 2}));
  EXPECT_GT(Completed(cluster->fabric()->stats(), 0), 0u);
}

TEST(LoopbackClusterTest, WithoutSwitchesThePsDoesAllTheAggregation) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kNone;
  options.jobs.push_back(TestJob(3, /*racks=*/2, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = MixedSizes(), .seed = 3}));
  // Every worker's every fragment reached the PS: 4 contributions per fragment.
  EXPECT_TRUE(EventuallyPsStats(*cluster, 0, 0, [](const ParameterServerStats& ps) {
    return ps.completed > 0 && ps.contributions >= ps.completed * 4;
  }));
}

// ECN end to end through the product's hosts: the fabric's switch hosts
// aggregate nothing (as atp-switchd forwards a job it does not aggregate)
// and mark CE on a gradient whenever the PS's receive queue holds a frame
// (threshold 0; 4 workers send 3,000 fragments each into one PS queue); the
// PS carries CE into the ATP ecn bit; the workers see marked parameter
// packets (their congestion control's signal), and every result is exact.
TEST(LoopbackClusterTest, ForwardingSwitchesMarkCeAndThePsCarriesItToTheWorkers) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kForwardOnly;
  options.ecn_threshold = 0;
  options.jobs.push_back(TestJob(5, /*racks=*/2, /*workers_per_rack=*/2, /*io_threads=*/1));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {62 * 3000}, .seed = 5}));
  uint64_t marks = 0;
  for (size_t w = 0; w < cluster->num_workers(0); ++w) marks += cluster->worker(0, w).stats().ecn_marks;
  EXPECT_GT(marks, 0u);
  EXPECT_TRUE(EventuallyPsStats(*cluster, 0, 0, [](const ParameterServerStats& ps) {
    return ps.ce_to_ecn > 0 && ps.contributions >= ps.completed * 4;
  }));
  // Nothing aggregated in the switches.
  for (const auto& sw : cluster->fabric()->stats().switches) EXPECT_EQ(sw.aggregated, 0u);
}

TEST(LoopbackClusterTest, LossOnEveryHopStillGivesExactResults) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kTwoLevel;
  options.loss_rate = 0.01;
  options.seed = 77;
  options.jobs.push_back(TestJob(4, /*racks=*/2, /*workers_per_rack=*/2));
  // With 1% loss on each of the 3 to 6 hops, about one fragment in five needs
  // a resend round (any worker's copy or parameter packet lost), and resend
  // rounds give no RTT samples, so the timeout keeps backing off: cap it, or
  // a few unlucky rounds at the default 1 s cap dominate the test's time.
  options.jobs[0].job.initial_retransmission_timeout = absl::Milliseconds(5);
  options.jobs[0].job.max_retransmission_timeout = absl::Milliseconds(20);
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0,
                            {.sizes = {62 * 2000, 1000, 62 * 300 + 1, 7}, .seed = 4}));

  EXPECT_GT(cluster->fabric()->stats().lost, 0u);
  uint64_t retransmissions = 0;
  for (size_t w = 0; w < cluster->num_workers(0); ++w) {
    retransmissions += cluster->worker(0, w).stats().retransmissions;
  }
  EXPECT_GT(retransmissions, 0u);
}

TEST(LoopbackClusterTest, SwitchesLosingTheirStateMidJobStillGiveExactResults) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kTwoLevel;
  // Every switch reboots (loses every aggregator) after each 2000 frames.
  options.wipe_every_frames = 2000;
  options.jobs.push_back(TestJob(5, /*racks=*/2, /*workers_per_rack=*/2));
  // Fragments caught by a wipe are recovered by timeouts; resent fragments
  // give no RTT samples, so cap the backed-off timeout (see the loss test).
  options.jobs[0].job.initial_retransmission_timeout = absl::Milliseconds(5);
  options.jobs[0].job.max_retransmission_timeout = absl::Milliseconds(20);
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {62 * 3000, 500, 62 * 64}, .seed = 5}));
  EXPECT_GT(cluster->fabric()->stats().wipes, 2u);
}

TEST(LoopbackClusterTest, TwoConcurrentJobsSharingTheSwitchesAreBothExact) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kTwoLevel;
  // A small aggregator array, so that the jobs collide on it.
  options.aggregator_count = 64;
  options.jobs.push_back(TestJob(6, /*racks=*/2, /*workers_per_rack=*/2));
  options.jobs.push_back(TestJob(7, /*racks=*/2, /*workers_per_rack=*/1, /*io_threads=*/3));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  ::testing::AssertionResult second = ::testing::AssertionSuccess();
  std::thread other([&] {
    second = RunCollective(*cluster, 1, {.sizes = {62 * 1500, 99, 62 * 10}, .seed = 61});
  });
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {62 * 1500, 1234, 62 * 40 + 3}, .seed = 60}));
  other.join();
  EXPECT_TRUE(second);
  uint64_t collisions = 0;
  for (const auto& sw : cluster->fabric()->stats().switches) collisions += sw.collisions;
  EXPECT_GT(collisions, 0u);
}

TEST(LoopbackClusterTest, ShardedParameterServersServeTheirQueues) {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kNone;
  LocalJob job = TestJob(8, /*racks=*/1, /*workers_per_rack=*/2, /*io_threads=*/4);
  job.parameter_servers = 2;
  job.ps_threads = 2;
  options.jobs.push_back(job);
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {62 * 2000, 62 * 16 * 4}, .seed = 8}));
  for (uint32_t k = 0; k < 2; ++k) {
    EXPECT_TRUE(EventuallyPsStats(*cluster, 0, k, [](const ParameterServerStats& s) {
      return s.completed > 0 && s.wrong_shard == 0;
    })) << "PS " << k;
  }
}

TEST(LoopbackClusterTest, AveragingDividesByTheWorkerCountOnEveryWorker) {
  LocalClusterOptions options;
  options.jobs.push_back(TestJob(9, /*racks=*/2, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0,
                            {.sizes = {62 * 100 + 5, 3}, .seed = 9,
                             .reduction = Reduction::kAverage}));
}

TEST(LoopbackClusterTest, OverflowAndNonFiniteValuesTakeTheFloatPath) {
  LocalClusterOptions options;
  options.jobs.push_back(TestJob(10, /*racks=*/2, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  // Fragment 0: ordinary values. Fragment 1: 15.0 quantizes to 1.5e9 (fine
  // alone); four of them overflow int32 at the switches. Fragment 2: one
  // worker holds an infinity. All positive, so no partial sum saturates early.
  auto make = [](size_t, size_t rank, size_t size) {
    std::vector<float> v(size);
    for (size_t i = 0; i < size; ++i) v[i] = 0.25f + 0.001f * static_cast<float>(i + rank);
    for (size_t i = 62; i < 124; ++i) v[i] = 15.0f + 0.5f * static_cast<float>(rank);
    if (rank == 2) v[130] = std::numeric_limits<float>::infinity();
    return v;
  };
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {62 * 3, 62 * 3}, .make_input = make}));
  EXPECT_TRUE(EventuallyPsStats(*cluster, 0, 0, [](const ParameterServerStats& s) {
    return s.fp_completed > 0;
  }));
}

double CpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

TEST(LoopbackClusterTest, IdleIoThreadsBackOffInsteadOfBurningCores) {
  // 4 workers x 2 I/O threads + a PS thread: busy pollers would take every
  // core of the machine. Idle, they must sleep nearly all the time.
  LocalClusterOptions options;
  options.jobs.push_back(TestJob(11, /*racks=*/2, /*workers_per_rack=*/2));
  auto cluster = MakeCluster(options);
  ASSERT_NE(cluster, nullptr);
  EXPECT_TRUE(RunCollective(*cluster, 0, {.sizes = {62 * 100}, .seed = 11}));
  // Measure the process's CPU time over half a second of idleness (a
  // measurement window, not synchronisation: nothing waits on it).
  const double cpu_before = CpuSeconds();
  const absl::Time wall_before = absl::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cpu = CpuSeconds() - cpu_before;
  const double wall = absl::ToDoubleSeconds(absl::Now() - wall_before);
  // 9 busy pollers would use min(9, cores) x wall; back-off uses a few percent.
  EXPECT_LT(cpu, 0.5 * wall) << "cpu " << cpu << " s over " << wall << " s";
}

}  // namespace
}  // namespace atp::integration
