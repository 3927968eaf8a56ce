#include "examples/atp_sim/scenarios.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "atp/status_macros.h"
#include "sim/experiment.h"
#include "examples/atp_sim/skip_scenarios.h"
#include "sim/goodput_stats.h"

namespace atp::sim_tool {
namespace {

using sim::ExperimentConfig;
using sim::ExperimentResult;
using sim::JobPlacement;
using sim::JobResult;
using switch_emulator::PartitionMode;
using worker::CongestionController;

constexpr std::array<ScenarioInfo, 6> kScenarios = {{
    {"dynamic-vs-static",
     "3 jobs, aggregators at 100%, 66% and 33% of demand: dynamic vs static allocation"},
    {"hash-vs-sequential", "8 jobs on one array: hashed vs sequential aggregator indices"},
    {"loss-sweep", "one job, loss 0.001% to 1% on every link: goodput vs the lossless run"},
    {"ps-ingress", "frames into the PS: two-level vs rack-only vs no aggregation, 3 racks"},
    {"cc-on-off", "2 jobs through one bottleneck, half the aggregators: CC on vs off"},
    {"skip-topologies",
     "SkipReduce: ring, halving-doubling and tree skipping k reduce steps, beside ATP"},
}};

// Runner: runs experiments and keeps the totals every table reports.
class Runner {
 public:
  // `ps`: the PS model every run of the scenario gets (atp-sim --ps_*).
  Runner(ScenarioTable* table, const sim::PsModel& ps) : table_(table), ps_(ps) {}

  absl::StatusOr<ExperimentResult> Run(ExperimentConfig config) {
    config.topology.ps_model = ps_;
    absl::StatusOr<std::unique_ptr<sim::Experiment>> experiment = sim::Experiment::Create(config);
    if (!experiment.ok()) return experiment.status();
    // The wall clock is read outside the simulation, only to report speed.
    const auto start = std::chrono::steady_clock::now();
    ExperimentResult result = (*experiment)->Run();
    table_->wall_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++table_->runs;
    table_->frames += result.frame_deliveries;
    table_->exact = table_->exact && result.exact;
    return result;
  }

