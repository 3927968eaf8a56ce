#include "examples/atp_throughput/example_cluster.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "atp/transport_factory.h"
#include "examples/common/tool_flags.h"
#include "examples/common/window_flags.h"
#include "lib/tool/flag_checks.h"

ABSL_FLAG(std::string, switches, "auto",
          "Loopback only: which in-process switches aggregate: 'two_level' (a ToR per rack "
          "plus the PS rack's ToR), 'single' (one switch doing both levels), 'none' (the PS "
          "does everything), or 'auto' (single for one rack, else two_level). Other transports "
          "have no in-process switch: auto or none.");
ABSL_FLAG(double, loss, 0.0,
          "Loopback only: probability that the fabric drops a frame at each hop, in [0, 1).");
// --transport, --rto_floor_us, --max_sleep_us and --busy_poll are shared with
// the endpoint processes (examples/common/tool_flags.cc), and so are --slots,
// --window, --link_gbps and --path_rtt_us (examples/common/window_flags.cc).

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

int ClusterLoops(const ClusterShape& shape) { return shape.workers * shape.io_threads + 1; }

std::string Describe(const ClusterShape& shape) {
  std::string out = absl::StrCat(shape.workers, " workers in ", shape.racks, " rack",
                                 shape.racks == 1 ? "" : "s", ", ", shape.io_threads,
                                 " I/O thread", shape.io_threads == 1 ? "" : "s",
                                 " each, ");
  if (shape.shared_threads == 0) {
    absl::StrAppend(&out, "a thread per loop");
  } else {
    absl::StrAppend(&out, shape.shared_threads, " shared thread",
                    shape.shared_threads == 1 ? "" : "s");
  }
  absl::StrAppend(&out, ", transport ", ClusterTransportFlag());
  if (ClusterTransportFlag() == "loopback") {
    absl::StrAppend(&out, ", switches ", SwitchesFlag(shape.racks),
                    shape.fabric_thread ? " on a thread of their own" : "",
                    shape.ps_on_fabric_thread ? " (with the PS)" : "");
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
  if (absl::Status s = tool::CheckRange("io_threads", shape.io_threads, 1, 16); !s.ok()) return s;
  if (shape.shared_threads != 0) {
    // More threads than loops would leave some idle; 64: SharedIoThreads' limit.
    const int most = std::min(64, ClusterLoops(shape));
    if (absl::Status s = tool::CheckRange("cluster_threads", shape.shared_threads, 1, most);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          s.message(), " (0: a thread per loop; -1: one per core; at most 64 and at most the ",
          ClusterLoops(shape), " I/O loops: ", shape.workers, " workers x ", shape.io_threads,
          " io_threads + 1 PS)"));
    }
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
    // Kernel UDP's in-process job has no switch: 'none' says so, and 'auto'
    // (the default) resolves to it; a switch layout is refused.
    const std::string given = absl::GetFlag(FLAGS_switches);
    if (given != "auto" && given != "none") {
      return tool::FlagError("switches", absl::StrCat("'", given, "' only with --transport=loopback (",
                                                      ClusterTransportFlag(),
                                                      " has no switch: auto or none)"));
    }
    if (absl::Status s = tool::RefuseGiven({"loss"}, "only with --transport=loopback"); !s.ok()) {
      return s;
    }
  }
  options.loss_rate = loss;
  absl::StatusOr<PollingOptions> polling = PollingFromFlags();
  if (!polling.ok()) return polling.status();
  options.polling = *polling;
  options.shared_threads = static_cast<uint32_t>(shape.shared_threads);
  if (shape.fabric_thread && *kind != TransportKind::kLoopback) {
    return absl::InvalidArgumentError(
        "--fabric_thread: only with --transport=loopback (kernel UDP has no switch)");
  }
  options.fabric_thread = shape.fabric_thread;
  if (shape.ps_on_fabric_thread && !shape.fabric_thread) {
    return absl::InvalidArgumentError(
        *kind != TransportKind::kLoopback
            ? "--ps_on_fabric_thread: only with --transport=loopback (kernel UDP has no switch)"
            : "--ps_on_fabric_thread=1: needs the fabric thread (--fabric_thread=1)");
  }
  options.ps_on_fabric_thread = shape.ps_on_fabric_thread;
  testbed::LocalJob job;
  job.job.job_id = 1;
  job.job.layout.workers_per_rack.assign(static_cast<size_t>(shape.racks), 0);
  for (int w = 0; w < shape.workers; ++w) ++job.job.layout.workers_per_rack[static_cast<size_t>(w % shape.racks)];
  job.job.io_threads = static_cast<uint32_t>(shape.io_threads);
  if (absl::Status s = ApplyWindowFlags(&job.job); !s.ok()) return s;
  // Every window slot of every queue has an aggregator of its own at each
  // switch (the fabric's default, 4096, when that is more).
  options.aggregator_count = std::max<size_t>(options.aggregator_count,
                                              RequiredAggregators(job.job, /*jobs=*/1));
  // With injected loss the backed-off timeout stays short (50 ms): resends
  // are the common case there. ApplyRetransmissionFlags raises it to the floor.
  job.job.max_retransmission_timeout =
      options.loss_rate > 0 ? absl::Milliseconds(50) : absl::Seconds(1);
  if (absl::Status s = ApplyRetransmissionFlags(&job.job); !s.ok()) return s;
  options.jobs.push_back(job);
  return testbed::LocalCluster::Create(options);
}

}  // namespace atp::examples
