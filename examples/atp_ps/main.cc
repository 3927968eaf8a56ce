// atp-ps: the parameter server (PS) of one ATP job as its own process.
//
// Opens the endpoint's device (the common flags of examples/common: a DPDK
// port toward the PS rack's switch, a memif client by default), waits for its
// link, serves the job until SIGINT or SIGTERM, then writes --stats_json
// (atomically, by rename) and exits 0. SIGUSR1 writes --stats_json without
// stopping (the PS counters and the port's; the queues' counters only at exit).
//
//   atp-ps --job=1 --racks=2 --workers_per_rack=2 --io_threads=1
//          --dpdk_port=memif --memif_socket=/tmp/tb/ps.sock --stats_json=/tmp/tb/ps.json
//
// Parameter packets go to the job's multicast group (--group; the switches
// replicate them), or with --delivery=unicast one copy to each worker's
// address (a direct link to a single worker, no switch in the middle).
//
// Exit status: 0 stopped by a signal (stats written); 1 the device could not
// be opened or the server not started; 2 bad flags (the message names the flag).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "atp/metrics.h"
#include "atp/parameter_server.h"
#include "examples/common/endpoint.h"
#include "examples/common/endpoint_flags.h"
#include "examples/common/tool_flags.h"
#include "examples/common/window_flags.h"
#include "lib/tool/flag_checks.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, delivery, "multicast",
          "How parameter packets reach the workers: 'multicast' (one frame to --group; the "
          "switches replicate it) or 'unicast' (one frame per worker: a direct link, no switch).");
ABSL_FLAG(std::string, stats_json, "",
          "Write the counters as one JSON object to this file at exit and on SIGUSR1 "
          "(atomically: PATH.tmp, then rename). Empty: none.");
ABSL_FLAG(bool, contribution_skipping, false,
          "Accept SkipReduce's contribution variant (OpOptions::skip.variant = "
          "kContributions): take each fragment's contributor set from the packets' declared "
          "fan-ins, trusting the workers and switches (docs/skipreduce.md).");
ABSL_FLAG(int, orphan_timeout_ms, 2000,
          "Partial aggregates of a fragment no frame has touched for this long are freed "
          "(dead workers, abandoned jobs); > 0. Keep it above the workers' maximum "
          "retransmission timeout (docs/protocol.md).");
ABSL_FLAG(int, stats_interval_s, 0,
          "0: quiet. N: one line of counters on stderr every N seconds while serving.");

ABSL_FLAG(bool, print_window, false,
          "Print the window and slots per queue that the window flags (--slots, --window, "
          "--link_gbps, --path_rtt_us) give for --io_threads, as one JSON object, and exit "
          "(scripts/testbed sizes the switches' aggregators from it).");

ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics (GET /metrics, atp_ps_*{job=...}) on this TCP port; 0: any "
          "free port (logged); -1: none. docs/observability.md.");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1",
          "--metrics_port: the address to listen on (0.0.0.0: every interface).");

