// End-to-end runs of the real worker, PS and switch engines on the simulator:
// results are exact and identical on every worker, and runs are deterministic.
#include <memory>

#include "gtest/gtest.h"
#include "lib/sim/experiment.h"

namespace atp::sim {
namespace {

ExperimentConfig Config(int racks, std::vector<int> workers_per_rack, size_t values,
                        int iterations) {
  ExperimentConfig config;
  config.topology.worker_racks = racks;
  config.topology.jobs.push_back(
      JobPlacement{.job = 1, .workers_per_rack = std::move(workers_per_rack)});
  config.workload.values = values;
  config.workload.iterations = iterations;
  return config;
}

ExperimentResult RunOrDie(const ExperimentConfig& config) {
  auto experiment = Experiment::Create(config);
  EXPECT_TRUE(experiment.ok()) << experiment.status();
  if (!experiment.ok()) return {};
  return (*experiment)->Run();
}

void ExpectExact(const ExperimentResult& result) {
  EXPECT_TRUE(result.completed);
  EXPECT_TRUE(result.exact);
  for (const JobResult& job : result.jobs) {
    EXPECT_TRUE(job.completed) << "job " << +job.job;
    EXPECT_TRUE(job.exact) << "job " << +job.job << ": " << job.first_error;
    EXPECT_EQ(job.results_checked, static_cast<uint64_t>(job.workers) * 2u) << +job.job;
  }
  EXPECT_EQ(result.packets_outstanding_at_end, 0u);
}

TEST(EndToEndTest, OneRackIsExactAndTheSwitchAggregatesEverything) {
  ExperimentConfig config = Config(1, {4}, 62 * 1000, 2);
  const ExperimentResult result = RunOrDie(config);
  ExpectExact(result);
  ASSERT_EQ(result.jobs.size(), 1u);
  // Without loss the ToR completes every fragment: one frame per fragment
  // reaches the PS.
  EXPECT_EQ(result.jobs[0].frames_into_ps, 2000u);
  EXPECT_EQ(result.jobs[0].retransmissions, 0u);
  EXPECT_EQ(result.jobs[0].aggregators_in_use_at_end, 0u);
  EXPECT_GT(result.jobs[0].goodput_gbps, 0.0);
}

TEST(EndToEndTest, TwoRacksAggregateAtTwoLevelsAndAreExact) {
  ExperimentConfig config = Config(2, {2, 2}, 62 * 1000, 2);
  const ExperimentResult result = RunOrDie(config);
  ExpectExact(result);
  // Level 2 (the PS's ToR) merges the two racks: one frame per fragment.
  EXPECT_EQ(result.jobs[0].frames_into_ps, 2000u);
}

TEST(EndToEndTest, RackOnlyAggregationSendsOneFramePerRackToThePs) {
  ExperimentConfig config = Config(2, {2, 2}, 62 * 1000, 2);
  config.topology.aggregation = AggregationMode::kRackOnly;
  const ExperimentResult result = RunOrDie(config);
  ExpectExact(result);
  EXPECT_EQ(result.jobs[0].frames_into_ps, 4000u);
}

TEST(EndToEndTest, OnePercentLossOnEveryLinkIsStillExact) {
  ExperimentConfig config = Config(2, {2, 2}, 62 * 1000, 2);
  config.impairments.loss = 0.01;
  config.seed = 7;
  const ExperimentResult result = RunOrDie(config);
  ExpectExact(result);
  EXPECT_GT(result.filter_drops, 0u);
  EXPECT_GT(result.jobs[0].retransmissions, 0u);
}

TEST(EndToEndTest, SameSeedGivesIdenticalRuns) {
  ExperimentConfig config = Config(2, {3, 2}, 62 * 500, 2);
  config.impairments.loss = 0.01;
  config.impairments.reorder = 0.01;
  config.seed = 99;
  const ExperimentResult a = RunOrDie(config);
  const ExperimentResult b = RunOrDie(config);
  ExpectExact(a);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.frame_deliveries, b.frame_deliveries);
  EXPECT_EQ(a.simulated_time, b.simulated_time);
  EXPECT_EQ(a.filter_drops, b.filter_drops);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  EXPECT_EQ(a.jobs[0].completion_time, b.jobs[0].completion_time);
  EXPECT_EQ(a.jobs[0].retransmissions, b.jobs[0].retransmissions);
  EXPECT_EQ(a.jobs[0].frames_into_ps, b.jobs[0].frames_into_ps);
  // A different seed gives a different run.
  config.seed = 100;
  const ExperimentResult c = RunOrDie(config);
  ExpectExact(c);
  EXPECT_NE(a.events, c.events);
}

}  // namespace
}  // namespace atp::sim
