#include "examples/atp_throughput/example_cluster.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "atp/transport_factory.h"
#include "atp/window_sizing.h"
#include "examples/common/tool_flags.h"
#include "lib/tool/flag_checks.h"

ABSL_FLAG(std::string, switches, "auto",
          "Loopback only: which in-process switches aggregate: 'two_level' (a ToR per rack "
          "plus the PS rack's ToR), 'single' (one switch doing both levels), 'none' (the PS "
          "does everything), or 'auto' (single for one rack, else two_level).");
ABSL_FLAG(double, loss, 0.0,
          "Loopback only: probability that the fabric drops a frame at each hop, in [0, 1).");
ABSL_FLAG(double, link_gbps, 0,
          "Size each queue's window and slots from the path's bandwidth-delay product "
          "(docs/protocol.md): the slowest link's rate, Gb/s, with --path_rtt_us. 0: the fixed "
          "window and slots.");
ABSL_FLAG(double, path_rtt_us, 0,
          "The path's round trip for --link_gbps, microseconds (measured: atp-ping's p50).");
// --transport, --rto_floor_us, --max_sleep_us and --busy_poll are shared with
// the endpoint processes: examples/common/tool_flags.cc.

namespace atp::examples {

void ParseFlagsOrExit(int argc, char** argv, const char* program, const char* tool_dir,
                      const std::string& usage) {
  tool::ParseCommandLineOrExit(
      argc, argv, program, {tool_dir, "examples/atp_throughput/example_cluster", kSharedFlagSource},
      usage);
}

std::string ClusterTransportFlag() { return ResolvedTransportFlag("loopback"); }

std::string SwitchesFlag(int racks) {
  if (ClusterTransportFlag() != "loopback") return "none";
  std::string s = absl::GetFlag(FLAGS_switches);
  if (s == "auto") s = racks == 1 ? "single" : "two_level";
  return s;
}

std::string Describe(const ClusterShape& shape) {
  std::string out = absl::StrCat(shape.workers, " workers in ", shape.racks, " rack",
                                 shape.racks == 1 ? "" : "s", ", ", shape.io_threads,
                                 " I/O thread", shape.io_threads == 1 ? "" : "s",
                                 " each, transport ", ClusterTransportFlag());
  if (ClusterTransportFlag() == "loopback") {
    absl::StrAppend(&out, ", switches ", SwitchesFlag(shape.racks));
    if (absl::GetFlag(FLAGS_loss) > 0) absl::StrAppend(&out, ", loss ", absl::GetFlag(FLAGS_loss));
  }
  return out;
}

namespace {

// SizeWindowsFromFlags: --link_gbps and --path_rtt_us, when given, replace
// the job's fixed window and slots (never explicit ones: --window/--slots).
absl::Status SizeWindowsFromFlags(bool explicit_window, JobOptions* job) {
  const double gbps = absl::GetFlag(FLAGS_link_gbps);
  const double rtt_us = absl::GetFlag(FLAGS_path_rtt_us);
  if (gbps == 0 && rtt_us == 0) return absl::OkStatus();
  if (explicit_window) {
    return absl::InvalidArgumentError(
        "--link_gbps/--path_rtt_us size the window and slots: not with --window or --slots");
  }
  // !(x > 0) also refuses NaN, which absl::Microseconds cannot take.
  if (!(gbps > 0) || !(rtt_us > 0) || rtt_us > 1e6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--link_gbps (", gbps, ") and --path_rtt_us (", rtt_us,
        ") go together: a rate > 0 and a round trip in (0, 1e6]"));
  }
  PathEstimate path;
  path.link_bits_per_second = gbps * 1e9;
  path.round_trip = absl::Microseconds(rtt_us);
  if (absl::Status s = SizeWindowsForPath(path, job); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--link_gbps: ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> MakeCluster(const ClusterShape& shape) {
  if (shape.racks < 1 || shape.racks > 32 || shape.workers < shape.racks ||
      shape.workers > 32 * shape.racks) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--workers=", shape.workers, " --racks=", shape.racks,
        ": needs 1..32 racks and 1..32 workers in each rack"));
  }
  if (absl::Status s = tool::CheckRange("io_threads", shape.io_threads, 1, 16); !s.ok()) return s;
  if (shape.slots < 1 || shape.slots > 65536 || (shape.slots & (shape.slots - 1)) != 0) {
    return tool::FlagError("slots", absl::StrCat(shape.slots, " is not a power of two in 1..65536"));
  }
  if (shape.initial_window < 1 || shape.initial_window > shape.slots) {
    return tool::FlagError("window", absl::StrCat(shape.initial_window, " is not in 1..--slots (",
                                                  shape.slots, ")"));
  }
  const double loss = absl::GetFlag(FLAGS_loss);
  if (!(loss >= 0 && loss < 1)) return tool::FlagError("loss", absl::StrCat(loss, " is not in [0, 1)"));
  testbed::LocalClusterOptions options;
  absl::StatusOr<TransportKind> kind = ParseTransportKind(ClusterTransportFlag());
  if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat("--transport: ", kind.status().message()));
  if (*kind == TransportKind::kDpdk) {
    return absl::InvalidArgumentError(
        "--transport=dpdk: the in-process job runs over loopback or kernel_udp; DPDK endpoints "
        "run one per process (--role=worker, and atp-ps)");
  }
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
  if (*kind != TransportKind::kLoopback) {
    if (absl::Status s = tool::RefuseGiven({"switches", "loss"}, "only with --transport=loopback");
        !s.ok()) {
      return s;
    }
  }
  options.loss_rate = loss;
  absl::StatusOr<PollingOptions> polling = PollingFromFlags();
  if (!polling.ok()) return polling.status();
  options.polling = *polling;
  testbed::LocalJob job;
  job.job.job_id = 1;
  job.job.layout.workers_per_rack.assign(static_cast<size_t>(shape.racks), 0);
  for (int w = 0; w < shape.workers; ++w) ++job.job.layout.workers_per_rack[static_cast<size_t>(w % shape.racks)];
  job.job.io_threads = static_cast<uint32_t>(shape.io_threads);
  job.job.slots = static_cast<uint32_t>(shape.slots);
  job.job.initial_window = static_cast<uint32_t>(shape.initial_window);
  if (absl::Status s = SizeWindowsFromFlags(shape.explicit_window, &job.job); !s.ok()) return s;
  absl::StatusOr<absl::Duration> floor = RetransmissionFloorFromFlags();
  if (!floor.ok()) return floor.status();
  job.job.retransmission_floor = *floor;
  job.job.initial_retransmission_timeout =
      std::max(job.job.initial_retransmission_timeout, job.job.retransmission_floor);
  job.job.max_retransmission_timeout =
      std::max(options.loss_rate > 0 ? absl::Milliseconds(50) : absl::Seconds(1),
               job.job.initial_retransmission_timeout);
  options.jobs.push_back(job);
  return testbed::LocalCluster::Create(options);
}

}  // namespace atp::examples