 private:
  ScenarioTable* table_;
  sim::PsModel ps_;
};

std::vector<int> Spread(int workers, int racks) { return sim::SpreadEvenly(workers, racks); }

double Ms(TimeDelta d) { return d.ToSeconds() * 1e3; }

double MeanCompletionMs(const ExperimentResult& result) {
  double sum = 0.0;
  for (const JobResult& job : result.jobs) sum += Ms(job.completion_time);
  return result.jobs.empty() ? 0.0 : sum / static_cast<double>(result.jobs.size());
}

int64_t Total(const ExperimentResult& result, uint64_t JobResult::*field) {
  uint64_t sum = 0;
  for (const JobResult& job : result.jobs) sum += job.*field;
  return static_cast<int64_t>(sum);
}

std::string YesNo(bool value) { return value ? "yes" : "NO"; }

// The window slots of every queue: also the most aggregators a job's queue
// can hold at once on one switch, i.e. a job's demand.
constexpr uint32_t kSlots = 256;

// dynamic-vs-static: three jobs of 4 workers in one rack, starting a third
// of a run apart, each worker computing for a random time (up to that third)
// before each iteration, so jobs come and go as in a shared cluster; on an
// array of 100%, 66% and 33% of their summed demand.
absl::StatusOr<ScenarioTable> DynamicVsStatic(Scale scale, uint64_t seed, const sim::PsModel& ps) {
  ScenarioTable table;
  table.title =
      "3 jobs x 4 workers in one rack, started a third of a run apart, each worker computing "
      "a random time before each of 3 iterations";
  table.paper = "dynamic allocation is 38% faster than static at 33% of demand";
  table.notes = {
      "demand = 3 jobs x 256 window slots; jct = job completion time, mean of the 3 jobs",
      "faster = static jct / dynamic jct - 1; collisions: fragments the PS had to rehash"};
  table.columns = {"memory",     "aggregators",       "static_jct_ms",      "dynamic_jct_ms",
                   "faster_pct", "static_collisions", "dynamic_collisions", "exact"};
  Runner runner(&table, ps);
  const size_t fragments = scale == Scale::kFull ? 16000 : 3000;
  // About a third of one job's run alone (100 Gb/s, 4 workers).
  const TimeDelta stagger = TimeDelta::FromNanoseconds(static_cast<int64_t>(fragments) * 25);
  double faster_at_third = 0.0;
  for (const int percent : {100, 66, 33}) {
    const size_t aggregators = 3 * kSlots * static_cast<size_t>(percent) / 100;
    double jct[2] = {0, 0};
    int64_t collisions[2] = {0, 0};
    bool exact = true;
    for (const PartitionMode mode : {PartitionMode::kStatic, PartitionMode::kDynamic}) {
      ExperimentConfig config;
      config.topology.worker_racks = 1;
      for (int j = 0; j < 3; ++j) {
        config.topology.jobs.push_back(JobPlacement{.job = static_cast<uint8_t>(j + 1),
                                                    .workers_per_rack = {4},
                                                    .start_time = TimePoint::Zero() + stagger * j});
      }
      config.topology.switches.aggregators = aggregators;
      config.topology.switches.partition = mode;
      config.workload.values = 62 * fragments;
      config.workload.iterations = 3;
      // Compute time between iterations, varying per worker: jobs (and a
      // job's workers) are not all communicating at once.
      config.workload.start_jitter = stagger;
      config.workload.seed = seed;
      config.seed = seed;
      ATP_ASSIGN_OR_RETURN(ExperimentResult result, runner.Run(config));
      const int k = mode == PartitionMode::kStatic ? 0 : 1;
      jct[k] = MeanCompletionMs(result);
      collisions[k] = Total(result, &JobResult::collisions);
      exact = exact && result.exact;
    }
    const double faster = jct[1] > 0 ? (jct[0] / jct[1] - 1.0) * 100.0 : 0.0;
    if (percent == 33) faster_at_third = faster;
    table.rows.push_back({absl::StrCat(percent, "%"), static_cast<int64_t>(aggregators), jct[0],
                          jct[1], faster, collisions[0], collisions[1], YesNo(exact)});
  }
  table.finding =
      absl::StrFormat("dynamic allocation is %.0f%% %s than static at 33%% of demand",
                      std::abs(faster_at_third), faster_at_third >= 0 ? "faster" : "slower");
  return table;
}

// hash-vs-sequential: 8 jobs of 2 workers in one rack on one array.
absl::StatusOr<ScenarioTable> HashVsSequential(Scale scale, uint64_t seed, const sim::PsModel& ps) {
  ScenarioTable table;
  table.title = "8 jobs x 4 workers in one rack sharing one switch's aggregators";
  table.paper =
      "hashing spreads jobs over the array; a sequential (non-hashed) index makes "
      "every job start on the same aggregators and collide";
  table.notes = {"demand = 8 jobs x 256 window slots; jct = mean job completion time",
                 "collisions: fragments the PS rehashed; frames_to_ps: all jobs"};
  table.columns = {"memory",       "aggregators", "index", "collisions",
                   "frames_to_ps", "jct_ms",      "exact"};
  Runner runner(&table, ps);
  const size_t fragments = scale == Scale::kFull ? 8000 : 1500;
  int64_t collisions[2] = {0, 0};  // at 100%: hash, sequential
  double jct[2] = {0, 0};
  for (const int percent : {100, 50}) {
    const size_t aggregators = 8 * kSlots * static_cast<size_t>(percent) / 100;
    for (const protocol::IndexPolicy policy :
         {protocol::IndexPolicy::kHashed, protocol::IndexPolicy::kSequential}) {
      ExperimentConfig config;
      config.topology.worker_racks = 1;
      for (int j = 0; j < 8; ++j) {
        config.topology.jobs.push_back(
            JobPlacement{.job = static_cast<uint8_t>(j + 1), .workers_per_rack = {4}});
      }
      config.topology.switches.aggregators = aggregators;
      config.topology.worker.index_policy = policy;
      config.workload.values = 62 * fragments;
      config.workload.start_jitter = TimeDelta::FromMicroseconds(20);
      config.workload.seed = seed;
      config.seed = seed;
      ATP_ASSIGN_OR_RETURN(ExperimentResult result, runner.Run(config));
      const bool hashed = policy == protocol::IndexPolicy::kHashed;
      if (percent == 100) {
        collisions[hashed ? 0 : 1] = Total(result, &JobResult::collisions);
        jct[hashed ? 0 : 1] = MeanCompletionMs(result);
      }
      table.rows.push_back({absl::StrCat(percent, "%"), static_cast<int64_t>(aggregators),
                            hashed ? "hash" : "sequential", Total(result, &JobResult::collisions),
                            Total(result, &JobResult::frames_into_ps), MeanCompletionMs(result),
                            YesNo(result.exact)});
    }
  }
  table.finding = absl::StrFormat(
      "at 100%% of demand sequential indices collide %d times vs %d hashed, jct %.3f vs %.3f ms",
      collisions[1], collisions[0], jct[1], jct[0]);
  return table;
}

// loss-sweep: one job of 4 workers in 2 racks (two-level aggregation).
absl::StatusOr<ScenarioTable> LossSweep(Scale scale, uint64_t seed, const sim::PsModel& ps) {
  ScenarioTable table;
  table.title = "1 job x 4 workers in 2 racks, two-level aggregation, random loss on every link";
  table.paper = "below 0.1% loss almost no loss of throughput";
  table.notes = {"goodput: tensor bits x iterations / completion time, per worker",
                 "of_lossless = goodput / goodput at 0% loss"};
  table.columns = {"loss_pct",        "jct_ms",   "goodput_gbps", "of_lossless_pct",
                   "retransmissions", "timeouts", "exact"};
  table.precision = 3;
  Runner runner(&table, ps);
  const size_t fragments = scale == Scale::kFull ? 16912 : 4228;  // 4 MiB, 1 MiB
  const int iterations = scale == Scale::kFull ? 3 : 2;
  double lossless = 0.0;
  double at_tenth = 0.0;
  for (const double loss : {0.0, 0.00001, 0.0001, 0.001, 0.01}) {
    ExperimentConfig config;
    config.topology.worker_racks = 2;
    config.topology.jobs.push_back(JobPlacement{.job = 1, .workers_per_rack = Spread(4, 2)});
    config.workload.values = 62 * fragments;
    config.workload.iterations = iterations;
    config.workload.start_jitter = TimeDelta::FromMicroseconds(10);
    config.workload.seed = seed;
    config.seed = seed;
    config.impairments.loss = loss;
    config.time_limit = TimeDelta::FromSeconds(60);
    ATP_ASSIGN_OR_RETURN(ExperimentResult result, runner.Run(config));
    const JobResult& job = result.jobs.front();
    if (loss == 0.0) lossless = job.goodput_gbps;
    const double relative = lossless > 0 ? job.goodput_gbps / lossless * 100.0 : 0.0;
    if (loss == 0.001) at_tenth = relative;
    table.rows.push_back({absl::StrFormat("%g", loss * 100), Ms(job.completion_time),
                          job.goodput_gbps, relative, static_cast<int64_t>(job.retransmissions),
                          static_cast<int64_t>(job.timeouts), YesNo(result.exact)});
  }
  table.finding =
      absl::StrFormat("at 0.1%% loss the job keeps %.0f%% of its lossless goodput", at_tenth);
  return table;
}

// ps-ingress: one job of 12 workers, 4 in each of 3 racks.
absl::StatusOr<ScenarioTable> PsIngress(Scale scale, uint64_t seed, const sim::PsModel& ps) {
  ScenarioTable table;
  table.title = "1 job x 12 workers, 4 in each of 3 racks, PS in a rack of its own";
  table.paper = "two-level aggregation cuts the PS's ingress traffic by 66% vs rack-only";
  table.notes = {"per_fragment = frames into the PS / (fragments x iterations)",
                 "less_than_rack_only = 1 - frames / frames with rack-only aggregation"};
  table.columns = {"levels", "frames_to_ps", "per_fragment", "less_than_rack_only_pct",
                   "jct_ms", "exact"};
  Runner runner(&table, ps);
  const size_t fragments = scale == Scale::kFull ? 16000 : 2000;
  const int iterations = 2;
  struct Mode {
    const char* name;
    sim::AggregationMode mode;
  };
  int64_t rack_only = 0;
  double two_level_cut = 0.0;
  std::vector<std::pair<const char*, ExperimentResult>> results;
  for (const Mode mode :
       {Mode{"rack", sim::AggregationMode::kRackOnly}, Mode{"two", sim::AggregationMode::kTwoLevel},
        Mode{"none", sim::AggregationMode::kNone}}) {
    ExperimentConfig config;
    config.topology.worker_racks = 3;
    config.topology.jobs.push_back(JobPlacement{.job = 1, .workers_per_rack = {4, 4, 4}});
    config.topology.aggregation = mode.mode;
    config.workload.values = 62 * fragments;
    config.workload.iterations = iterations;
    config.workload.start_jitter = TimeDelta::FromMicroseconds(10);
    config.workload.seed = seed;
    config.seed = seed;
    ATP_ASSIGN_OR_RETURN(ExperimentResult result, runner.Run(config));
    const JobResult& job = result.jobs.front();
    const auto frames = static_cast<int64_t>(job.frames_into_ps);
    if (mode.mode == sim::AggregationMode::kRackOnly) rack_only = frames;
    const double cut =
        rack_only > 0 ? (1.0 - static_cast<double>(frames) / static_cast<double>(rack_only)) * 100
                      : 0.0;
    if (mode.mode == sim::AggregationMode::kTwoLevel) two_level_cut = cut;
    table.rows.push_back({mode.name, frames,
                          static_cast<double>(frames) / static_cast<double>(fragments * iterations),
                          cut, Ms(job.completion_time), YesNo(result.exact)});
  }
  table.finding =
      absl::StrFormat("two-level aggregation sends %.1f%% fewer frames into the PS", two_level_cut);
  return table;
}

// cc-on-off: the fairness test's bottleneck (tests/sim/fairness_test.cc)
// with half the aggregators the two jobs demand.
absl::StatusOr<ScenarioTable> CcOnOff(Scale scale, uint64_t seed, const sim::PsModel& ps) {
  ScenarioTable table;
  table.title =
      "2 jobs x 4 workers in 2 racks, one 100 Gb/s bottleneck toward the PS rack (256-frame "
      "queues, ECN above 32), aggregators = half of 2 x 256";
  table.paper = "with congestion control goodput is stable; without it, it swings wildly";
  table.notes = {
      "goodput in 50 us bins over the second half of the time both jobs ran",
      "cv = std dev / mean of a job's bins (mean of the jobs); jain = fairness of the means",
      "cc on starts at a window of 32 and adapts; cc off keeps a fixed window of 200"};
  table.columns = {"cc",   "goodput_gbps", "cv",       "min_bin_gbps", "max_bin_gbps",
                   "jain", "tail_drops",   "timeouts", "jct_ms",       "exact"};
  table.precision = 3;
  Runner runner(&table, ps);
  const size_t fragments = scale == Scale::kFull ? 40000 : 8000;
  double cv[2] = {0, 0};
  for (const bool cc_on : {true, false}) {
    ExperimentConfig config;
    config.topology.worker_racks = 2;
    for (int j = 1; j <= 2; ++j) {
      config.topology.jobs.push_back(
          JobPlacement{.job = static_cast<uint8_t>(j), .workers_per_rack = {2, 2}});
    }
    config.topology.host_link.queue_capacity_packets = 256;
    config.topology.fabric_link.queue_capacity_packets = 256;
    config.topology.switches.ecn_threshold = 32;
    config.topology.switches.aggregators = kSlots;  // half of 2 jobs x 256
    config.topology.worker.congestion_control =
        cc_on ? CongestionController::Mode::kAimd : CongestionController::Mode::kFixedWindow;
    config.topology.worker.initial_window = cc_on ? 32 : 200;
    config.workload.values = 62 * fragments;
    config.workload.start_jitter = TimeDelta::FromMicroseconds(10);
    config.workload.seed = seed;
    config.seed = seed;
    config.sample_interval = TimeDelta::FromMicroseconds(50);
    config.time_limit = TimeDelta::FromSeconds(60);
    ATP_ASSIGN_OR_RETURN(ExperimentResult result, runner.Run(config));
    const sim::ShareStats shares = sim::SecondHalfShares(result, config.sample_interval);
    double mean = 0.0;
    for (double g : shares.mean_gbps) mean += g / static_cast<double>(shares.mean_gbps.size());
    double low = 1e300;
    double high = 0.0;
    for (const JobResult& job : result.jobs) {
      for (int b = shares.first_bin; b < shares.end_bin; ++b) {
        low = std::min(low, job.goodput_series_gbps[static_cast<size_t>(b)]);
        high = std::max(high, job.goodput_series_gbps[static_cast<size_t>(b)]);
      }
    }
    if (shares.end_bin == shares.first_bin) low = 0.0;
    cv[cc_on ? 0 : 1] = shares.mean_cv;
    table.rows.push_back({cc_on ? "on" : "off", mean, shares.mean_cv, low, high, shares.jain,
                          static_cast<int64_t>(result.tail_drops),
                          Total(result, &JobResult::timeouts), MeanCompletionMs(result),
                          YesNo(result.exact)});
  }
  table.finding = absl::StrFormat(
      "binned goodput varies %.2f (cv) with congestion control and %.2f without", cv[0], cv[1]);
  return table;
}

using ScenarioFn = absl::StatusOr<ScenarioTable> (*)(Scale, uint64_t, const sim::PsModel&);
// SkipReduce's collectives have no PS: atp-sim refuses --ps_* with it.
absl::StatusOr<ScenarioTable> SkipTopologiesWithoutPs(Scale scale, uint64_t seed,
                                                      const sim::PsModel&) {
  return SkipTopologies(scale, seed);
}
constexpr std::array<ScenarioFn, kScenarios.size()> kRunners = {
    DynamicVsStatic, HashVsSequential, LossSweep, PsIngress, CcOnOff, SkipTopologiesWithoutPs};

}  // namespace

std::span<const ScenarioInfo> Scenarios() { return kScenarios; }

std::string ScenarioNames() {
  std::vector<std::string> names;
  for (const ScenarioInfo& info : kScenarios) names.emplace_back(info.name);
  return absl::StrJoin(names, ", ");
}

absl::StatusOr<ScenarioTable> RunScenario(std::string_view name, Scale scale, uint64_t seed,
                                          const sim::PsModel& ps) {
  for (size_t i = 0; i < kScenarios.size(); ++i) {
    if (kScenarios[i].name != name) continue;
    ATP_ASSIGN_OR_RETURN(ScenarioTable table, kRunners[i](scale, seed, ps));
    if (ps.link_bps > 0 || ps.packet_service > TimeDelta::Zero()) {
      table.notes.push_back(absl::StrFormat(
          "PS model: link %s, %lld ns per received frame (--ps_link_gbps, --ps_packet_ns)",
          ps.link_bps > 0 ? absl::StrCat(ps.link_bps / 1e9, " Gb/s") : "as every host's",
          static_cast<long long>(ps.packet_service.ToNanoseconds())));
    }
    table.name = std::string(name);
    return table;
  }
  return absl::NotFoundError(
      absl::StrCat("unknown scenario '", std::string(name), "'; scenarios: ", ScenarioNames()));
}

}  // namespace atp::sim_tool
