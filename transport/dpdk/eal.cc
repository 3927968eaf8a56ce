// transport/dpdk/eal.cc: DpdkEalOptions and the process-wide guard around
// rte_eal_init, which DPDK allows to succeed once per process.
#include <sched.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "atp/transport/dpdk.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/status.h"
#include "transport/dpdk/thread_lcore.h"

namespace atp::transport {
namespace {

constexpr uint32_t kMinMemoryMb = 64;
constexpr uint32_t kMaxMemoryMb = 1u << 20;

bool AllOf(const std::string& text, const char* allowed_punctuation) {
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) continue;
    if (std::string_view(allowed_punctuation).find(c) == std::string_view::npos) return false;
  }
  return true;
}

// IsPciAddress: "DDDD:BB:DD.F" or "BB:DD.F", hexadecimal.
bool IsPciAddress(const std::string& text) {
  const size_t n = text.size();
  if (n != 7 && n != 12) return false;
  const std::string_view bdf = std::string_view(text).substr(n - 7);
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (n == 12 && (text[4] != ':' || !hex(text[0]) || !hex(text[1]) || !hex(text[2]) || !hex(text[3]))) {
    return false;
  }
  return hex(bdf[0]) && hex(bdf[1]) && bdf[2] == ':' && hex(bdf[3]) && hex(bdf[4]) &&
         bdf[5] == '.' && bdf[6] >= '0' && bdf[6] <= '7';
}

// IsVdevString: "<driver name>[,key=value...]", the driver name in [a-z0-9_].
bool IsVdevString(const std::string& text) {
  const size_t comma = text.find(',');
  const std::string name = text.substr(0, comma);
  if (name.empty() || !AllOf(name, "_")) return false;
  return text.find_first_of(" \t\n") == std::string::npos;
}

// AffinityCpuList: the CPUs this thread may run on, as "0-1" or "0,2,5".
std::string AffinityCpuList() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return "0";
  std::vector<std::string> parts;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    parts.push_back(last == cpu ? absl::StrCat(cpu) : absl::StrCat(cpu, "-", last));
    cpu = last;
  }
  return parts.empty() ? "0" : absl::StrJoin(parts, ",");
}

// FreeHugepages: free hugepages of any size, from sysfs.
uint64_t FreeHugepages() {
  uint64_t total = 0;
  for (const char* size : {"hugepages-2048kB", "hugepages-1048576kB"}) {
    std::ifstream in(absl::StrCat("/sys/kernel/mm/hugepages/", size, "/free_hugepages"));
    uint64_t pages = 0;
    if (in >> pages) total += pages;
  }
  return total;
}

struct EalState {
  std::mutex mu;
  bool attempted = false;
  absl::Status result;
  std::vector<std::string> args;
  // argv: the EAL may keep pointers into the strings and permutes the
  // pointer array, so the strings are owned apart (argv_storage, never
  // changed once filled) and both live as long as the process.
  std::vector<std::string> argv_storage;
  std::vector<char*> argv;
};

EalState& State() {
  static EalState* state = new EalState();  // never destroyed: EAL outlives static destructors
  return *state;
}

}  // namespace

