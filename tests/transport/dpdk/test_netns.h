// tests/transport/dpdk/test_netns.h: a network namespace with a veth pair in
// it, for DPDK's af_packet and af_xdp drivers, or with a bridge, for net_tap
// interfaces to join. Made and removed with `ip`; needs root.
#ifndef ATP_TESTS_TRANSPORT_DPDK_TEST_NETNS_H_
#define ATP_TESTS_TRANSPORT_DPDK_TEST_NETNS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace atp::transport::testing {

// TestNetns: namespace "atpd<pid>_<n>" holding veth interfaces kVethA and
// kVethB (peers of each other, `queues` RX/TX queues each, up, IPv6 off so
// that no router solicitation lands on a port, no IGMP reports of link-local
// groups, no addresses). The destructor
// detaches any XDP program from both (a crashed DPDK process leaves one) and
// deletes the namespace, which deletes the pair.
class TestNetns {
 public:
  static constexpr const char* kVethA = "atpva";
  static constexpr const char* kVethB = "atpvb";

  // Create: FailedPrecondition when not root or `ip` fails (the message says
  // which command). Removes the namespaces of dead test processes first.
  static absl::StatusOr<std::unique_ptr<TestNetns>> Create(uint32_t queues);
  // CreateWithBridge: the namespace with bridge kBridge (up, no spanning
  // tree, no forwarding delay) instead of the veth pair; Join puts an
  // interface made in the namespace since (a net_tap port's) on it.
  static constexpr const char* kBridge = "atpbr";
  static absl::StatusOr<std::unique_ptr<TestNetns>> CreateWithBridge();
  absl::Status Join(const std::string& interface) const;
  TestNetns(const TestNetns&) = delete;
  TestNetns& operator=(const TestNetns&) = delete;
  ~TestNetns();

  const std::string& name() const { return name_; }

  // Exec: runs `command` inside the namespace (through `ip netns exec`);
  // its exit status.
  int Exec(const std::string& command) const;

  // RemoveStale: deletes namespaces named atpd<pid>_* whose process is gone.
  static void RemoveStale();

 private:
  explicit TestNetns(std::string name) : name_(std::move(name)) {}
  // Make: a new namespace, set up by `commands` (each run inside it).
  static absl::StatusOr<std::unique_ptr<TestNetns>> Make(const std::vector<std::string>& commands);
  static void Remove(const std::string& name);

  std::string name_;
};

}  // namespace atp::transport::testing

#endif  // ATP_TESTS_TRANSPORT_DPDK_TEST_NETNS_H_
