// End-to-end runs of the real worker, PS and switch engines on the simulator:
// results are exact and identical on every worker, and runs are deterministic.
#include <bit>
#include <cstdint>
#include <memory>

#include "gtest/gtest.h"
#include "sim/experiment.h"

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

// ExpectIdentical: every field of two results equal (doubles compared bit
// for bit: the same operations in the same order give the same bits).
void ExpectIdentical(const ExperimentResult& a, const ExperimentResult& b) {
  EXPECT_EQ(a.completed, b.completed);
  EXPECT_EQ(a.exact, b.exact);
  EXPECT_EQ(a.simulated_time, b.simulated_time);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.frame_deliveries, b.frame_deliveries);
  EXPECT_EQ(a.tail_drops, b.tail_drops);
  EXPECT_EQ(a.filter_drops, b.filter_drops);
  EXPECT_EQ(a.filter_actions, b.filter_actions);
  EXPECT_EQ(a.endpoint_decode_errors, b.endpoint_decode_errors);
  EXPECT_EQ(a.switch_malformed, b.switch_malformed);
  EXPECT_EQ(a.aggregators_in_use_at_end, b.aggregators_in_use_at_end);
  EXPECT_EQ(a.packets_outstanding_at_end, b.packets_outstanding_at_end);
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (size_t j = 0; j < a.jobs.size(); ++j) {
    const JobResult& x = a.jobs[j];
    const JobResult& y = b.jobs[j];
    EXPECT_EQ(x.completion_time, y.completion_time) << j;
    EXPECT_EQ(std::bit_cast<uint64_t>(x.goodput_gbps), std::bit_cast<uint64_t>(y.goodput_gbps)) << j;
    EXPECT_EQ(x.frames_into_ps, y.frames_into_ps) << j;
    EXPECT_EQ(x.ps_param_sent, y.ps_param_sent) << j;
    EXPECT_EQ(x.retransmissions, y.retransmissions) << j;
    EXPECT_EQ(x.timeouts, y.timeouts) << j;
    EXPECT_EQ(x.collisions, y.collisions) << j;
    EXPECT_EQ(x.ecn_marks, y.ecn_marks) << j;
    EXPECT_EQ(x.overflows, y.overflows) << j;
    EXPECT_EQ(x.aggregators_in_use_at_end, y.aggregators_in_use_at_end) << j;
    EXPECT_EQ(x.results_checked, y.results_checked) << j;
    EXPECT_EQ(x.exact, y.exact) << j;
    ASSERT_EQ(x.goodput_series_gbps.size(), y.goodput_series_gbps.size()) << j;
    for (size_t i = 0; i < x.goodput_series_gbps.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint64_t>(x.goodput_series_gbps[i]),
                std::bit_cast<uint64_t>(y.goodput_series_gbps[i]));
    }
  }
}

// The switches are the product's switch host over simulated ports: two jobs
// through one bottleneck with a low ECN threshold (marks on forwarded and on
// aggregated frames), loss and reordering, run twice with one seed: every
// counter, time and goodput sample is the same.
TEST(EndToEndTest, SameSeedGivesBitIdenticalResultsWithEcnAndTwoJobs) {
  ExperimentConfig config;
  config.topology.worker_racks = 2;
  config.topology.jobs.push_back(JobPlacement{.job = 1, .workers_per_rack = {2, 2}});
  config.topology.jobs.push_back(JobPlacement{.job = 2, .workers_per_rack = {2, 1}});
  config.topology.switches.ecn_threshold = 4;
  config.workload.values = 62 * 2000;
  config.workload.iterations = 2;
  config.impairments.loss = 0.002;
  config.impairments.reorder = 0.002;
  config.sample_interval = TimeDelta::FromMicroseconds(100);
  config.seed = 7;
  const ExperimentResult a = RunOrDie(config);
  const ExperimentResult b = RunOrDie(config);
  EXPECT_TRUE(a.exact);
  EXPECT_GT(a.jobs[0].ecn_marks + a.jobs[1].ecn_marks, 0u);
  ExpectIdentical(a, b);
}

// The inputs made on a second thread, one iteration ahead, give the run the
// simulation thread gives alone: two jobs, three iterations, fragments on the
// float path (overflow), workers starting at jittered times, loss; and every
// result is checked exact either way.
TEST(EndToEndTest, InputThreadGivesTheSameRunAsOneThread) {
  ExperimentConfig config;
  config.topology.worker_racks = 2;
  config.topology.jobs.push_back(JobPlacement{.job = 1, .workers_per_rack = {3, 2}});
  config.topology.jobs.push_back(JobPlacement{.job = 2, .workers_per_rack = {1, 2}});
  config.workload.values = 62 * 700 + 5;
  config.workload.iterations = 3;
  config.workload.overflow_every = 9;
  config.workload.start_jitter = TimeDelta::FromMicroseconds(20);
  config.impairments.loss = 0.002;
  config.sample_interval = TimeDelta::FromMicroseconds(100);
  config.seed = 11;
  config.input_thread = false;
  const ExperimentResult alone = RunOrDie(config);
  config.input_thread = true;
  const ExperimentResult helped = RunOrDie(config);
  EXPECT_TRUE(alone.exact);
  ASSERT_EQ(alone.jobs.size(), 2u);
  EXPECT_EQ(alone.jobs[0].results_checked, 15u);
  EXPECT_EQ(alone.jobs[1].results_checked, 9u);
  EXPECT_GT(alone.jobs[0].overflows, 0u);
  ExpectIdentical(alone, helped);
}