absl::Status DpdkEalOptions::Validate() const {
  if (program_name.empty() || !AllOf(program_name, "_-.")) {
    return absl::InvalidArgumentError(absl::StrCat("DpdkEalOptions.program_name = '", program_name,
                                                   "': must be non-empty [A-Za-z0-9_.-]"));
  }
  if (!lcores.empty() && !AllOf(lcores, ",-@()")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DpdkEalOptions.lcores = '", lcores, "': an --lcores list such as '0', '0-1' or '0@(0-1)'"));
  }
  if (memory_mb < kMinMemoryMb || memory_mb > kMaxMemoryMb) {
    return absl::InvalidArgumentError(absl::StrCat("DpdkEalOptions.memory_mb = ", memory_mb,
                                                   ": must be in [", kMinMemoryMb, ", ",
                                                   kMaxMemoryMb, "]"));
  }
  if (memory == DpdkMemory::kHugePagesShared) {
    if (file_prefix.empty() || !AllOf(file_prefix, "_-")) {
      return absl::InvalidArgumentError(
          absl::StrCat("DpdkEalOptions.file_prefix = '", file_prefix,
                       "': kHugePagesShared needs a non-empty [A-Za-z0-9_-] prefix"));
    }
  } else if (!file_prefix.empty()) {
    return absl::InvalidArgumentError(
        "DpdkEalOptions.file_prefix: only with DpdkMemory::kHugePagesShared (the other modes "
        "leave no files)");
  }
  for (const std::string& vdev : vdevs) {
    if (!IsVdevString(vdev)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DpdkEalOptions.vdevs: '", vdev, "' is not '<driver>[,key=value,...]' without spaces"));
    }
  }
  for (const std::string& pci : pci_allow) {
    if (!IsPciAddress(pci)) {
      return absl::InvalidArgumentError(absl::StrCat("DpdkEalOptions.pci_allow: '", pci,
                                                     "' is not a PCI address (0000:3b:00.0)"));
    }
  }
  if (log_level.empty() || !AllOf(log_level, "._:*")) {
    return absl::InvalidArgumentError(absl::StrCat("DpdkEalOptions.log_level = '", log_level,
                                                   "': a level ('warning') or 'type:level'"));
  }
  for (const std::string& arg : extra_args) {
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0 ||
        arg.find_first_of(" \t\n") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "DpdkEalOptions.extra_args: '", arg, "' is not one '--option' or '--option=value'"));
    }
    for (const char* owned : {"--no-huge", "--in-memory", "--file-prefix", "--huge-unlink",
                              "--no-pci", "--no-shconf", "--lcores", "--vdev"}) {
      if (arg.compare(0, std::string_view(owned).size(), owned) == 0) {
        return absl::InvalidArgumentError(absl::StrCat("DpdkEalOptions.extra_args: '", arg,
                                                       "' is set by a field of DpdkEalOptions"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> DpdkEalOptions::ToArgs() const {
  std::vector<std::string> args;
  args.push_back(absl::StrCat("--lcores=", lcores.empty() ? absl::StrCat("0@(", AffinityCpuList(), ")")
                                                          : lcores));
  switch (memory) {
    case DpdkMemory::kNoHugePages:
      // Without hugepages nothing can be shared between processes anyway;
      // --no-shconf keeps the EAL from writing /var/run/dpdk/rte/ (which
      // concurrent processes would fight over).
      args.insert(args.end(), {"--no-huge", "--no-shconf"});
      break;
    case DpdkMemory::kHugePagesInMemory:
      args.push_back("--in-memory");
      break;
    case DpdkMemory::kHugePagesShared:
      // Never --file-prefix without --huge-unlink: that leaks hugepage files.
      args.insert(args.end(), {absl::StrCat("--file-prefix=", file_prefix), "--huge-unlink"});
      break;
  }
  args.push_back(absl::StrCat("-m", memory_mb));
  if (pci_allow.empty()) {
    args.push_back("--no-pci");
  } else {
    for (const std::string& pci : pci_allow) args.push_back(absl::StrCat("--allow=", pci));
  }
  for (const std::string& vdev : vdevs) args.push_back(absl::StrCat("--vdev=", vdev));
  if (telemetry == DpdkTelemetry::kOff) args.push_back("--no-telemetry");
  args.push_back(absl::StrCat("--log-level=", log_level));
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return args;
}

absl::Status InitDpdkEal(const DpdkEalOptions& options) {
  ATP_RETURN_IF_ERROR(options.Validate());
  std::vector<std::string> args = options.ToArgs();
  EalState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  if (state.attempted) {
    if (!state.result.ok()) {
      return absl::Status(state.result.code(),
                          absl::StrCat(state.result.message(),
                                       " (the EAL cannot be initialised again in this process)"));
    }
    if (args != state.args) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the DPDK EAL is already initialised in this process with [", absl::StrJoin(state.args, " "),
          "]; a second, different initialisation [", absl::StrJoin(args, " "),
          "] is impossible (rte_eal_init succeeds once per process): use one EAL configuration "
          "per process"));
    }
    return absl::OkStatus();
  }
  if (options.memory != DpdkMemory::kNoHugePages && FreeHugepages() == 0) {
    // Not `attempted`: the EAL was not touched, so a later call may try again.
    return absl::FailedPreconditionError(
        "DPDK EAL: hugepage memory asked for, but no hugepage is free (reserve some: echo 1024 > "
        "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages; or use DpdkMemory::kNoHugePages)");
  }
  state.attempted = true;
  state.args = args;
  state.argv_storage.push_back(options.program_name);
  state.argv_storage.insert(state.argv_storage.end(), args.begin(), args.end());
  for (std::string& arg : state.argv_storage) state.argv.push_back(arg.data());
  state.argv.push_back(nullptr);
  const int argc = static_cast<int>(state.argv.size() - 1);
  if (::rte_eal_init(argc, state.argv.data()) < 0) {
    state.result = internal::RteErrorStatus(
        rte_errno, absl::StrCat("rte_eal_init(", absl::StrJoin(args, " "), ")"));
    return state.result;
  }
  state.result = absl::OkStatus();
  return absl::OkStatus();
}

std::vector<std::string> DpdkEalArgs() {
  EalState& state = State();
  std::lock_guard<std::mutex> lock(state.mu);
  return state.result.ok() && state.attempted ? state.args : std::vector<std::string>{};
}

absl::Status RegisterDpdkIoThread() {
  if (DpdkEalArgs().empty()) return absl::FailedPreconditionError("the DPDK EAL is not initialised");
  return internal::RegisterThreadLcore();
}

void UnregisterDpdkIoThread() { internal::ReleaseThreadLcore(); }

namespace internal {

bool EalInitialized() { return !DpdkEalArgs().empty(); }

}  // namespace internal
}  // namespace atp::transport
