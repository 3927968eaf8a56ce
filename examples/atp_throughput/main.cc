// atp-throughput: push/pull goodput of a job, every result verified.
//
// --role=cluster (default): runs the whole job in this process (workers, PS
// and, over loopback, the ATP switch pipelines), then for each iteration every
// worker PushPulls a tensor of --tensor_floats values; the time from the first
// submission to the last completion gives the goodput (tensor bytes per
// worker per second, like an allreduce's algorithm bandwidth). Every worker's
// every result is compared with the exact aggregate computed independently
// (atp::Quantize).
//
// --role=worker --rank=R: this process is one worker of a job whose other
// workers, PS (atp-ps) and switches (atp-switchd) are other processes,
// reached over a real transport (examples/common/endpoint.h). Its inputs are
// a deterministic function of (--seed, --job, rank, iteration, index) whose
// sums are exact after quantization (examples/common/inputs.h), so it checks
// every result against the exact sum of all ranks' inputs by itself.
//
//   atp-throughput --tensor_floats=4194304 --workers=4 --racks=2 --iterations=5
//   atp-throughput --transport=kernel_udp --workers=2 --racks=1 --json
//   atp-throughput --role=worker --rank=3 --racks=2 --workers_per_rack=2
//       --dpdk_port=memif --memif_socket=/tmp/tb/w3.sock --json
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "atp/wire.h"
#include "atp/worker.h"
#include "examples/atp_throughput/example_cluster.h"
#include "examples/common/endpoint.h"
#include "examples/common/endpoint_flags.h"
#include "examples/common/inputs.h"
#include "examples/common/tool_flags.h"
#include "examples/common/window_flags.h"
#include "testbed/oracle.h"
#include "lib/tool/flag_checks.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, role, "cluster",
          "'cluster': the whole job in this process (--workers over --racks). 'worker': one "
          "worker (--rank) of a job whose other nodes are processes (atp-ps, atp-switchd), "
          "over --transport=dpdk (see the endpoint flags).");
ABSL_FLAG(int, rank, -1, "--role=worker: this worker's rack-major rank, 0..racks*workers_per_rack-1.");
ABSL_FLAG(uint64_t, seed, 1,
          "--role=worker: seed of the inputs; every worker of the job must use the same one.");
ABSL_FLAG(double, deadline_s, 120,
          "--role=worker: give up (exit 1, saying where it stopped) when the run, from the start "
          "of this process (the link wait included), has not finished within this many seconds.");
ABSL_FLAG(int64_t, tensor_floats, 1 << 20, "Floats in each worker's tensor, per iteration.");
ABSL_FLAG(int, workers, 4, "--role=cluster: workers in the job (spread over --racks).");
ABSL_FLAG(int, iterations, 5, "Aggregations to time, one after the other.");
ABSL_FLAG(int, cluster_threads, -1,
          "--role=cluster: threads that run all the job's I/O loops (each worker's --io_threads "
          "queues and the PS's thread), shared (atp/shared_io_threads.h); 0: a thread per loop; "
          "-1 (default): one per core, at most one per loop, less the core of the fabric "
          "thread (--fabric_thread) if there is one; over loopback without a fabric thread, "
          "one (the fabric then runs under one lock: a second thread only waits for it).");
ABSL_FLAG(int, fabric_thread, -1,
          "--role=cluster over loopback: 1: the switches run on a thread of their own, as a "
          "switch is a machine of its own, and the I/O threads only quantize, send and receive "
          "(testbed::LocalClusterOptions::fabric_thread); 0: on the sending I/O thread, under "
          "the wire's lock; -1 (default): 1 where the machine has at least 2 cores.");
ABSL_FLAG(int, ps_on_fabric_thread, -1,
          "--role=cluster with a fabric thread: 1: the PS's loop runs on the fabric thread, "
          "beside the switches, instead of with the workers' "
          "(testbed::LocalClusterOptions::ps_on_fabric_thread); 0: with the workers'; -1 "
          "(default): 1 where there is a fabric thread. Where the switches aggregate, the PS "
          "only relays their sums and either place costs the same; with --switches=none it "
          "sums everything, and beside the switches (which then only copy) the two cores carry "
          "about equal work.");