// A run stopped by its time limit leaves inputs being made for iterations
// that never start: the experiment goes away without waiting for them to be
// used (each driver cancels its own) and without touching freed memory
// (the sanitizer builds run this).
TEST(EndToEndTest, UnfinishedRunWithInputThreadTearsDownCleanly) {
  ExperimentConfig config = Config(1, {4}, 62 * 4000, 50);
  config.time_limit = TimeDelta::FromMicroseconds(30);
  config.settle_time = TimeDelta::FromMicroseconds(1);
  config.input_thread = true;
  const ExperimentResult result = RunOrDie(config);
  EXPECT_FALSE(result.completed);
  ASSERT_EQ(result.jobs.size(), 1u);
  EXPECT_FALSE(result.jobs[0].completed);
}

// Two partitions (sim/network.h): the network simulated on two threads in
// windows is exact, and gives the same bits on every run, with loss,
// reordering and duplicates on every link, two jobs across both halves,
// fragments on the float path, jittered starts and goodput samples (taken
// between windows).
ExperimentConfig TwoPartitionConfig() {
  ExperimentConfig config;
  config.topology.worker_racks = 4;
  config.topology.partitions = 2;
  config.topology.jobs.push_back(JobPlacement{.job = 1, .workers_per_rack = {2, 1, 2, 1}});
  config.topology.jobs.push_back(JobPlacement{.job = 2, .workers_per_rack = {1, 1, 1, 1}});
  config.workload.values = 62 * 600 + 3;
  config.workload.iterations = 3;
  config.workload.overflow_every = 7;
  config.workload.start_jitter = TimeDelta::FromMicroseconds(20);
  config.impairments.loss = 0.002;
  config.impairments.reorder = 0.002;
  config.impairments.duplicate = 0.002;
  config.sample_interval = TimeDelta::FromMicroseconds(50);
  config.seed = 5;
  return config;
}

TEST(EndToEndTest, TwoPartitionsAreExactAndTheSameEveryRun) {
  const ExperimentConfig config = TwoPartitionConfig();
  auto experiment = Experiment::Create(config);
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  // The default rule, also on a machine with one core (which would keep
  // every window on one thread).
  (*experiment)->network().set_events_for_two_threads(Network::kEventsForTwoThreads);
  const ExperimentResult a = (*experiment)->Run();
  // Busy windows ran on both threads, quiet ones on one.
  const Network& net = (*experiment)->network();
  EXPECT_GT(net.windows_on_two_threads(), 0u);
  EXPECT_LT(net.windows_on_two_threads(), net.windows());
  const ExperimentResult b = RunOrDie(config);
  EXPECT_TRUE(a.completed);
  EXPECT_TRUE(a.exact);
  ASSERT_EQ(a.jobs.size(), 2u);
  EXPECT_EQ(a.jobs[0].results_checked, 18u);
  EXPECT_EQ(a.jobs[1].results_checked, 12u);
  EXPECT_GT(a.jobs[0].overflows, 0u);
  EXPECT_GT(a.filter_drops, 0u);
  EXPECT_FALSE(a.jobs[0].goodput_series_gbps.empty());
  EXPECT_EQ(a.packets_outstanding_at_end, 0u);
  ExpectIdentical(a, b);
}

// Which thread runs a window does not change the run: every window on both
// threads, and every window on one, give the same bits.
TEST(EndToEndTest, TwoPartitionsGiveTheSameRunOnOneThreadOrTwo) {
  const ExperimentConfig config = TwoPartitionConfig();
  auto run = [&](uint64_t events_for_two_threads, uint64_t* on_two_threads) {
    auto experiment = Experiment::Create(config);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    if (!experiment.ok()) return ExperimentResult{};
    (*experiment)->network().set_events_for_two_threads(events_for_two_threads);
    ExperimentResult result = (*experiment)->Run();
    *on_two_threads = (*experiment)->network().windows_on_two_threads();
    EXPECT_EQ(*on_two_threads == (*experiment)->network().windows(), events_for_two_threads == 0);
    return result;
  };
  uint64_t all = 0;
  uint64_t none = 0;
  const ExperimentResult parallel = run(0, &all);
  const ExperimentResult serial = run(UINT64_MAX, &none);
  EXPECT_GT(all, 0u);
  EXPECT_EQ(none, 0u);
  EXPECT_TRUE(parallel.exact);
  ExpectIdentical(parallel, serial);
}

