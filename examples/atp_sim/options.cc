#include "examples/atp_sim/options.h"

#include <cmath>
#include <cstdint>
#include <string>

#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "lib/tool/flag_checks.h"
#include "switch_emulator/pipeline/aggregator.h"

ABSL_FLAG(int, workers, 4, "Workers per job, 1..1024 (at most 32 per rack per job).");
ABSL_FLAG(int, racks, 1,
          "Worker racks, 1..32. With one rack the PS hosts share its ToR; with more, they get a "
          "rack of their own behind a core switch and their ToR aggregates at level 2.");
ABSL_FLAG(int, jobs, 1, "Concurrent jobs, 1..255: ids 1..J, each with --workers workers and its "
                        "own PS host, sharing every switch's aggregators.");
ABSL_FLAG(int64_t, aggregators, 4096, "Aggregators per switch, 1..16777216.");
ABSL_FLAG(double, loss, 0.0,
          "Random loss probability per frame on every link (both directions), 0..1; "
          "0.01 is 1%.");
ABSL_FLAG(double, tensor_mb, 1.0,
          "Tensor size per worker and iteration, in MiB of float32 (> 0; 1 MiB = 262144 values).");
ABSL_FLAG(int, iterations, 1, "Allreduce operations each worker runs back to back, >= 1.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the run: inputs and every link filter. Same seed, same run.");
ABSL_FLAG(std::string, allocation, "dynamic",
          "Aggregator allocation: 'dynamic' (every job hashes over the whole array) or 'static' "
          "(each job only its equal slice of each switch).");
ABSL_FLAG(std::string, cc, "on",
          "Congestion control: 'on' (AIMD on ECN) or 'off' (fixed window of --window).");
ABSL_FLAG(bool, json, false, "Print one JSON object instead of the table.");
ABSL_FLAG(int, queues, 1, "Queues (I/O threads) per worker, 1..16; a tensor is split over them.");
ABSL_FLAG(double, link_gbps, 100.0, "Bandwidth of every link, Gb/s (> 0).");
ABSL_FLAG(double, delay_us, 1.0, "Propagation delay of every link, microseconds (>= 0).");
ABSL_FLAG(int, queue_frames, 8192,
          "Egress queue capacity of every port (and host NIC), frames (tail drop), >= 1. "
          "8192 frames are 2.7 MB.");
ABSL_FLAG(int, ecn_threshold, 64,
          "Switch ECN threshold: frames are marked when the egress queue holds more, >= 0.");
ABSL_FLAG(std::string, levels, "two",
          "Which switches aggregate: 'two' (rack ToRs at level 1, the PS's ToR at level 2), "
          "'rack' (rack ToRs only) or 'none' (forward only: the PS does all the work).");
ABSL_FLAG(std::string, index, "hash",
          "Initial aggregator index of a window slot: 'hash' of (job, queue, slot), or "
          "'sequential' (the same for every job: the collision-prone bad case).");
ABSL_FLAG(std::string, placement, "spread",
          "Where each job's workers go: 'spread' (evenly over every rack) or 'pack' (as few "
          "racks as possible, jobs starting at different racks).");
ABSL_FLAG(int, slots, 256, "Window slots per queue: a power of two, 1..65536, >= --window.");
ABSL_FLAG(int, window, 200, "Initial window per queue, fragments (the fixed window with --cc=off).");
ABSL_FLAG(double, orphan_timeout_ms, 10.0, "Switch orphan timeout, milliseconds (> 0).");
ABSL_FLAG(double, reorder, 0.0,
          "Fraction of frames on every link held back by up to --reorder_delay_us, 0..1.");
ABSL_FLAG(double, reorder_delay_us, 20.0, "Largest extra delay of a reordered frame, microseconds.");
ABSL_FLAG(double, duplicate, 0.0, "Fraction of frames duplicated on every link, 0..1.");
ABSL_FLAG(double, corrupt, 0.0,
          "Fraction of frames with one corrupted header byte on every link, 0..1 (receivers "
          "must reject them).");
ABSL_FLAG(int, overflow_every, 0,
          "If > 0, every k-th fragment holds values whose sum saturates int32 (the float path).");