ABSL_FLAG(int, pause_after_iteration, 0,
          "--role=worker, for tests: once this many iterations are done (no operation in "
          "flight), stop the whole process (SIGSTOP) until it gets a SIGCONT, so that a test "
          "can restart the PS between two operations (tests/multiprocess ps_restart); 0: never.");
ABSL_FLAG(bool, start_barrier, true,
          "--role=worker: before each timed iteration, an untimed one-fragment operation that "
          "completes only once every worker has prepared its input, so that no worker's time "
          "includes another's preparation (the verification's sums take longer than the "
          "operation itself); false: the timed operation starts as soon as this worker is ready.");
ABSL_FLAG(bool, json, false, "Print the result as one JSON object instead of text.");
ABSL_FLAG(bool, progress, true,
          "Print a progress line on stderr after each iteration (--role=worker: also with --json).");

namespace atp::examples {
namespace {

constexpr char kUsage[] =
    "push/pull goodput of an ATP job with every result verified.\n"
    "--role=cluster (default): workers, a PS and the switches as threads of this process.\n"
    "--role=worker --rank=R: one worker of a job whose PS and switches are processes.\n"
    "Exit status: 0 all results exact; 1 a result was wrong, timed out or the device failed;\n"
    "2 bad flags.\n"
    "  e.g. atp-throughput --tensor_floats=4194304 --workers=4 --racks=2\n"
    "       atp-throughput --role=worker --rank=0 --memif_socket=/tmp/tb/w0.sock --json";

void Fill(std::vector<float>& v, int iteration, int rank) {
  const uint32_t seed = static_cast<uint32_t>(iteration) * 2654435761u + static_cast<uint32_t>(rank) * 40503u;
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t h = (static_cast<uint32_t>(i) * 2246822519u) ^ seed;
    v[i] = static_cast<float>(static_cast<int32_t>(h % 20001u) - 10000) * 1e-4f;
  }
}

constexpr char kProgram[] = "atp-throughput";

int RunWorker();

int Cores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

// FabricThreadFromFlag: what --fabric_thread=`flag` gives: -1: a fabric
// thread over loopback on a machine of at least 2 cores (bench/RESULTS.md
// "The switches on a thread of their own"); else `flag` (0 or 1).
bool FabricThreadFromFlag(int flag) {
  if (flag != -1 && flag != 0 && flag != 1) {
    tool::ExitIfBad(kProgram, tool::FlagError("fabric_thread",
                                              absl::StrCat(flag, " is not -1 (auto), 0 or 1")));
  }
  if (flag != -1) return flag == 1;
  return ClusterTransportFlag() == "loopback" && Cores() >= 2;
}

// PsOnFabricThreadFromFlag: what --ps_on_fabric_thread=`flag` gives `shape`:
// -1: wherever it has a fabric thread (bench/RESULTS.md "Bursts through the
// fabric"); else `flag` (0 or 1; MakeCluster refuses 1 without a fabric thread).
bool PsOnFabricThreadFromFlag(const ClusterShape& shape, int flag) {
  if (flag != -1 && flag != 0 && flag != 1) {
    tool::ExitIfBad(kProgram, tool::FlagError("ps_on_fabric_thread",
                                              absl::StrCat(flag, " is not -1 (auto), 0 or 1")));
  }
  if (flag != -1) return flag == 1;
  return shape.fabric_thread;
}

// ClusterThreadsFromFlag: what --cluster_threads=`flag` gives `shape`: -1:
// one thread per core, at most one per loop (threads beyond the cores only
// add hand-offs), less the fabric thread's core if `shape` has one; over
// loopback without a fabric thread one (the wire's switch fabric then runs
// under one mutex: with two threads each waits for the other's frames to
// cross it; measured on 2 cores, bench/RESULTS.md "Shared I/O threads");
// else `flag` itself (MakeCluster checks it).
int ClusterThreadsFromFlag(const ClusterShape& shape, int flag) {
  if (flag != -1) return flag;
  if (ClusterTransportFlag() == "loopback" && !shape.fabric_thread) return 1;
  const int cores = shape.fabric_thread ? Cores() - 1 : Cores();
  return std::max(1, std::min(cores, ClusterLoops(shape)));
}

// CheckSizeFlags: --tensor_floats and --iterations, and the memory the run
// needs for `tensors` tensors of --tensor_floats floats.
void CheckSizeFlags(double tensors) {
  const int64_t n = absl::GetFlag(FLAGS_tensor_floats);
  tool::ExitIfBad(kProgram, tool::CheckRange("tensor_floats", n, 1, INT64_MAX));
  tool::ExitIfBad(kProgram, tool::CheckRange("iterations", absl::GetFlag(FLAGS_iterations), 1, INT32_MAX));
  tool::ExitIfBad(kProgram, tool::CheckMemory("tensor_floats", static_cast<double>(n) * 4 * tensors,
                                              absl::StrCat(tensors, " tensors of ", n, " floats")));
}

int Main(int argc, char** argv) {
  ParseFlagsOrExit(argc, argv, kProgram, "examples/atp_throughput/main", kUsage);
  const std::string role = absl::GetFlag(FLAGS_role);
  if (role == "worker") return RunWorker();
  if (role != "cluster") {
    std::fprintf(stderr, "atp-throughput: --role: '%s' is not cluster or worker\n", role.c_str());
    return kBadFlagsExit;
  }
  // The flags of --role=worker (and the endpoint flags) have no effect here.
  tool::ExitIfBad(kProgram, tool::RefuseGiven(
      {"rank", "seed", "deadline_s", "address", "dpdk_port", "memif_socket", "memif_role",
       "memif_id", "iface", "netns", "pci", "dpdk_memory_mb", "udp_bind", "udp_gateway", "job",
       "workers_per_rack", "ps_address", "group", "pcap_dir", "pcap_max_file_mb",
       "pcap_max_files", "source_check", "pause_after_iteration", "start_barrier"},
      "only with --role=worker"));
  ClusterShape shape;
  shape.workers = absl::GetFlag(FLAGS_workers);
  shape.racks = absl::GetFlag(FLAGS_racks);
  shape.io_threads = absl::GetFlag(FLAGS_io_threads);
  shape.fabric_thread = FabricThreadFromFlag(absl::GetFlag(FLAGS_fabric_thread));
  shape.ps_on_fabric_thread =
      PsOnFabricThreadFromFlag(shape, absl::GetFlag(FLAGS_ps_on_fabric_thread));
  shape.shared_threads = ClusterThreadsFromFlag(shape, absl::GetFlag(FLAGS_cluster_threads));
  // Each worker's input and output, the exact aggregate, and the oracle's
  // int64 sums (two floats' worth).
  CheckSizeFlags(2.0 * std::max(shape.workers, 1) + 3);
  const int64_t n = absl::GetFlag(FLAGS_tensor_floats);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> cluster = MakeCluster(shape);
  if (!cluster.ok()) {
    std::fprintf(stderr, "atp-throughput: %s\n", std::string(cluster.status().message()).c_str());
    return kBadFlagsExit;
  }
  const bool progress = absl::GetFlag(FLAGS_progress) && !absl::GetFlag(FLAGS_json);
  const size_t w = static_cast<size_t>(shape.workers);
  std::vector<std::vector<float>> in(w, std::vector<float>(static_cast<size_t>(n)));
  std::vector<std::vector<float>> out(w, std::vector<float>(static_cast<size_t>(n)));
  double total_seconds = 0;
  double best_seconds = 1e300;
  int wrong = 0;
  for (int it = 0; it < iterations; ++it) {
    for (size_t r = 0; r < w; ++r) Fill(in[r], it, static_cast<int>(r));
    std::vector<Handle> handles;
    const auto start = std::chrono::steady_clock::now();
    for (size_t r = 0; r < w; ++r) {
      absl::StatusOr<Handle> h = (*cluster)->worker(0, r).PushPull(in[r], out[r]);
      if (!h.ok()) {
        std::fprintf(stderr, "atp-throughput: %s\n", std::string(h.status().message()).c_str());
        return 1;
      }
      handles.push_back(*h);
    }
    const absl::Status done = WaitAll(handles, absl::Now() + absl::Seconds(120));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!done.ok()) {
      std::fprintf(stderr, "\natp-throughput: iteration %d: %s\n", it,
                   std::string(done.message()).c_str());
      return 1;
    }
    total_seconds += seconds;
    best_seconds = std::min(best_seconds, seconds);
    std::vector<std::span<const float>> spans(in.begin(), in.end());
    const std::vector<float> expected = testbed::ExpectedAggregate(spans, kDefaultScale);
    for (size_t r = 0; r < w; ++r) {
      if (!testbed::BitIdentical(out[r], expected)) ++wrong;
    }
    if (progress) {
      std::fprintf(stderr, "\r[%d/%d] %.3f s  %.3f GB/s  %s   ", it + 1, iterations, seconds,
                   static_cast<double>(n) * 4 / seconds / 1e9, wrong == 0 ? "exact" : "WRONG");
      std::fflush(stderr);
    }
  }
  if (progress) std::fprintf(stderr, "\n");

