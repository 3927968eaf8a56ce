// tests/transport/dpdk/test_eal.h: the one EAL configuration of the DPDK test
// binaries, and names unique to a test run.
#ifndef ATP_TESTS_TRANSPORT_DPDK_TEST_EAL_H_
#define ATP_TESTS_TRANSPORT_DPDK_TEST_EAL_H_

#include <string>

#include "absl/status/status.h"
#include "atp/transport/dpdk.h"

namespace atp::transport::testing {

// TestEalOptions: no hugepages, 256 MiB, no PCI, lcore 0 floating over every
// CPU (the EAL pins nothing), quiet logs.
DpdkEalOptions TestEalOptions();

// EnsureTestEal: InitDpdkEal(TestEalOptions()); the same status every call.
absl::Status EnsureTestEal();

// UniqueTestName: "<prefix><pid>_<n>", unique across processes and calls
// (memif socket names, ring link names, namespaces), at most 15 characters
// for prefixes of up to 4.
std::string UniqueTestName(const std::string& prefix);

}  // namespace atp::transport::testing

#endif  // ATP_TESTS_TRANSPORT_DPDK_TEST_EAL_H_
