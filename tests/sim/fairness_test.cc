// Fairness and congestion control (issue 3 scenario 6; ATP-SPEC invariant
// 6): jobs whose aggregated streams share one bottleneck converge to equal
// shares with congestion control, and without it their goodput swings.
//
// The bottleneck: two worker racks, the PS hosts in a rack of their own. Each
// rack's ToR sends one aggregated frame per fragment of each job to the core,
// so the core's port toward the PS's rack carries jobs x racks streams at the
// rate of each job: with J jobs each gets about 1 / (2J) of that 100 Gb/s
// link. Its queue (256 frames) is smaller than the jobs' fixed windows
// together (J x 2 racks x 200), so without congestion control it overflows;
// with it, ECN marks above 32 frames keep the queue short.
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "sim/experiment.h"
#include "sim/goodput_stats.h"

namespace atp::sim {
namespace {

using worker::CongestionController;

constexpr TimeDelta kBin = TimeDelta::FromMicroseconds(50);

ExperimentConfig SharedBottleneck(int jobs, CongestionController::Mode cc) {
  ExperimentConfig config;
  config.topology.worker_racks = 2;
  for (int j = 1; j <= jobs; ++j) {
    config.topology.jobs.push_back(
        JobPlacement{.job = static_cast<uint8_t>(j), .workers_per_rack = {2, 2}});
  }
  config.topology.host_link.queue_capacity_packets = 256;
  config.topology.fabric_link.queue_capacity_packets = 256;
  config.topology.switches.ecn_threshold = 32;
  config.topology.worker.congestion_control = cc;
  // With congestion control the window starts small and grows (slow start);
  // without, it is the window that fills the path when the job is alone.
  config.topology.worker.initial_window = cc == CongestionController::Mode::kAimd ? 32 : 200;
  // About 3 ms of simulated time with congestion control.
  config.workload.values = 62 * (jobs == 2 ? 20000 : 12000);
  config.workload.start_jitter = TimeDelta::FromMicroseconds(10);
  config.workload.seed = 11;
  config.seed = 11;
  config.sample_interval = kBin;
  // Without congestion control the run crawls through timeouts: stop early,
  // the goodput series up to then is what is measured.
  config.time_limit = TimeDelta::FromMilliseconds(20);
  return config;
}

ExperimentResult RunOrDie(const ExperimentConfig& config) {
  auto experiment = Experiment::Create(config);
  EXPECT_TRUE(experiment.ok()) << experiment.status();
  if (!experiment.ok()) return {};
  return (*experiment)->Run();
}

std::string Describe(const ShareStats& s) {
  std::string out = "bins [" + std::to_string(s.first_bin) + ", " + std::to_string(s.end_bin) +
                    "), jain " + std::to_string(s.jain) + "; per job mean Gb/s (cv):";
  for (size_t j = 0; j < s.mean_gbps.size(); ++j) {
    out += " " + std::to_string(s.mean_gbps[j]) + " (" + std::to_string(s.cv[j]) + ")";
  }
  return out;
}

class FairnessTest : public ::testing::TestWithParam<int> {};

TEST_P(FairnessTest, JobsThroughOneBottleneckConvergeToEqualShares) {
  const int jobs = GetParam();
  const ExperimentConfig config = SharedBottleneck(jobs, CongestionController::Mode::kAimd);
  const ExperimentResult result = RunOrDie(config);
  ASSERT_EQ(result.jobs.size(), static_cast<size_t>(jobs));
  EXPECT_TRUE(result.exact);
  const ShareStats shares = SecondHalfShares(result, config.sample_interval);
  // Enough bins to mean something.
  ASSERT_GE(shares.end_bin - shares.first_bin, 10) << Describe(shares);
  EXPECT_GE(shares.jain, 0.95) << Describe(shares);
  // The bottleneck is used: together the jobs get at least half of the
  // aggregated-stream capacity (100 Gb/s over 2 racks, less header bytes).
  double total = 0.0;
  for (double g : shares.mean_gbps) total += g;
  EXPECT_GT(total, 0.5 * 100.0 / 2 * 248.0 / 306.0) << Describe(shares);
  // Congestion control, not luck: the jobs saw ECN marks.
  for (const JobResult& job : result.jobs) EXPECT_GT(job.ecn_marks, 0u) << +job.job;
}
INSTANTIATE_TEST_SUITE_P(Jobs, FairnessTest, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "Jobs";
                         });

TEST(CongestionControlTest, GoodputIsStableWithCongestionControlAndSwingsWithout) {
  // Stability: the coefficient of variation of each job's binned goodput
  // (50 us bins) over the second half of the time every job ran.
  const ExperimentConfig on_config = SharedBottleneck(2, CongestionController::Mode::kAimd);
  const ExperimentConfig off_config = SharedBottleneck(2, CongestionController::Mode::kFixedWindow);
  const ExperimentResult on = RunOrDie(on_config);
  const ExperimentResult off = RunOrDie(off_config);
  const ShareStats on_shares = SecondHalfShares(on, on_config.sample_interval);
  const ShareStats off_shares = SecondHalfShares(off, off_config.sample_interval);
  EXPECT_TRUE(on.exact);
  // Without congestion control the runs may not finish within the limit;
  // whatever finished was exact.
  for (const JobResult& job : off.jobs) {
    if (job.completed) {
      EXPECT_TRUE(job.exact) << job.first_error;
    }
  }
  ASSERT_GE(off_shares.end_bin - off_shares.first_bin, 10) << Describe(off_shares);
  EXPECT_LT(on_shares.max_cv, 0.5) << Describe(on_shares);
  EXPECT_GT(off_shares.mean_cv, 1.0) << Describe(off_shares);
  EXPECT_GT(off_shares.mean_cv, 3 * on_shares.max_cv)
      << "on: " << Describe(on_shares) << "\noff: " << Describe(off_shares);
  // Without congestion control the queue overflowed; with it, it did not.
  EXPECT_GT(off.tail_drops, 0u);
  EXPECT_EQ(on.tail_drops, 0u);
}

TEST(GoodputStatsTest, JainIndexIsOneForEqualSharesAndOneOverNForOneWinner) {
  const std::vector<double> equal = {3.0, 3.0, 3.0, 3.0};
  const std::vector<double> one = {8.0, 0.0, 0.0, 0.0};
  EXPECT_DOUBLE_EQ(JainIndex(equal), 1.0);
  EXPECT_DOUBLE_EQ(JainIndex(one), 0.25);
  EXPECT_DOUBLE_EQ(JainIndex({}), 1.0);
}

TEST(GoodputStatsTest, CoefficientOfVariationIsZeroWhenFlat) {
  const std::vector<double> flat = {5.0, 5.0, 5.0};
  const std::vector<double> swing = {0.0, 10.0, 0.0, 10.0};
  EXPECT_DOUBLE_EQ(CoefficientOfVariation(flat), 0.0);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation(swing), 1.0);
  EXPECT_DOUBLE_EQ(CoefficientOfVariation({}), 0.0);
}

}  // namespace
}  // namespace atp::sim
