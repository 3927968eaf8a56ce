// examples/common/window_flags.cc: --slots, --window, --link_gbps and
// --path_rtt_us, shared by atp-throughput (both roles), atp-ping and atp-ps.
#include "examples/common/window_flags.h"

#include <algorithm>
#include <bit>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "atp/window_sizing.h"
#include "lib/tool/command_line.h"
#include "lib/tool/flag_checks.h"

ABSL_FLAG(int, slots, 0,
          "Window slots per queue, a power of two in 1..65536 (the PS's must equal the "
          "workers'). 0: from the path if --link_gbps or --path_rtt_us is given, else "
          "JobOptions' default (1024).");
ABSL_FLAG(int, window, 0,
          "Initial window, fragments in flight per queue, 1..--slots. 0: from the path if "
          "--link_gbps or --path_rtt_us is given, else JobOptions' default (200).");
ABSL_FLAG(double, link_gbps, atp::examples::kDefaultLinkGbps,
          "The path's slowest link, Gb/s: with --path_rtt_us it sizes each queue's window and "
          "slots (their bandwidth-delay product over --io_threads, docs/protocol.md). Neither "
          "given: JobOptions' fixed defaults (an application's default Worker gets the same).");
ABSL_FLAG(double, path_rtt_us, atp::examples::kDefaultPathRttUs,
          "The path's round trip, microseconds (measured: atp-ping's p50), for --link_gbps.");

namespace atp::examples {
namespace {

constexpr int kMaxSlots = 65536;

// FitAroundGiven: at most one of --slots/--window given (0: not given); it
// wins over job's value and the other is narrowed or widened to fit.
void FitAroundGiven(int slots, int window, JobOptions* job) {
  if (slots != 0) {
    job->slots = static_cast<uint32_t>(slots);
    job->initial_window = std::min(job->initial_window, job->slots);
  } else if (window != 0) {
    job->initial_window = static_cast<uint32_t>(window);
    job->slots = std::max(job->slots, std::bit_ceil(job->initial_window));
  }
}

}  // namespace

absl::Status ApplyWindowFlags(JobOptions* job) {
  const int slots = absl::GetFlag(FLAGS_slots);
  const int window = absl::GetFlag(FLAGS_window);
  if (slots != 0 && (slots < 1 || slots > kMaxSlots || !std::has_single_bit(static_cast<unsigned>(slots)))) {
    return tool::FlagError("slots", absl::StrCat(slots, " is not a power of two in 1..65536"));
  }
  if (window != 0) {
    if (absl::Status s = tool::CheckRange("window", window, 1, slots != 0 ? slots : kMaxSlots);
        !s.ok()) {
      return s;
    }
  }
  if (slots != 0 && window != 0) {
    if (absl::Status s = tool::RefuseGiven({"link_gbps", "path_rtt_us"},
                                           "sizes the window from the path: not with both "
                                           "--slots and --window");
        !s.ok()) {
      return s;
    }
    job->slots = static_cast<uint32_t>(slots);
    job->initial_window = static_cast<uint32_t>(window);
    return absl::OkStatus();
  }
  if (!tool::FlagGiven("link_gbps") && !tool::FlagGiven("path_rtt_us")) {
    // No path named: JobOptions' own defaults, which an application that
    // links libatp (C++ or Python) also gets, so that a default atp-ps serves
    // a default Worker. Either flag alone fits the other around it.
    FitAroundGiven(slots, window, job);
    return absl::OkStatus();
  }
  const double gbps = absl::GetFlag(FLAGS_link_gbps);
  const double rtt_us = absl::GetFlag(FLAGS_path_rtt_us);
  // !(x > 0) also refuses NaN, which absl::Microseconds cannot take.
  if (!(gbps > 0) || gbps > 1e4) {
    return tool::FlagError("link_gbps", absl::StrCat(gbps, " is not in (0, 10000]"));
  }
  if (!(rtt_us > 0) || rtt_us > 1e6) {
    return tool::FlagError("path_rtt_us", absl::StrCat(rtt_us, " is not in (0, 1000000]"));
  }
  PathEstimate path;
  path.link_bits_per_second = gbps * 1e9;
  path.round_trip = absl::Microseconds(rtt_us);
  if (absl::Status s = SizeWindowsForPath(path, job); !s.ok()) {
    return tool::FlagError("link_gbps", std::string(s.message()));
  }
  FitAroundGiven(slots, window, job);
  return absl::OkStatus();
}

uint64_t RequiredAggregators(const JobOptions& job, int jobs) {
  return uint64_t{job.slots} * job.io_threads * static_cast<uint64_t>(std::max(jobs, 0));
}

std::string DescribeWindow(const JobOptions& job) {
  std::string out = absl::StrCat("window ", job.initial_window, " of ", job.slots,
                                 " slots per queue");
  const bool slots = absl::GetFlag(FLAGS_slots) != 0;
  const bool window = absl::GetFlag(FLAGS_window) != 0;
  if (slots && window) {
    absl::StrAppend(&out, " (--slots, --window)");
  } else if (!tool::FlagGiven("link_gbps") && !tool::FlagGiven("path_rtt_us")) {
    absl::StrAppend(&out, " (", slots ? "--slots, " : "", window ? "--window, " : "",
                    "JobOptions' defaults)");
  } else {
    absl::StrAppend(&out, " (", slots ? "--slots, " : "", window ? "--window, " : "",
                    absl::GetFlag(FLAGS_link_gbps), " Gb/s x ", absl::GetFlag(FLAGS_path_rtt_us),
                    " us)");
  }
  return out;
}

}  // namespace atp::examples