ABSL_FLAG(double, jitter_us, 10.0,
          "Each worker starts each iteration after a random delay of up to this many "
          "microseconds (its compute time varies), so workers are not in lockstep, >= 0.");
ABSL_FLAG(double, sample_us, 0.0,
          "If > 0, sample each job's goodput (worker 0's completed fragments) this often, in "
          "microseconds; the series is in the JSON output as goodput_series_gbps.");
ABSL_FLAG(std::string, scenario, "",
          "Run a named scenario (one of the paper's experiments, several runs summed up in one "
          "table beside the paper's number) instead of one run; see 'scenarios' above. Only "
          "--scale, --seed, --json, --plot, --ps_link_gbps and --ps_packet_ns apply to it.");
ABSL_FLAG(std::string, scale, "full",
          "Size of a --scenario's runs: 'full' (the sizes bench/results/simulator.md reports) or "
          "'small' (smaller tensors, for quick checks and ctest).");
ABSL_FLAG(double, ps_link_gbps, 0,
          "Bandwidth of each PS's link (its NIC), Gb/s: 0 (the default) is --link_gbps, else "
          "0.001..1000000. Also with --scenario.");
ABSL_FLAG(double, ps_packet_ns, 0,
          "Time a PS host spends on each frame it receives, nanoseconds, one frame at a time "
          "(0..1e9; 0: free, the default). Also with --scenario.");
ABSL_FLAG(double, time_limit_ms, 60000.0,
          "Simulated time after which unfinished jobs are reported as not completed.");
ABSL_FLAG(int, partitions, 0,
          "Threads that simulate the network, 1 or 2: with 2, half the worker racks and the "
          "core on one, the other racks and the PS on the other (deterministic, but events at "
          "the same nanosecond may run in another order than with 1). 0: 2 when there are two "
          "or more racks, links have a delay and no --pcap or --plot is asked for, else 1.");
ABSL_FLAG(bool, input_thread, true,
          "Make the workers' inputs and their exact sums on a second thread, one iteration "
          "ahead (the first before the run starts). Same results either way.");

