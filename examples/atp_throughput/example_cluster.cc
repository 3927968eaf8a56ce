#include "examples/atp_throughput/example_cluster.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "atp/transport_factory.h"

ABSL_FLAG(std::string, transport, "loopback",
          "Where the job's frames travel: 'loopback' (an in-process wire with the ATP switch "
          "pipelines in the middle) or 'kernel_udp' (kernel UDP sockets on 127.0.0.1, no "
          "switch: the PS does all the aggregation).");
ABSL_FLAG(std::string, switches, "auto",
          "Loopback only: which in-process switches aggregate: 'two_level' (a ToR per rack "
          "plus the PS rack's ToR), 'single' (one switch doing both levels), 'none' (the PS "
          "does everything), or 'auto' (single for one rack, else two_level).");
ABSL_FLAG(double, loss, 0.0,
          "Loopback only: probability that the fabric drops a frame at each hop, in [0, 1).");
ABSL_FLAG(int, rto_floor_us, 1000,
          "Retransmission timeout floor, microseconds. On a machine with fewer cores than "
          "threads, scheduling delays beyond it cause spurious resends.");
ABSL_FLAG(int, max_sleep_us, 1000,
          "Longest sleep of an idle I/O thread, microseconds (the loopback transport cannot wake "
          "a sleeping receiver, so this bounds the latency it adds per hop).");
ABSL_FLAG(bool, busy_poll, false,
          "I/O threads never sleep (lowest latency; needs a core per thread). Default: adaptive "
          "back-off (spin, yield, then sleep).");

namespace atp::examples {
namespace {

std::string g_tool_dir;

bool OwnFlags(absl::string_view path) {
  return absl::StrContains(path, g_tool_dir) ||
         absl::StrContains(path, "examples/atp_throughput/example_cluster");
}

}  // namespace

void ParseFlagsOrExit(int argc, char** argv, const char* tool_dir, const std::string& usage) {
  g_tool_dir = tool_dir;
  absl::FlagsUsageConfig config;
  config.contains_help_flags = OwnFlags;
  config.contains_helpshort_flags = OwnFlags;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::fprintf(stderr, "unexpected argument '%s' (see --help)\n", rest[1]);
    std::exit(2);
  }
}

std::string TransportFlag() { return absl::GetFlag(FLAGS_transport); }

std::string SwitchesFlag(int racks) {
  if (TransportFlag() != "loopback") return "none";
  std::string s = absl::GetFlag(FLAGS_switches);
  if (s == "auto") s = racks == 1 ? "single" : "two_level";
  return s;
}

std::string Describe(const ClusterShape& shape) {
  std::string out = absl::StrCat(shape.workers, " workers in ", shape.racks, " rack",
                                 shape.racks == 1 ? "" : "s", ", ", shape.io_threads,
                                 " I/O thread", shape.io_threads == 1 ? "" : "s",
                                 " each, transport ", TransportFlag());
  if (TransportFlag() == "loopback") {
    absl::StrAppend(&out, ", switches ", SwitchesFlag(shape.racks));
    if (absl::GetFlag(FLAGS_loss) > 0) absl::StrAppend(&out, ", loss ", absl::GetFlag(FLAGS_loss));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> MakeCluster(const ClusterShape& shape) {
  if (shape.racks < 1 || shape.racks > 32 || shape.workers < shape.racks ||
      shape.workers > 32 * shape.racks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers=", shape.workers, " --racks=", shape.racks,
        ": needs 1..32 racks and 1..32 workers in each rack"));
  }
  testbed::LocalClusterOptions options;
  absl::StatusOr<TransportKind> kind = ParseTransportKind(TransportFlag());
  if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat("--transport: ", kind.status().message()));
  options.transport = *kind;
  const std::string switches = SwitchesFlag(shape.racks);
  if (switches == "two_level") {
    options.aggregation = testbed::FabricAggregation::kTwoLevel;
  } else if (switches == "single") {
    options.aggregation = testbed::FabricAggregation::kSingleSwitch;
  } else if (switches == "none") {
    options.aggregation = testbed::FabricAggregation::kNone;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--switches: unknown value '", switches, "' (two_level, single, none, auto)"));
  }
  options.loss_rate = absl::GetFlag(FLAGS_loss);
  options.polling.max_sleep = absl::Microseconds(absl::GetFlag(FLAGS_max_sleep_us));
  options.polling.min_sleep = std::min(options.polling.min_sleep, options.polling.max_sleep);
  if (absl::GetFlag(FLAGS_busy_poll)) options.polling = PollingOptions::BusyPolling();
  testbed::LocalJob job;
  job.job.job_id = 1;
  job.job.layout.workers_per_rack.assign(static_cast<size_t>(shape.racks), 0);
  for (int w = 0; w < shape.workers; ++w) ++job.job.layout.workers_per_rack[static_cast<size_t>(w % shape.racks)];
  job.job.io_threads = shape.io_threads;
  job.job.slots = shape.slots;
  job.job.initial_window = shape.initial_window;
  job.job.retransmission_floor = absl::Microseconds(absl::GetFlag(FLAGS_rto_floor_us));
  job.job.initial_retransmission_timeout =
      std::max(job.job.initial_retransmission_timeout, job.job.retransmission_floor);
  job.job.max_retransmission_timeout =
      std::max(options.loss_rate > 0 ? absl::Milliseconds(50) : absl::Seconds(1),
               job.job.initial_retransmission_timeout);
  options.jobs.push_back(job);
  return testbed::LocalCluster::Create(options);
}

}  // namespace atp::examples