// Experiment::At and KillWorker with two partitions run between windows,
// with every clock at their time: a worker of the second half dies, its job
// cannot finish, the other job does, and the run ends as with one partition.
TEST(EndToEndTest, TwoPartitionsRunActionsBetweenWindowsAtTheirTime) {
  ExperimentConfig config = TwoPartitionConfig();
  config.impairments = {};
  config.sample_interval = TimeDelta::Zero();
  const TimePoint kill = TimePoint::FromNanoseconds(30'000);
  auto run = [&](std::vector<int64_t>* seen_ns) {
    auto experiment = Experiment::Create(config);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    if (!experiment.ok()) return ExperimentResult{};
    Experiment& e = **experiment;
    EXPECT_EQ(e.network().partitions(), 2);
    // Worker 5 of job 1 is in rack 3: the second partition.
    EXPECT_EQ(e.network().job(0).workers[5]->partition(), 1);
    e.At(kill, [&e, seen_ns] {
      seen_ns->push_back(e.network().sim(0).Now().ToNanoseconds());
      seen_ns->push_back(e.network().sim(1).Now().ToNanoseconds());
    });
    e.KillWorker(/*job=*/0, /*worker=*/5, kill);
    return e.Run();
  };
  std::vector<int64_t> seen_a;
  std::vector<int64_t> seen_b;
  const ExperimentResult a = run(&seen_a);
  const ExperimentResult b = run(&seen_b);
  EXPECT_EQ(seen_a, (std::vector<int64_t>{30'000, 30'000}));
  ASSERT_EQ(a.jobs.size(), 2u);
  EXPECT_FALSE(a.jobs[0].completed);
  EXPECT_TRUE(a.jobs[1].completed);
  EXPECT_TRUE(a.jobs[1].exact);
  ExpectIdentical(a, b);
}

TEST(EndToEndTest, TwoPartitionsNeedACoreAndALinkDelay) {
  ExperimentConfig config = Config(1, {4}, 62 * 10, 1);
  config.topology.partitions = 2;
  auto one_rack = Experiment::Create(config);
  ASSERT_FALSE(one_rack.ok());
  EXPECT_NE(one_rack.status().message().find("partitions"), std::string_view::npos);
  config = Config(2, {2, 2}, 62 * 10, 1);
  config.topology.partitions = 2;
  config.topology.fabric_link.propagation_delay = TimeDelta::Zero();
  EXPECT_FALSE(Experiment::Create(config).ok());
  config.topology.partitions = 3;
  config.topology.fabric_link.propagation_delay = TimeDelta::FromMicroseconds(1);
  EXPECT_FALSE(Experiment::Create(config).ok());
  config.topology.partitions = 2;
  EXPECT_TRUE(Experiment::Create(config).ok());
}

// The PS model (TopologyConfig::ps_model): a slow PS link and a per-frame
// service time keep runs bit-identical under one seed, and cost what they
// should: with no in-network aggregation every frame reaches the PS, so the
// job takes at least frames x service time, and longer than with a free PS.
TEST(EndToEndTest, PsModelIsDeterministicAndCostsItsServiceTime) {
  ExperimentConfig config = Config(1, {4}, 62 * 1000, 2);
  config.topology.aggregation = AggregationMode::kNone;
  config.impairments.loss = 0.001;
  config.seed = 11;
  const ExperimentResult free_ps = RunOrDie(config);
  ExpectExact(free_ps);
  config.topology.ps_model.link_bps = 25e9;
  config.topology.ps_model.packet_service = TimeDelta::FromNanoseconds(400);
  const ExperimentResult a = RunOrDie(config);
  const ExperimentResult b = RunOrDie(config);
  ExpectExact(a);
  ExpectIdentical(a, b);
  const TimeDelta served = TimeDelta::FromNanoseconds(400) * static_cast<int64_t>(a.jobs[0].frames_into_ps);
  EXPECT_GE(a.jobs[0].completion_time, served);
  EXPECT_GT(a.jobs[0].completion_time, free_ps.jobs[0].completion_time);
}

TEST(EndToEndTest, BadPsModelIsRefused) {
  ExperimentConfig config = Config(1, {2}, 62 * 10, 1);
  config.topology.ps_model.packet_service = TimeDelta::FromNanoseconds(-1);
  EXPECT_FALSE(Experiment::Create(config).ok());
  config.topology.ps_model.packet_service = TimeDelta::Zero();
  config.topology.ps_model.link_bps = 10;  // 10 b/s: below 1 Mb/s
  EXPECT_FALSE(Experiment::Create(config).ok());
}

}  // namespace
}  // namespace atp::sim