namespace atp::examples {
namespace {

constexpr char kUsage[] =
    "the parameter server of one ATP job, as its own process.\n"
    "Serves until SIGINT/SIGTERM, then writes --stats_json; SIGUSR1 writes it meanwhile.\n"
    "Exit status: 0 clean stop; 1 device or start failure; 2 bad flags.\n"
    "  e.g. atp-ps --job=1 --racks=2 --workers_per_rack=2 --memif_socket=/tmp/tb/ps.sock";

nlohmann::json PsStatsJson(const ParameterServerStats& s) {
  return {{"frames_received", s.frames_received},
          {"decode_errors", s.decode_errors},
          {"source_refused", s.source_refused},
          {"frames_sent", s.frames_sent},
          {"tx_dropped", s.tx_dropped},
          {"gradients", s.gradients},
          {"contributions", s.contributions},
          {"duplicates", s.duplicates},
          {"integer_on_float_path", s.integer_on_float_path},
          {"param_resent", s.param_resent},
          {"stale", s.stale},
          {"ahead", s.ahead},
          {"unknown_job", s.unknown_job},
          {"wrong_shard", s.wrong_shard},
          {"shape_mismatch", s.shape_mismatch},
          {"malformed", s.malformed},
          {"unexpected_ack", s.unexpected_ack},
          {"control", s.control},
          {"completed", s.completed},
          {"fp_completed", s.fp_completed},
          {"switch_completed", s.switch_completed},
          {"collisions_rehashed", s.collisions_rehashed},
          {"overflow_requests", s.overflow_requests},
          {"orphans_released", s.orphans_released},
          {"ce_to_ecn", s.ce_to_ecn},
          {"pulls_answered", s.pulls_answered},
          {"pulls_ignored", s.pulls_ignored},
          {"control_received", s.control_received},
          {"control_rejected", s.control_rejected},
          {"status_sent", s.status_sent},
          {"join_requests", s.join_requests},
          {"rebuilds", s.rebuilds},
          {"stale_joins", s.stale_joins},
          {"unsynchronized_gradients", s.unsynchronized_gradients},
          {"replay_requests", s.replay_requests},
          {"replays", s.replays},
          {"mismatches", s.mismatches},
          {"operations_confirmed", s.operations_confirmed}};
}

// AggregationLine: "is it aggregating?" since `before`: of the fragments
// completed here, how many arrived whole from the switches (one
// contribution, every rack already summed), how many the PS summed itself
// from several contributions, how many took the float path, and why
// (docs/observability.md).
std::string AggregationLine(uint8_t job, const ParameterServerStats& now,
                            const ParameterServerStats& before) {
  const uint64_t completed = now.completed - before.completed;
  const uint64_t fp = now.fp_completed - before.fp_completed;
  const uint64_t whole = now.switch_completed - before.switch_completed;
  const uint64_t summed_here = completed - fp - whole;
  const double whole_percent =
      completed == 0 ? 0.0 : 100.0 * static_cast<double>(whole) / static_cast<double>(completed);
  return absl::StrCat(
      "atp-ps: job ", job, " aggregating? ", completed, " fragments completed: ", whole,
      " whole from the switches (", absl::StrFormat("%.1f", whole_percent), "%), ", summed_here,
      " summed here from ", now.contributions - before.contributions, " contributions, ", fp,
      " on the float path; ",
      now.collisions_rehashed - before.collisions_rehashed, " collisions, ",
      now.duplicates - before.duplicates, " duplicates, ",
      now.orphans_released - before.orphans_released, " orphans released, ",
      now.overflow_requests - before.overflow_requests, " overflow requests");
}

class StatsWriter {
 public:
  StatsWriter(const EndpointSpec& spec, absl::Time start) : spec_(spec), start_(start) {}

  // Write: while serving (kSkip: the queues are in use) or at exit (kRead).
  void Write(const ParameterServerStats& ps, transport::Device& device, QueueCounters queues) {
    const std::string path = absl::GetFlag(FLAGS_stats_json);
    if (path.empty()) return;
    nlohmann::json j;
    j["tool"] = "atp-ps";
    j["job"] = spec_.job.job_id;
    j["address"] = spec_.self.ipv4.ToString();
    j["delivery"] = absl::GetFlag(FLAGS_delivery);
    j["transport"] = std::string(TransportKindName(spec_.transport.kind));
    j["io_threads"] = spec_.job.io_threads;
    j["uptime_s"] = absl::ToDoubleSeconds(absl::Now() - start_);
    j["running"] = queues == QueueCounters::kSkip;
    j["ps"] = PsStatsJson(ps);
    j["device"] = DeviceStatsJson(device, queues);
    if (absl::Status s = WriteFileAtomically(path, j.dump() + "\n"); !s.ok()) {
      std::fprintf(stderr, "atp-ps: --stats_json: %s\n", std::string(s.message()).c_str());
    }
  }