namespace atp::sim_tool {
namespace {

using sim::ExperimentConfig;

absl::Status Bad(const std::string& flag, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", message));
}

absl::Status CheckFraction(const std::string& flag, double value) {
  if (!(value >= 0.0 && value <= 1.0)) {
    return Bad(flag, absl::StrCat(value, " is not a probability in 0..1"));
  }
  return absl::OkStatus();
}

// kMaxDurationNs: the longest simulated duration any flag may give (one
// day). Simulated times are int64 nanoseconds; sums of a few of them (a time
// limit plus settling, a deadline plus a backed-off timeout) stay far inside
// int64 with this bound, and no experiment needs more.
constexpr double kMaxDurationNs = 86400e9;

// Duration: `value` (in units of `unit_ns` nanoseconds) as a TimeDelta, or an
// error naming `flag` when it is not finite, below `min` (or not above it
// when `min_exclusive`), longer than kMaxDurationNs, or positive but shorter
// than a nanosecond.
absl::StatusOr<TimeDelta> Duration(const std::string& flag, double value, double unit_ns,
                                   double min, bool min_exclusive) {
  const bool low = min_exclusive ? !(value > min) : !(value >= min);
  const double max_units = kMaxDurationNs / unit_ns;
  if (low || !(value <= max_units)) {
    return Bad(flag, absl::StrCat(value, " is not in ", min_exclusive ? "(" : "[", min, ", ",
                                  max_units, "] (at most one simulated day)"));
  }
  const int64_t ns = std::llround(value * unit_ns);
  if (value > 0 && ns == 0) {
    return Bad(flag, absl::StrCat(value, " is below the simulator's resolution (1 ns)"));
  }
  return TimeDelta::FromNanoseconds(ns);
}

// CheckMemory: refuses a run whose tensors or aggregator arrays would need
// more than half of this machine's RAM (they would abort with bad_alloc or
// swap), naming the flags that size them. The estimate counts what the run
// allocates per value and per aggregator, not the few MB of the rest.
absl::Status CheckMemory(const ExperimentConfig& config, int workers, int jobs, int racks) {
  const double memory = tool::PhysicalMemoryBytes();
  if (memory <= 0) return absl::OkStatus();
  const double budget = memory / 2;
  // Per job and value: each worker's two inputs (this iteration's and the
  // next's) and output (12 bytes), the exact answers' sums and results of up
  // to three iterations (~20 bytes each: the checked one, the running one,
  // the next), and with the float path each worker's row of the values that
  // may need it (4 bytes per answer).
  const double answers = 3.0;
  const double per_value =
      12.0 * workers +
      answers * (20.0 + (config.workload.overflow_every > 0 ? 4.0 * workers : 0.0));
  const double tensors = static_cast<double>(config.workload.values) * per_value * jobs;
  // Every ToR (one per worker rack, plus the PS's with several racks) holds
  // the whole array.
  const int switches = racks + (racks > 1 ? 1 : 0);
  const double arrays = static_cast<double>(config.topology.switches.aggregators) * switches *
                        static_cast<double>(sizeof(switch_emulator::AggregatorState) +
                                            sizeof(switch_emulator::AggregatorValues));
  if (arrays > budget) {
    return Bad("aggregators",
               absl::StrCat(config.topology.switches.aggregators, " aggregators on ", switches,
                            " switches need ", std::llround(arrays / (1 << 20)),
                            " MiB, more than half of this machine's ",
                            std::llround(memory / (1 << 20)), " MiB"));
  }
  if (tensors + arrays > budget) {
    return Bad("tensor_mb",
               absl::StrCat("tensors of ", config.workload.values * 4 / (1 << 20), " MiB for ",
                            jobs, " job(s) x ", workers, " workers need ",
                            std::llround(tensors / (1 << 20)), " MiB, more than half of this "
                            "machine's ", std::llround(memory / (1 << 20)),
                            " MiB; lower --tensor_mb, --workers or --jobs"));
  }
  return absl::OkStatus();
}

// Placement of one job's workers over the racks.
std::vector<int> Place(bool pack, int job_index, int workers, int racks) {
  if (!pack) return sim::SpreadEvenly(workers, racks);
  const int needed = (workers + wire::kMaxFanIn - 1) / wire::kMaxFanIn;
  const int used = std::min(needed, racks);
  const std::vector<int> counts = sim::SpreadEvenly(workers, used);
  std::vector<int> out(static_cast<size_t>(racks), 0);
  for (int k = 0; k < used; ++k) {
    out[static_cast<size_t>((job_index * used + k) % racks)] += counts[static_cast<size_t>(k)];
  }
  return out;
}

}  // namespace

absl::StatusOr<Options> OptionsFromFlags() {
  Options options;
  ExperimentConfig& config = options.experiment;
  options.format = absl::GetFlag(FLAGS_json) ? OutputFormat::kJson : OutputFormat::kTable;
  options.scenario = absl::GetFlag(FLAGS_scenario);
  if (options.scenario.empty()) {
    ATP_RETURN_IF_ERROR(tool::RefuseGiven({"scale"}, "only with --scenario"));
  } else {
    // A scenario sets up its own runs: these flags would be ignored.
    ATP_RETURN_IF_ERROR(tool::RefuseGiven(
        // clang-format off
        {"workers", "racks", "jobs", "aggregators", "loss", "tensor_mb", "iterations",
         "allocation", "cc", "queues", "link_gbps", "delay_us", "queue_frames", "ecn_threshold",
         "levels", "index", "placement", "slots", "window", "orphan_timeout_ms", "reorder",
         "reorder_delay_us", "duplicate", "corrupt", "overflow_every", "jitter_us", "sample_us",
         "time_limit_ms", "input_thread", "partitions"},
        // clang-format on
        "not with --scenario (a scenario sets up its own runs; only --scale, --seed, --json, "
        "--plot, --ps_link_gbps and --ps_packet_ns apply)"));
    bool known = false;
    for (const ScenarioInfo& info : Scenarios()) known = known || info.name == options.scenario;
    if (!known) {
      return Bad("scenario", absl::StrCat("unknown scenario '", options.scenario,
                                          "'; scenarios: ", ScenarioNames()));
    }
  }
  // The PS model: also a scenario's (every run of it).
  sim::PsModel& ps = config.topology.ps_model;
  const double ps_gbps = absl::GetFlag(FLAGS_ps_link_gbps);
  if (!(ps_gbps == 0 || (ps_gbps >= 1e-3 && ps_gbps <= 1e6))) {
    return Bad("ps_link_gbps", absl::StrCat(ps_gbps, " is neither 0 nor in [0.001, 1000000]"));
  }
  ps.link_bps = ps_gbps * 1e9;
  const double ps_ns = absl::GetFlag(FLAGS_ps_packet_ns);
  if (!(ps_ns >= 0 && ps_ns <= 1e9)) {
    return Bad("ps_packet_ns", absl::StrCat(ps_ns, " is not in [0, 1e9] (at most a second per frame)"));
  }
  ATP_ASSIGN_OR_RETURN(ps.packet_service,
                       Duration("ps_packet_ns", ps_ns, 1, 0, /*min_exclusive=*/false));
  if (options.scenario == "skip-topologies" && (ps_gbps != 0 || ps.packet_service > TimeDelta::Zero())) {
    ATP_RETURN_IF_ERROR(tool::RefuseGiven({"ps_link_gbps", "ps_packet_ns"},
                                          "not with --scenario=skip-topologies (its collectives have no PS)"));
  }

  const std::string scale = absl::GetFlag(FLAGS_scale);
  if (scale == "full") {
    options.scale = Scale::kFull;
  } else if (scale == "small") {
    options.scale = Scale::kSmall;
  } else {
    return Bad("scale", absl::StrCat("'", scale, "' is neither 'full' nor 'small'"));
  }

  const int workers = absl::GetFlag(FLAGS_workers);
  const int racks = absl::GetFlag(FLAGS_racks);
  const int jobs = absl::GetFlag(FLAGS_jobs);
  if (racks < 1 || racks > wire::kMaxFanIn) return Bad("racks", absl::StrCat(racks, " is not in 1..32"));
  if (workers < 1 || workers > wire::kMaxFanIn * wire::kMaxFanIn) {
    return Bad("workers", absl::StrCat(workers, " is not in 1..1024"));
  }
  if (jobs < 1 || jobs > wire::kMaxJobId) return Bad("jobs", absl::StrCat(jobs, " is not in 1..255"));
  const std::string placement = absl::GetFlag(FLAGS_placement);
  if (placement != "spread" && placement != "pack") {
    return Bad("placement", absl::StrCat("'", placement, "' is neither 'spread' nor 'pack'"));
  }
  const bool pack = placement == "pack";
  if (!pack && (workers + racks - 1) / racks > wire::kMaxFanIn) {
    return Bad("workers", absl::StrCat(workers, " workers over ", racks,
                                       " racks puts more than 32 in a rack; add --racks"));
  }
  if (pack && workers > racks * wire::kMaxFanIn) {
    return Bad("workers", absl::StrCat(workers, " workers do not fit in ", racks,
                                       " racks of 32; add --racks"));
  }
  config.topology.worker_racks = racks;
  for (int j = 0; j < jobs; ++j) {
    config.topology.jobs.push_back(sim::JobPlacement{
        .job = static_cast<uint8_t>(j + 1), .workers_per_rack = Place(pack, j, workers, racks)});
  }

  const int64_t aggregators = absl::GetFlag(FLAGS_aggregators);
  if (aggregators < 1 || aggregators > (int64_t{1} << 24)) {
    return Bad("aggregators", absl::StrCat(aggregators, " is not in 1..16777216"));
  }
  config.topology.switches.aggregators = static_cast<size_t>(aggregators);
  const std::string allocation = absl::GetFlag(FLAGS_allocation);
  if (allocation == "dynamic") {
    config.topology.switches.partition = switch_emulator::PartitionMode::kDynamic;
  } else if (allocation == "static") {
    config.topology.switches.partition = switch_emulator::PartitionMode::kStatic;
  } else {
    return Bad("allocation", absl::StrCat("'", allocation, "' is neither 'dynamic' nor 'static'"));
  }
  const int ecn = absl::GetFlag(FLAGS_ecn_threshold);
  if (ecn < 0) return Bad("ecn_threshold", "must be >= 0");
  config.topology.switches.ecn_threshold = static_cast<uint32_t>(ecn);
  ATP_ASSIGN_OR_RETURN(config.topology.switches.orphan_timeout,
                       Duration("orphan_timeout_ms", absl::GetFlag(FLAGS_orphan_timeout_ms), 1e6,
                                0, /*min_exclusive=*/true));
  config.settle_time = config.topology.switches.orphan_timeout * 2 + TimeDelta::FromMilliseconds(1);

  const std::string levels = absl::GetFlag(FLAGS_levels);
  if (levels == "two") {
    config.topology.aggregation = sim::AggregationMode::kTwoLevel;
  } else if (levels == "rack") {
    config.topology.aggregation = sim::AggregationMode::kRackOnly;
  } else if (levels == "none") {
    config.topology.aggregation = sim::AggregationMode::kNone;
  } else {
    return Bad("levels", absl::StrCat("'", levels, "' is not 'two', 'rack' or 'none'"));
  }

  const double gbps = absl::GetFlag(FLAGS_link_gbps);
  const int queue_frames = absl::GetFlag(FLAGS_queue_frames);
  // 1 Mb/s to 1 Pb/s: a frame's serialization time (picoseconds, int64)
  // stays exact and finite.
  if (!(gbps >= 1e-3 && gbps <= 1e6)) {
    return Bad("link_gbps", absl::StrCat(gbps, " is not in [0.001, 1000000]"));
  }
  ATP_ASSIGN_OR_RETURN(const TimeDelta delay,
                       Duration("delay_us", absl::GetFlag(FLAGS_delay_us), 1e3, 0,
                                /*min_exclusive=*/false));
  if (queue_frames < 1) return Bad("queue_frames", "must be >= 1");
  const sim::LinkConfig link{.bandwidth_bps = gbps * 1e9,
                             .propagation_delay = delay,
                             .queue_capacity_packets = static_cast<uint32_t>(queue_frames)};
  config.topology.host_link = link;
  config.topology.fabric_link = link;

  const int queues = absl::GetFlag(FLAGS_queues);
  if (queues < 1 || queues > wire::kMaxQueues) {
    return Bad("queues", absl::StrCat(queues, " is not in 1..16"));
  }
  config.topology.queues = static_cast<uint32_t>(queues);
  const int slots = absl::GetFlag(FLAGS_slots);
  const int window = absl::GetFlag(FLAGS_window);
  if (slots < 1 || slots > 65536 || (slots & (slots - 1)) != 0) {
    return Bad("slots", absl::StrCat(slots, " is not a power of two in 1..65536"));
  }
  if (window < 1 || window > slots) {
    return Bad("window", absl::StrCat(window, " is not in 1..--slots (", slots, ")"));
  }
  worker::WorkerQueueConfig& wc = config.topology.worker;
  wc.slots = static_cast<uint32_t>(slots);
  wc.initial_window = static_cast<uint32_t>(window);
  const std::string cc = absl::GetFlag(FLAGS_cc);
  if (cc == "on") {
    wc.congestion_control = worker::CongestionController::Mode::kAimd;
  } else if (cc == "off") {
    wc.congestion_control = worker::CongestionController::Mode::kFixedWindow;
  } else {
    return Bad("cc", absl::StrCat("'", cc, "' is neither 'on' nor 'off'"));
  }
  const std::string index = absl::GetFlag(FLAGS_index);
  if (index == "hash") {
    wc.index_policy = protocol::IndexPolicy::kHashed;
  } else if (index == "sequential") {
    wc.index_policy = protocol::IndexPolicy::kSequential;
  } else {
    return Bad("index", absl::StrCat("'", index, "' is neither 'hash' nor 'sequential'"));
  }

  const double tensor_mb = absl::GetFlag(FLAGS_tensor_mb);
  if (!(tensor_mb > 0) || tensor_mb > 4096) return Bad("tensor_mb", "must be in (0, 4096]");
  config.workload.values =
      std::max<size_t>(1, static_cast<size_t>(std::llround(tensor_mb * (1 << 20) / 4)));
  const int iterations = absl::GetFlag(FLAGS_iterations);
  if (iterations < 1) return Bad("iterations", "must be >= 1");
  config.workload.iterations = iterations;
  const int overflow_every = absl::GetFlag(FLAGS_overflow_every);
  if (overflow_every < 0) return Bad("overflow_every", "must be >= 0");
  config.workload.overflow_every = static_cast<uint32_t>(overflow_every);
  ATP_ASSIGN_OR_RETURN(config.workload.start_jitter,
                       Duration("jitter_us", absl::GetFlag(FLAGS_jitter_us), 1e3, 0,
                                /*min_exclusive=*/false));
  config.seed = absl::GetFlag(FLAGS_seed);
  config.workload.seed = config.seed;

  sim::Impairments& imp = config.impairments;
  imp.loss = absl::GetFlag(FLAGS_loss);
  imp.reorder = absl::GetFlag(FLAGS_reorder);
  imp.duplicate = absl::GetFlag(FLAGS_duplicate);
  imp.corrupt = absl::GetFlag(FLAGS_corrupt);
  if (auto s = CheckFraction("loss", imp.loss); !s.ok()) return s;
  if (imp.loss >= 1.0) return Bad("loss", "1 loses every frame: nothing can complete");
  if (auto s = CheckFraction("reorder", imp.reorder); !s.ok()) return s;
  if (imp.reorder == 0) {
    ATP_RETURN_IF_ERROR(tool::RefuseGiven({"reorder_delay_us"}, "only with --reorder > 0"));
  }
  if (auto s = CheckFraction("duplicate", imp.duplicate); !s.ok()) return s;
  if (auto s = CheckFraction("corrupt", imp.corrupt); !s.ok()) return s;
  // Every frame corrupted is every frame rejected: as --loss=1.
  if (imp.corrupt >= 1.0) return Bad("corrupt", "1 corrupts every frame: nothing can complete");
  ATP_ASSIGN_OR_RETURN(imp.reorder_delay,
                       Duration("reorder_delay_us", absl::GetFlag(FLAGS_reorder_delay_us), 1e3, 0,
                                /*min_exclusive=*/true));

  ATP_ASSIGN_OR_RETURN(config.sample_interval,
                       Duration("sample_us", absl::GetFlag(FLAGS_sample_us), 1e3, 0,
                                /*min_exclusive=*/false));
  config.input_thread = absl::GetFlag(FLAGS_input_thread);
  const int partitions = absl::GetFlag(FLAGS_partitions);
  if (partitions < 0 || partitions > 2) {
    return Bad("partitions", absl::StrCat(partitions, " is not 0, 1 or 2"));
  }
  options.partitions_chosen = partitions != 0;
  const bool has_delay = config.topology.fabric_link.propagation_delay > TimeDelta::Zero();
  config.topology.partitions = partitions != 0 ? partitions : (racks >= 2 && has_delay ? 2 : 1);
  if (config.topology.partitions == 2 && racks < 2) {
    return Bad("partitions", "2 need --racks >= 2 (the core is where the network is split)");
  }
  if (config.topology.partitions == 2 && !has_delay) {
    return Bad("partitions",
               "2 need --delay_us > 0 (the delay between the halves is the time they may run "
               "apart)");
  }
  ATP_ASSIGN_OR_RETURN(config.time_limit,
                       Duration("time_limit_ms", absl::GetFlag(FLAGS_time_limit_ms), 1e6, 0,
                                /*min_exclusive=*/true));
  // Each job keeps one sample per interval until the limit.
  if (config.sample_interval > TimeDelta::Zero() &&
      config.time_limit.ToNanoseconds() / config.sample_interval.ToNanoseconds() * jobs >
          10'000'000) {
    return Bad("sample_us",
               "gives more than 10^7 samples (all jobs) before --time_limit_ms; sample less often");
  }
  ATP_RETURN_IF_ERROR(CheckMemory(config, workers, jobs, racks));
  return options;
}

}  // namespace atp::sim_tool
