// tests/transport/dpdk/dpdk_harness.h: conformance harnesses of the DPDK
// backend, one per medium. Each test binary runs one of them (one EAL
// configuration per process), under the backend name "dpdk".
#ifndef ATP_TESTS_TRANSPORT_DPDK_DPDK_HARNESS_H_
#define ATP_TESTS_TRANSPORT_DPDK_DPDK_HARNESS_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "atp/transport/dpdk.h"
#include "tests/transport/backend_harness.h"

namespace atp::transport::testing {

enum class DpdkMedium : uint8_t {
  kRing,      // DpdkRingLink: two net_ring ports in this process
  kMemif,     // net_memif server and client in this process, abstract socket
  kAfPacket,  // net_af_packet on a veth pair in a test namespace (root)
  kAfXdp,     // net_af_xdp on a veth pair in a test namespace (root)
  kTap,       // two net_tap ports on a kernel bridge in a test namespace (root):
              // the one medium here with Rx interrupts (wait_fd)
};

std::string_view DpdkMediumName(DpdkMedium medium);

// MakeDpdkHarness: a harness whose pairs are devices A and B over `medium`,
// each knowing the other as a peer.
std::unique_ptr<BackendHarness> MakeDpdkHarness(DpdkMedium medium);

// DpdkPairOptions: the DpdkOptions of side A or B of a harness pair (10.0.0.1
// and 10.0.0.2, each the other's peer), before
// the medium-specific fields (port, source, vdev_args, netns) are set.
DpdkOptions DpdkPairOptions(const DeviceOptions& device, DpdkRingLink::Side side);

// RingPair: devices A and B (DpdkPairOptions) over a DpdkRingLink of their
// own, for tests that drive the two ends themselves. Members are destroyed
// in reverse order: the devices before the link they use.
struct RingPair {
  std::unique_ptr<DpdkRingLink> link;
  std::unique_ptr<DpdkDevice> a;
  std::unique_ptr<DpdkDevice> b;
};

// OpenRingPair: a link named after `name_prefix` (UniqueTestName) with
// `device`'s queues and ring size, and a device on each side. The test EAL
// must be up (EnsureTestEal).
absl::StatusOr<RingPair> OpenRingPair(std::string_view name_prefix, const DeviceOptions& device = {});

}  // namespace atp::transport::testing

#endif  // ATP_TESTS_TRANSPORT_DPDK_DPDK_HARNESS_H_
