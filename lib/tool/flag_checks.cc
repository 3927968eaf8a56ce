// lib/tool/flag_checks.cc: the shared checks of flag values (flag_checks.h).
#include "lib/tool/flag_checks.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "atp/status_macros.h"
#include "atp/wire.h"
#include "lib/tool/command_line.h"

namespace atp::tool {
namespace {

// Sv: Abseil 20220623 (Debian) has its own string_view, which StrCat wants.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr int64_t kMaxSleepUs = 1'000'000;  // PollingOptions::Validate's 1 s

// CpusFromFlag: --cpus's ids ("0,1"), or the error naming the flag.
absl::StatusOr<std::vector<int>> CpusFromFlag(const std::string& value) {
  std::vector<int> cpus;
  if (value.empty()) return cpus;
  for (const absl::string_view id : absl::StrSplit(value, ',')) {
    int cpu = -1;
    if (!absl::SimpleAtoi(id, &cpu) || cpu < 0 || cpu >= CPU_SETSIZE) {
      return FlagError("cpus", absl::StrCat("'", id, "' is not a CPU id in 0..", CPU_SETSIZE - 1,
                                            " (a comma-separated list: 0,1)"));
    }
    cpus.push_back(cpu);
  }
  return cpus;
}

// TryCreate: creates `path` (a file nobody else uses) and removes it again:
// what the later write will need, checked by doing it (access(2) would say
// yes to root even on a read-only file system).
absl::Status TryCreate(std::string_view flag, const std::string& path, std::string_view shown) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return FlagError(flag, absl::StrCat("cannot create files in ", Sv(shown), " (",
                                        std::strerror(errno), ")"));
  }
  ::close(fd);
  ::unlink(path.c_str());
  return absl::OkStatus();
}

absl::Status ExistingDirectory(std::string_view flag, const std::string& dir, std::string_view what) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return FlagError(flag, absl::StrCat(Sv(what), "'", dir, "' does not exist"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return FlagError(flag, absl::StrCat(Sv(what), "'", dir, "' is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FlagError(std::string_view flag, std::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("--", Sv(flag), ": ", Sv(reason)));
}

absl::Status CheckRange(std::string_view flag, int64_t value, int64_t low, int64_t high) {
  if (value < low || value > high) {
    return FlagError(flag, absl::StrCat(value, " is not in ", low, "..", high));
  }
  return absl::OkStatus();
}

absl::Status CheckWritableFile(std::string_view flag, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  if (path.back() == '/') return FlagError(flag, absl::StrCat("'", path, "' names a directory"));
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return FlagError(flag, absl::StrCat("'", path, "' is a directory, not a file"));
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (absl::Status s = ExistingDirectory(flag, dir, "its directory "); !s.ok()) return s;
  // Written as PATH.tmp, then renamed over PATH.
  return TryCreate(flag, path + ".tmp", absl::StrCat("'", dir, "'"));
}

absl::Status CheckWritableDirectory(std::string_view flag, const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  if (absl::Status s = ExistingDirectory(flag, path, ""); !s.ok()) return s;
  return TryCreate(flag, absl::StrCat(path, "/.atp-write-check-", ::getpid()),
                   absl::StrCat("'", path, "'"));
}

double PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<double>(pages) * static_cast<double>(page_size)
                                    : 0.0;
}

absl::Status CheckMemory(std::string_view flag, double bytes, std::string_view what) {
  const double memory = PhysicalMemoryBytes();
  if (memory <= 0 || bytes <= memory / 2) return absl::OkStatus();
  return FlagError(flag, absl::StrCat(Sv(what), " need ", std::llround(bytes / (1 << 20)),
                                      " MiB, more than half of this machine's ",
                                      std::llround(memory / (1 << 20)), " MiB"));
}

absl::Status RefuseGiven(std::initializer_list<std::string_view> flags, std::string_view why) {
  for (std::string_view flag : flags) {
    if (FlagGiven(flag)) return FlagError(flag, why);
  }
  return absl::OkStatus();
}

absl::Status CheckMetricsFlags(int64_t port, const std::string& address) {
  if (port == -1) return RefuseGiven({"metrics_address"}, "only with --metrics_port");
  if (absl::Status s = CheckRange("metrics_port", port, -1, 65535); !s.ok()) return s;
  if (!wire::Ipv4Address::Parse(address).ok()) {
    return FlagError("metrics_address", absl::StrCat("'", address, "' is not an IPv4 address"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PollingOptions> PollingFromFlags(const PollingFlags& flags) {
  if (flags.busy_poll) {
    if (absl::Status s = RefuseGiven(
            {"spin_iterations", "yield_iterations", "min_sleep_us", "max_sleep_us"},
            "has no effect with --busy_poll (the threads never back off)");
        !s.ok()) {
      return s;
    }
    PollingOptions busy = PollingOptions::BusyPolling();
    ATP_ASSIGN_OR_RETURN(busy.cpus, CpusFromFlag(flags.cpus));
    return busy;
  }
  if (absl::Status s = CheckRange("spin_iterations", flags.spin_iterations, 0, UINT32_MAX); !s.ok()) return s;
  if (absl::Status s = CheckRange("yield_iterations", flags.yield_iterations, 0, UINT32_MAX); !s.ok()) return s;
  if (absl::Status s = CheckRange("max_sleep_us", flags.max_sleep_us, 1, kMaxSleepUs); !s.ok()) return s;
  if (absl::Status s = CheckRange("min_sleep_us", flags.min_sleep_us, 1, kMaxSleepUs); !s.ok()) return s;
  int64_t min_sleep_us = flags.min_sleep_us;
  if (min_sleep_us > flags.max_sleep_us) {
    if (FlagGiven("min_sleep_us")) {
      return FlagError("min_sleep_us", absl::StrCat(min_sleep_us, " is above --max_sleep_us (",
                                                    flags.max_sleep_us, ")"));
    }
    min_sleep_us = flags.max_sleep_us;
  }
  PollingOptions polling;
  polling.spin_iterations = static_cast<uint32_t>(flags.spin_iterations);
  polling.yield_iterations = static_cast<uint32_t>(flags.yield_iterations);
  polling.min_sleep = absl::Microseconds(min_sleep_us);
  polling.max_sleep = absl::Microseconds(flags.max_sleep_us);
  ATP_ASSIGN_OR_RETURN(polling.cpus, CpusFromFlag(flags.cpus));
  return polling;
}

void ExitIfBad(std::string_view program, const absl::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(program.size()), program.data(),
               std::string(status.message()).c_str());
  std::exit(kExitBadUsage);
}

}  // namespace atp::tool