 private:
  const EndpointSpec& spec_;
  absl::Time start_;
};

// PrintWindow: --print_window.
int PrintWindow() {
  JobOptions job;
  const int io_threads = absl::GetFlag(FLAGS_io_threads);
  tool::ExitIfBad("atp-ps", tool::CheckRange("io_threads", io_threads, 1, wire::kMaxQueues));
  job.io_threads = static_cast<uint32_t>(io_threads);
  tool::ExitIfBad("atp-ps", ApplyWindowFlags(&job));
  nlohmann::json j;
  j["io_threads"] = job.io_threads;
  j["slots"] = job.slots;
  j["window"] = job.initial_window;
  j["aggregators_per_job"] = RequiredAggregators(job, /*jobs=*/1);
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int Main(int argc, char** argv) {
  tool::ParseCommandLineOrExit(argc, argv, "atp-ps", {"examples/atp_ps/", kSharedFlagSource},
                               kUsage);
  if (absl::GetFlag(FLAGS_print_window)) return PrintWindow();
  const absl::Time start = absl::Now();
  StopSignals stop;  // before any thread starts (the EAL's included)
  EndpointPlace place;
  place.role = EndpointRole::kParameterServer;
  place.program_name = "atp-ps";
  const std::string delivery = absl::GetFlag(FLAGS_delivery);
  if (delivery == "multicast") {
    place.delivery = ParameterDelivery::kMulticast;
  } else if (delivery == "unicast") {
    place.delivery = ParameterDelivery::kUnicast;
    // One copy to each worker's address: a group would be ignored.
    tool::ExitIfBad("atp-ps", tool::RefuseGiven({"group"}, "only with --delivery=multicast"));
  } else {
    std::fprintf(stderr, "atp-ps: --delivery: '%s' is not multicast or unicast\n", delivery.c_str());
    return kBadFlagsExit;
  }
  if (absl::GetFlag(FLAGS_orphan_timeout_ms) <= 0) {
    std::fprintf(stderr, "atp-ps: --orphan_timeout_ms: must be > 0\n");
    return kBadFlagsExit;
  }
  if (absl::GetFlag(FLAGS_stats_interval_s) < 0) {
    std::fprintf(stderr, "atp-ps: --stats_interval_s: must be >= 0\n");
    return kBadFlagsExit;
  }
  // Checked now: the counters are written at exit, after the whole run.
  tool::ExitIfBad("atp-ps", tool::CheckWritableFile("stats_json", absl::GetFlag(FLAGS_stats_json)));
  // The PS never retransmits: the workers' timeout floor would be ignored.
  tool::ExitIfBad("atp-ps", tool::RefuseGiven({"rto_floor_us"}, "a worker's flag (the PS never retransmits)"));
  MetricsServerOptions metrics_options;
  metrics_options.port = absl::GetFlag(FLAGS_metrics_port);
  metrics_options.address = absl::GetFlag(FLAGS_metrics_address);
  tool::ExitIfBad("atp-ps", tool::CheckMetricsFlags(metrics_options.port, metrics_options.address));
  if (metrics_options.port != -1 && !MetricsAvailable()) {
    tool::ExitIfBad("atp-ps", tool::FlagError("metrics_port", "this build has no prometheus-cpp (prometheus-cpp-dev)"));
  }
  absl::StatusOr<PollingOptions> polling = PollingFromFlags();
  tool::ExitIfBad("atp-ps", polling.status());
  absl::StatusOr<EndpointSpec> spec = BuildEndpoint(EndpointFlagsFromCommandLine(), place);
  if (!spec.ok()) {
    std::fprintf(stderr, "atp-ps: %s\n", std::string(spec.status().message()).c_str());
    return kBadFlagsExit;
  }
  // The window slots must be the workers': the same flags, the same defaults.
  tool::ExitIfBad("atp-ps", ApplyWindowFlags(&spec->job));
  std::fprintf(stderr, "atp-ps: %s, %s\n", spec->description.c_str(),
               DescribeWindow(spec->job).c_str());

  // A server waits for its link as long as it runs (until a signal).
  absl::StatusOr<std::unique_ptr<transport::Device>> device =
      OpenEndpointDevice(*spec, absl::InfiniteFuture(), stop);
  if (!device.ok()) {
    if (device.status().code() == absl::StatusCode::kCancelled) {
      std::fprintf(stderr, "atp-ps: stopped before the link came up\n");
      return 0;
    }
    std::fprintf(stderr, "atp-ps: %s\n", std::string(device.status().message()).c_str());
    return 1;
  }
  ParameterServerOptions options;
  ParameterServerJobOptions served;
  served.job_id = spec->job.job_id;
  served.layout = spec->job.layout;
  served.delivery = place.delivery;
  served.contribution_skipping = absl::GetFlag(FLAGS_contribution_skipping);
  if (place.delivery == ParameterDelivery::kMulticast) {
    served.multicast_group = spec->group;
  } else {
    served.workers = spec->workers;
  }
  served.gradient_sources = spec->workers;  // the PS accepts the job's workers only
  options.jobs.push_back(served);
  options.gradient_source_check = spec->source_check;
  options.slots = spec->job.slots;
  options.io_threads = spec->job.io_threads;
  options.base_port = spec->job.base_port;
  options.polling = *polling;
  options.orphan_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_orphan_timeout_ms));
  absl::StatusOr<std::unique_ptr<ParameterServer>> server =
      ParameterServer::Start(options, **device);
  if (!server.ok()) {
    std::fprintf(stderr, "atp-ps: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<MetricsServer> metrics;
  if (metrics_options.port != -1) {
    MetricsServerOptions m = metrics_options;
    m.labels = {{"job", absl::StrCat(spec->job.job_id)}};
    absl::StatusOr<std::unique_ptr<MetricsServer>> started = ServeParameterServerMetrics(**server, m);
    if (!started.ok()) {
      std::fprintf(stderr, "atp-ps: --metrics_port: %s\n", std::string(started.status().message()).c_str());
      return started.status().code() == absl::StatusCode::kInvalidArgument ? kBadFlagsExit : 1;
    }
    metrics = *std::move(started);
    std::fprintf(stderr, "atp-ps: metrics on http://%s:%d/metrics\n", m.address.c_str(), metrics->port());
  }
  std::fprintf(stderr, "atp-ps: ready\n");
  StatsWriter writer(*spec, start);
  const int interval_s = absl::GetFlag(FLAGS_stats_interval_s);
  absl::Time next_line = interval_s > 0 ? absl::Now() + absl::Seconds(interval_s)
                                        : absl::InfiniteFuture();
  ParameterServerStats previous;
  while (!stop.stopped()) {
    const StopSignals::Event event =
        stop.Wait(std::min(absl::Seconds(1), std::max(absl::ZeroDuration(), next_line - absl::Now())));
    if (event == StopSignals::Event::kUser1) {
      writer.Write((*server)->stats(), **device, QueueCounters::kSkip);
    }
    if (absl::Now() >= next_line) {
      const ParameterServerStats s = (*server)->stats();
      std::fprintf(stderr, "atp-ps: %llu frames in, %llu out, %llu fragments completed\n",
                   static_cast<unsigned long long>(s.frames_received),
                   static_cast<unsigned long long>(s.frames_sent),
                   static_cast<unsigned long long>(s.completed));
      std::fprintf(stderr, "%s\n", AggregationLine(spec->job.job_id, s, previous).c_str());
      previous = s;
      next_line = absl::Now() + absl::Seconds(interval_s);
    }
  }
  const ParameterServerStats final_stats = (*server)->stats();
  std::fprintf(stderr, "%s\n", AggregationLine(spec->job.job_id, final_stats, {}).c_str());
  metrics.reset();  // scrapes read the server
  server->reset();  // stops the threads: the queues' counters may be read
  writer.Write(final_stats, **device, QueueCounters::kRead);
  std::fprintf(stderr, "atp-ps: stopped by signal %d; %llu fragments completed\n",
               stop.stop_signal(), static_cast<unsigned long long>(final_stats.completed));
  return 0;
}

}  // namespace
}  // namespace atp::examples

int main(int argc, char** argv) { return atp::examples::Main(argc, argv); }
