// examples/common/tool_flags.cc: ParseToolFlagsOrExit and the shared flags.
#include "examples/common/tool_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

ABSL_FLAG(std::string, transport, "",
          "Where the frames travel. In-process job (atp-throughput --role=cluster, atp-ping): "
          "'loopback' (default: an in-process wire with the ATP switch pipelines) or "
          "'kernel_udp' (sockets on 127.0.0.1, no switch). Endpoint processes (atp-ps, "
          "atp-throughput --role=worker): 'dpdk' (default: a DPDK port, see --dpdk_port) or "
          "'kernel_udp' (the kernel UDP overlay, when this libatp has it).");
ABSL_FLAG(int, rto_floor_us, 1000,
          "Retransmission timeout floor, microseconds. On a machine with fewer cores than "
          "threads, scheduling delays beyond it cause spurious resends.");
ABSL_FLAG(int, max_sleep_us, 1000,
          "Longest sleep of an idle I/O thread, microseconds (the loopback transport cannot wake "
          "a sleeping receiver, so this bounds the latency it adds per hop).");
ABSL_FLAG(int, spin_iterations, atp::PollingOptions{}.spin_iterations,
          "Idle rounds an I/O thread spins (no syscall) before it yields.");
ABSL_FLAG(int, yield_iterations, atp::PollingOptions{}.yield_iterations,
          "Idle rounds an I/O thread yields the CPU (sched_yield) after spinning, before it "
          "sleeps.");
ABSL_FLAG(int, min_sleep_us, 20,
          "First sleep of an idle I/O thread, microseconds; each further idle sleep doubles, up "
          "to --max_sleep_us.");
ABSL_FLAG(bool, busy_poll, false,
          "I/O threads never sleep (lowest latency; needs a core per thread). Default: adaptive "
          "back-off (spin, yield, then sleep).");

namespace atp::examples {
namespace {

std::string& ProgramName() {
  static std::string name = "tool";
  return name;
}

std::vector<std::string>& FlagDirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

bool OwnFlags(absl::string_view path) {
  if (absl::StrContains(path, "examples/common/")) return true;
  for (const std::string& dir : FlagDirs()) {
    if (absl::StrContains(path, dir)) return true;
  }
  return false;
}

[[noreturn]] void BadFlag(const std::string& message) {
  std::fprintf(stderr, "%s: %s (see --help)\n", ProgramName().c_str(), message.c_str());
  std::exit(kBadFlagsExit);
}

// CheckFlags: what absl::ParseCommandLine would refuse with exit status 1,
// refused here first with kBadFlagsExit. Values are parsed into the flags
// (ParseCommandLine then sets them again to the same values).
void CheckFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") return;  // the rest is positional
    if (!absl::StartsWith(arg, "-") || arg == "-") continue;
    arg.remove_prefix(absl::StartsWith(arg, "--") ? 2 : 1);
    const size_t equals = arg.find('=');
    absl::string_view name = arg.substr(0, equals);
    const bool has_value = equals != absl::string_view::npos;
    absl::string_view value = has_value ? arg.substr(equals + 1) : absl::string_view();
    // Abseil's usage flags are not in the registry; ParseCommandLine handles them.
    static constexpr absl::string_view kUsageFlags[] = {
        "help", "helpfull", "helpshort", "helppackage", "version", "only_check_args", "helpon",
        "helpmatch"};
    if (std::find(std::begin(kUsageFlags), std::end(kUsageFlags), name) != std::end(kUsageFlags)) {
      continue;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no") && !has_value) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) continue;
    }
    if (flag == nullptr) {
      // Abseil's own flags (--flagfile, --fromenv, ...) are found above;
      // anything else is unknown.
      BadFlag(std::string("unknown flag --") + std::string(name));
    }
    if (flag->IsOfType<bool>() && !has_value) continue;
    if (!has_value) {
      if (i + 1 >= argc) BadFlag(std::string("--") + std::string(name) + ": missing value");
      value = argv[++i];
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      BadFlag(std::string("--") + std::string(name) + "=" + std::string(value) + ": " + error);
    }
  }
}

}  // namespace

void ParseToolFlagsOrExit(int argc, char** argv, const std::vector<std::string>& flag_dirs,
                          const std::string& usage) {
  FlagDirs() = flag_dirs;
  if (argc > 0) {
    const char* slash = std::strrchr(argv[0], '/');
    ProgramName() = slash == nullptr ? argv[0] : slash + 1;
  }
  absl::FlagsUsageConfig config;
  config.contains_help_flags = OwnFlags;
  config.contains_helpshort_flags = OwnFlags;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  CheckFlags(argc, argv);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) BadFlag(std::string("unexpected argument '") + rest[1] + "'");
}

std::string TransportFlag() { return absl::GetFlag(FLAGS_transport); }

std::string ResolvedTransportFlag(const std::string& fallback) {
  const std::string t = TransportFlag();
  return t.empty() ? fallback : t;
}

PollingOptions PollingFromFlags() {
  if (absl::GetFlag(FLAGS_busy_poll)) return PollingOptions::BusyPolling();
  PollingOptions polling;
  polling.spin_iterations = static_cast<uint32_t>(std::max(absl::GetFlag(FLAGS_spin_iterations), 0));
  polling.yield_iterations = static_cast<uint32_t>(std::max(absl::GetFlag(FLAGS_yield_iterations), 0));
  polling.max_sleep = absl::Microseconds(absl::GetFlag(FLAGS_max_sleep_us));
  polling.min_sleep = std::min(absl::Microseconds(std::max(absl::GetFlag(FLAGS_min_sleep_us), 1)),
                               polling.max_sleep);
  return polling;
}

absl::Duration RetransmissionFloorFromFlags() {
  return absl::Microseconds(absl::GetFlag(FLAGS_rto_floor_us));
}

void ApplyRetransmissionFlags(JobOptions* job) {
  job->retransmission_floor = RetransmissionFloorFromFlags();
  job->initial_retransmission_timeout =
      std::max(job->initial_retransmission_timeout, job->retransmission_floor);
  job->max_retransmission_timeout =
      std::max(job->max_retransmission_timeout, job->initial_retransmission_timeout);
}

}  // namespace atp::examples