  uint64_t retransmissions = 0, frames_sent = 0, timeouts = 0, spurious_timeouts = 0, loss_events = 0,
           overflow_requests = 0, worker_ignored = 0, worker_tx_backpressure = 0;
  for (size_t r = 0; r < w; ++r) {
    const WorkerStats s = (*cluster)->worker(0, r).stats();
    retransmissions += s.retransmissions;
    frames_sent += s.frames_sent;
    timeouts += s.timeouts;
    spurious_timeouts += s.spurious_timeouts;
    loss_events += s.loss_events;
    overflow_requests += s.overflow_requests;
    worker_ignored += s.ignored;
    for (const WorkerQueueStatistics& q : s.queues) worker_tx_backpressure += q.tx_backpressure;
  }
  const ParameterServerStats ps = (*cluster)->parameter_server(0, 0).stats();
  // Loopback only: frames the wire dropped because a receiver's ring was full
  // (a switch's egress drop), and frames the fabric dropped on purpose (--loss).
  uint64_t ring_drops = 0, injected_losses = 0;
  if ((*cluster)->wire() != nullptr) ring_drops = (*cluster)->wire()->stats().egress_drops;
  if ((*cluster)->fabric() != nullptr) injected_losses = (*cluster)->fabric()->stats().lost;
  // Gradient frames that reached the PS per completed fragment: 1 when the
  // switches aggregated everything, the worker count when they did nothing.
  const double ps_frames_per_fragment =
      ps.completed == 0 ? 0 : static_cast<double>(ps.contributions) / static_cast<double>(ps.completed);
  const double bytes = static_cast<double>(n) * 4 * iterations;
  const double goodput = bytes / total_seconds;
  const double best = static_cast<double>(n) * 4 / best_seconds;
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j;
    j["tool"] = "atp-throughput";
    j["workers"] = shape.workers;
    j["racks"] = shape.racks;
    j["io_threads"] = shape.io_threads;
    j["cluster_threads"] = shape.shared_threads;
    j["fabric_thread"] = shape.fabric_thread;
    j["ps_on_fabric_thread"] = shape.ps_on_fabric_thread;
    j["transport"] = ClusterTransportFlag();
    j["switches"] = SwitchesFlag(shape.racks);
    j["tensor_floats"] = n;
    j["iterations"] = iterations;
    j["seconds"] = total_seconds;
    j["goodput_bytes_per_s"] = goodput;
    j["best_iteration_bytes_per_s"] = best;
    j["frames_sent"] = frames_sent;
    j["retransmissions"] = retransmissions;
    j["timeouts"] = timeouts;
    j["ring_drops"] = ring_drops;
    j["injected_losses"] = injected_losses;
    // Where the retransmissions came from (retransmissions = resends after
    // loss_events + after timeouts + answers to overflow_requests), and every
    // place a frame can be dropped on its way.
    j["spurious_timeouts"] = spurious_timeouts;
    j["loss_events"] = loss_events;
    j["overflow_requests"] = overflow_requests;
    j["worker_ignored"] = worker_ignored;
    j["worker_tx_backpressure"] = worker_tx_backpressure;
    j["ps_tx_dropped"] = ps.tx_dropped;
    j["ps_duplicates"] = ps.duplicates;
    j["ps_param_resent"] = ps.param_resent;
    j["ps_stale"] = ps.stale;
    j["ps_ahead"] = ps.ahead;
    if ((*cluster)->fabric() != nullptr) {
      uint64_t orphaned = 0, collisions = 0, flushed = 0, resend_to_ps = 0, duplicates = 0;
      for (const auto& c : (*cluster)->fabric()->stats().switches) {
        orphaned += c.orphaned;
        collisions += c.collisions;
        flushed += c.flushed;
        resend_to_ps += c.resend_to_ps;
        duplicates += c.duplicates;
      }
      j["switch_orphaned"] = orphaned;
      j["switch_collisions"] = collisions;
      j["switch_flushed"] = flushed;
      j["switch_resend_to_ps"] = resend_to_ps;
      j["switch_duplicates"] = duplicates;
    }
    j["ps_frames_per_fragment"] = ps_frames_per_fragment;
    j["errors"] = wrong;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("atp-throughput: %s\n", Describe(shape).c_str());
    std::printf("tensor %lld floats (%.1f MB) x %d iterations: %.3f s\n",
                static_cast<long long>(n), static_cast<double>(n) * 4 / 1e6, iterations,
                total_seconds);
    std::printf("goodput %.3f GB/s per worker (best iteration %.3f GB/s)\n", goodput / 1e9,
                best / 1e9);
    std::printf("frames sent %llu, retransmissions %llu, timeouts %llu, PS frames per fragment %.2f\n",
                static_cast<unsigned long long>(frames_sent),
                static_cast<unsigned long long>(retransmissions),
                static_cast<unsigned long long>(timeouts), ps_frames_per_fragment);
    if ((*cluster)->wire() != nullptr) {
      std::printf("loopback: %llu frames dropped at full receive rings, %llu injected losses\n",
                  static_cast<unsigned long long>(ring_drops),
                  static_cast<unsigned long long>(injected_losses));
    }
    std::printf("%s\n", wrong == 0 ? "all results exact" : "WRONG RESULTS");
  }
  return wrong == 0 ? 0 : 1;
}

