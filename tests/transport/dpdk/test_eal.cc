// tests/transport/dpdk/test_eal.cc
#include "tests/transport/dpdk/test_eal.h"

#include <unistd.h>

#include <atomic>

#include "absl/strings/str_cat.h"

namespace atp::transport::testing {

DpdkEalOptions TestEalOptions() {
  DpdkEalOptions options;
  options.program_name = "atp_dpdk_test";
  options.memory = DpdkMemory::kNoHugePages;
  options.memory_mb = 256;
  options.log_level = "error";
  // memif logs at ERR that it cannot register a multi-process handler, which
  // --no-shconf disables on purpose (no secondary processes here).
  options.extra_args = {"--log-level=pmd.net.memif:critical"};
  return options;
}

absl::Status EnsureTestEal() { return InitDpdkEal(TestEalOptions()); }

std::string UniqueTestName(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return absl::StrCat(prefix, ::getpid(), "_", counter.fetch_add(1));
}

}  // namespace atp::transport::testing
