// lib/tool/flag_checks.h: the checks of flag values that every libatp tool
// needs, in one place, so that each bad value gets the same kind of answer:
// an InvalidArgumentError whose message starts with the flag ("--slots: ..."),
// which the tool prints as "<program>: <message>" before exiting with
// kExitBadUsage (ExitIfBad). Nothing here exits by itself except ExitIfBad.
//
//   ExitIfBad("atp-ps", CheckWritableFile("stats_json", absl::GetFlag(FLAGS_stats_json)));
//   ExitIfBad("atp-throughput", RefuseGiven({"slots", "window"}, "only with --role=cluster"));
//   ExitIfBad("atp-ping", CheckMemory("values", bytes, "the pings' inputs and results"));
#ifndef ATP_LIB_TOOL_FLAG_CHECKS_H_
#define ATP_LIB_TOOL_FLAG_CHECKS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/options.h"

namespace atp::tool {

// FlagError: InvalidArgumentError "--<flag>: <reason>".
absl::Status FlagError(std::string_view flag, std::string_view reason);

// CheckRange: `value` in [low, high], else "--flag: V is not in LOW..HIGH".
absl::Status CheckRange(std::string_view flag, int64_t value, int64_t low, int64_t high);

// CheckWritableFile: a file this process will write later (statistics at
// exit, written atomically as PATH.tmp then renamed): checked now, so that a
// typo does not cost a whole run's results. An empty path passes (the
// output is off). Refused: a directory, a parent directory that does not
// exist, or one where PATH.tmp cannot be created (tried, then removed).
absl::Status CheckWritableFile(std::string_view flag, const std::string& path);

// CheckWritableDirectory: an existing directory this process can create
// files in (tried with a scratch file, then removed). An empty path passes.
absl::Status CheckWritableDirectory(std::string_view flag, const std::string& path);

// PhysicalMemoryBytes: this machine's RAM (0 when unknown).
double PhysicalMemoryBytes();

// CheckMemory: refuses `bytes` of memory that a flag sizes when they exceed
// half of this machine's RAM (the run would abort with bad_alloc or swap):
// "--flag: <what> need N MiB, more than half of this machine's M MiB".
// Passes when the RAM is unknown.
absl::Status CheckMemory(std::string_view flag, double bytes, std::string_view what);

// RefuseGiven: the first of `flags` given on the command line (FlagGiven)
// is refused with "--flag: <why>"; a tool calls it for the flags that the
// mode it runs in would ignore ("only with --role=cluster").
absl::Status RefuseGiven(std::initializer_list<std::string_view> flags, std::string_view why);

// CheckMetricsFlags: --metrics_port (-1: off, 0: any free port, else
// 1..65535) and --metrics_address (an IPv4 address to listen on; only with
// a port).
absl::Status CheckMetricsFlags(int64_t port, const std::string& address);

// PollingFlags: the values of a tool's idle back-off flags (--busy_poll,
// --spin_iterations, --yield_iterations, --min_sleep_us, --max_sleep_us)
// and of --cpus (comma-separated CPU ids, empty: unpinned).
struct PollingFlags {
  bool busy_poll = false;
  int64_t spin_iterations = 0;
  int64_t yield_iterations = 0;
  int64_t min_sleep_us = 0;
  int64_t max_sleep_us = 0;
  std::string cpus;
};

// PollingFromFlags: the PollingOptions the flags give, or the error naming
// the flag: iterations >= 0, sleeps in 1..1000000 us, --min_sleep_us at most
// --max_sleep_us when both are given (a default min above a given max is
// lowered to it), none of the back-off flags with --busy_poll, and --cpus a
// list of CPU ids in 0..CPU_SETSIZE-1 (whether this process may run on them
// is checked when the threads start).
absl::StatusOr<PollingOptions> PollingFromFlags(const PollingFlags& flags);

// ExitIfBad: prints "<program>: <message>" on stderr and exits with
// kExitBadUsage when `status` is an error.
void ExitIfBad(std::string_view program, const absl::Status& status);

}  // namespace atp::tool

#endif  // ATP_LIB_TOOL_FLAG_CHECKS_H_