// WorkerRun: what a --role=worker run reports.
struct WorkerRun {
  int completed = 0;
  double seconds = 0;
  uint64_t wrong_values = 0;
  int wrong_iterations = 0;
  std::string error;
};

int ReportWorker(const EndpointSpec& spec, int64_t n, int iterations, const WorkerRun& run,
                 const WorkerStats& stats, const nlohmann::json& device) {
  const bool verified = run.error.empty() && run.completed == iterations && run.wrong_values == 0;
  const double goodput =
      run.seconds > 0 ? static_cast<double>(n) * 4 * run.completed / run.seconds : 0.0;
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j;
    j["tool"] = "atp-throughput";
    j["role"] = "worker";
    j["job"] = spec.job.job_id;
    j["rank"] = spec.place.rank;
    j["address"] = spec.self.ipv4.ToString();
    j["workers"] = spec.job.layout.total_workers();
    j["racks"] = spec.job.layout.racks();
    j["io_threads"] = spec.job.io_threads;
    j["transport"] = std::string(TransportKindName(spec.transport.kind));
    j["seed"] = absl::GetFlag(FLAGS_seed);
    j["tensor_floats"] = n;
    j["iterations"] = iterations;
    j["completed_iterations"] = run.completed;
    j["seconds"] = run.seconds;
    j["goodput_bytes_per_s"] = goodput;
    j["frames_sent"] = stats.frames_sent;
    j["retransmissions"] = stats.retransmissions;
    j["timeouts"] = stats.timeouts;
    j["ecn_marks"] = stats.ecn_marks;
    j["window_reductions"] = stats.window_reductions;
    j["loss_events"] = stats.loss_events;
    j["spurious_timeouts"] = stats.spurious_timeouts;
    j["window"] = stats.window;  // at the end, summed over the queues
    if (!stats.queues.empty()) {
      // Queue 0's smoothed round trip and timeout at the end (diagnosis).
      j["srtt_us"] = absl::ToDoubleMicroseconds(stats.queues[0].srtt);
      j["rto_us"] = absl::ToDoubleMicroseconds(stats.queues[0].rto);
    }
    j["wrong_values"] = run.wrong_values;
    j["verified"] = verified;
    j["device"] = device;
    if (!run.error.empty()) j["error"] = run.error;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("atp-throughput: %s\n", spec.description.c_str());
    std::printf("tensor %lld floats (%.1f MB) x %d iterations (%d done): %.3f s\n",
                static_cast<long long>(n), static_cast<double>(n) * 4 / 1e6, iterations,
                run.completed, run.seconds);
    std::printf("goodput %.3f GB/s\n", goodput / 1e9);
    std::printf("frames sent %llu, retransmissions %llu, timeouts %llu\n",
                static_cast<unsigned long long>(stats.frames_sent),
                static_cast<unsigned long long>(stats.retransmissions),
                static_cast<unsigned long long>(stats.timeouts));
    std::printf("%s\n", verified ? "all results exact" : "NOT VERIFIED");
  }
  std::fflush(stdout);
  return verified ? 0 : 1;
}

int RunWorker() {
  const absl::Time start = absl::Now();
  StopSignals stop;  // before any thread starts (the EAL's included)
  const int64_t n = absl::GetFlag(FLAGS_tensor_floats);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  const double deadline_s = absl::GetFlag(FLAGS_deadline_s);
  const bool progress = absl::GetFlag(FLAGS_progress);
  const auto bad = [](const std::string& message) {
    std::fprintf(stderr, "atp-throughput: %s\n", message.c_str());
    return kBadFlagsExit;
  };
  // A worker's job shape comes from the endpoint flags (--racks,
  // --workers_per_rack); its window and slots from the window flags, which
  // the PS (atp-ps) must share (examples/common/window_flags.h).
  tool::ExitIfBad(kProgram, tool::RefuseGiven({"workers", "switches", "loss", "cluster_threads",
                                               "fabric_thread", "ps_on_fabric_thread"},
                                              "only with --role=cluster"));
  CheckSizeFlags(3);  // input, output, expected sum
  if (!(deadline_s > 0)) return bad("--deadline_s: must be > 0");
  if (absl::GetFlag(FLAGS_rank) == -1) return bad("--rank: required with --role=worker (0, 1, ...)");
  if (absl::GetFlag(FLAGS_rank) < 0) {
    return bad(absl::StrCat("--rank: ", absl::GetFlag(FLAGS_rank), " is negative (0, 1, ...)"));
  }
  const int pause_after = absl::GetFlag(FLAGS_pause_after_iteration);
  tool::ExitIfBad(kProgram, tool::CheckRange("pause_after_iteration", pause_after, 0, iterations - 1));
  EndpointPlace place;
  place.role = EndpointRole::kWorker;
  place.rank = absl::GetFlag(FLAGS_rank);
  place.program_name = "atp-throughput";
  absl::StatusOr<EndpointSpec> spec = BuildEndpoint(EndpointFlagsFromCommandLine(), place);
  if (!spec.ok()) return bad(std::string(spec.status().message()));
  WorkerOptions options;
  options.job = spec->job;
  if (absl::Status s = ApplyRetransmissionFlags(&options.job); !s.ok()) return bad(std::string(s.message()));
  if (absl::Status s = ApplyWindowFlags(&options.job); !s.ok()) return bad(std::string(s.message()));
  options.rack = spec->rack;
  options.worker_in_rack = spec->worker_in_rack;
  options.parameter_servers.push_back(spec->ps);
  options.parameter_source_check = spec->source_check;
  absl::StatusOr<PollingOptions> polling = PollingFromFlags();
  if (!polling.ok()) return bad(std::string(polling.status().message()));
  options.polling = *polling;
  const absl::Time deadline = start + absl::Seconds(deadline_s);
  const std::string who = absl::StrCat("atp-throughput: worker ", place.rank);
  if (progress) {
    std::fprintf(stderr, "%s: %s, %s\n", who.c_str(), spec->description.c_str(),
                 DescribeWindow(options.job).c_str());
  }

  absl::StatusOr<std::unique_ptr<transport::Device>> device =
      OpenEndpointDevice(*spec, deadline, stop);
  if (!device.ok()) {
    std::fprintf(stderr, "%s: %s\n", who.c_str(), std::string(device.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(options, **device);
  if (!worker.ok()) {
    std::fprintf(stderr, "%s: %s\n", who.c_str(), std::string(worker.status().message()).c_str());
    return 1;
  }
  if (progress) std::fprintf(stderr, "%s: link up, running\n", who.c_str());

  const int workers = spec->job.layout.total_workers();
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const uint32_t job = spec->job.job_id;
  const uint32_t rank = static_cast<uint32_t>(place.rank);
  std::vector<float> in(static_cast<size_t>(n)), out(static_cast<size_t>(n)),
      expected(static_cast<size_t>(n));
  WorkerRun run;
  // PushPullAndWait: one operation to its end; false (run.error says why) on
  // a failure, a signal or the deadline.
  const auto push_pull_and_wait = [&](std::span<const float> input, std::span<float> output,
                                      int it, const char* what) {
    absl::StatusOr<Handle> h = (*worker)->PushPull(input, output);
    if (!h.ok()) {
      run.error = absl::StrCat("iteration ", it, ": PushPull", what, ": ", h.status().message());
      return false;
    }
    for (;;) {
      const absl::Status done =
          h->WaitUntil(std::min(deadline, absl::Now() + absl::Milliseconds(200)));
      if (done.code() != absl::StatusCode::kDeadlineExceeded) {
        if (!done.ok()) run.error = absl::StrCat("iteration ", it, what, ": ", done.message());
        return done.ok();
      }
      if (stop.Poll()) {
        run.error = absl::StrCat("stopped by signal ", stop.stop_signal(), " during iteration ", it);
        return false;
      }
      if (absl::Now() >= deadline) {
        run.error = absl::StrCat(
            "--deadline_s=", deadline_s, " passed during iteration ", it, what, " of ", iterations,
            " (", it, " done): no aggregate arrived; is the network (switches, the PS, the other ",
            workers - 1, " workers) up, with the same --job, --racks, --workers_per_rack, "
            "--io_threads and --seed?");
        return false;
      }
    }
  };
  const bool start_barrier = absl::GetFlag(FLAGS_start_barrier);
  std::array<float, wire::kValuesPerFragment> barrier_in{}, barrier_out{};
  for (int it = 0; it < iterations && run.error.empty(); ++it) {
    const uint32_t iteration = static_cast<uint32_t>(it);
    FillInput(seed, job, rank, iteration, workers, in);
    std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
    // Every worker ready: the timed operation starts for all at about the
    // same time (the barrier's result reaches them together).
    if (start_barrier && !push_pull_and_wait(barrier_in, barrier_out, it, " (start barrier)")) break;
    const auto t0 = std::chrono::steady_clock::now();
    if (!push_pull_and_wait(in, out, it, "")) break;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.seconds += seconds;
    ++run.completed;
    FillExpectedSum(seed, job, iteration, workers, expected);
    uint64_t wrong = 0;
    size_t first_wrong = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      if (std::memcmp(&out[i], &expected[i], sizeof(float)) != 0) {
        if (wrong++ == 0) first_wrong = i;
      }
    }
    run.wrong_values += wrong;
    if (wrong > 0) {
      ++run.wrong_iterations;
      std::fprintf(stderr, "%s: iteration %d: %llu values wrong, first at %zu: got %.9g, expected %.9g\n",
                   who.c_str(), it, static_cast<unsigned long long>(wrong), first_wrong,
                   static_cast<double>(out[first_wrong]), static_cast<double>(expected[first_wrong]));
    }
    if (progress) {
      std::fprintf(stderr, "%s: [%d/%d] %.3f s  %.3f GB/s  %s\n", who.c_str(), it + 1, iterations,
                   seconds, static_cast<double>(n) * 4 / seconds / 1e9, wrong == 0 ? "exact" : "WRONG");
    }
    if (it + 1 == pause_after) {
      // Every fragment so far is acknowledged at this worker: the test that
      // waits for every worker to stop knows no operation is in flight.
      std::fprintf(stderr, "%s: paused after iteration %d (SIGSTOP; SIGCONT resumes)\n", who.c_str(),
                   pause_after);
      std::fflush(stderr);
      std::raise(SIGSTOP);
    }
  }
  if (!run.error.empty()) std::fprintf(stderr, "%s: %s\n", who.c_str(), run.error.c_str());
  const WorkerStats stats = (*worker)->stats();
  worker->reset();  // stops the I/O threads: the queues' counters may be read
  const nlohmann::json device_stats = DeviceStatsJson(**device, QueueCounters::kRead);
  return ReportWorker(*spec, n, iterations, run, stats, device_stats);
}

}  // namespace
}  // namespace atp::examples

int main(int argc, char** argv) { return atp::examples::Main(argc, argv); }
