// tests/transport/netns_pair.h: two network namespaces joined by a veth pair,
// for running the kernel UDP transport across a real L2/L3 path (needs root).
//
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<NetnsPair> pair, NetnsPair::Create());
//   options.bind = {pair->ip_a(), 0};
//   auto device = OpenKernelUdpDeviceIn(pair->a(), options);   // sockets live in namespace a
//
// Made with `ip`; each namespace has IPv6 off (no router solicitation or
// other stray traffic lands on a socket), lo up, and one end of the pair with
// an address in 192.168.251.0/24. The destructor deletes both namespaces,
// which deletes the pair: a test that fails (an ASSERT returning early) still
// leaves nothing behind; a crashed test process's namespaces are removed by
// the next Create (they carry its pid).
#ifndef ATP_TESTS_TRANSPORT_NETNS_PAIR_H_
#define ATP_TESTS_TRANSPORT_NETNS_PAIR_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/transport/kernel_udp.h"
#include "atp/wire.h"

namespace atp::transport::testing {

class NetnsPair {
 public:
  static constexpr const char* kVethA = "atpk0";  // in namespace a()
  static constexpr const char* kVethB = "atpk1";  // in namespace b()

  // Create: FailedPrecondition, saying why, when not root or an `ip` command
  // fails (the message names it). Names are "atpk<pid>_<n>a" / "...b":
  // unique per test process and per pair.
  static absl::StatusOr<std::unique_ptr<NetnsPair>> Create();
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;
  ~NetnsPair();

  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }
  // ip_a / ip_b: the veth addresses, 192.168.251.1 in a, .2 in b.
  wire::Ipv4Address ip_a() const;
  wire::Ipv4Address ip_b() const;

  // RemoveStale: deletes namespaces atpk<pid>_* whose process is gone.
  static void RemoveStale();

 private:
  explicit NetnsPair(std::string stem) : a_(stem + "a"), b_(stem + "b") {}

  std::string a_;
  std::string b_;
};

// RunInNetns: runs `fn` on a thread of its own that has entered network
// namespace `name` (setns), and waits for it. Sockets made in `fn` stay in
// that namespace whichever thread uses them afterwards. Fails when the
// namespace cannot be entered (the message says why).
absl::Status RunInNetns(const std::string& name, const std::function<void()>& fn);

// OpenKernelUdpDeviceIn: OpenKernelUdpDevice with its sockets in namespace `name`.
absl::StatusOr<std::unique_ptr<KernelUdpDevice>> OpenKernelUdpDeviceIn(
    const std::string& name, const KernelUdpOptions& options);

}  // namespace atp::transport::testing

#endif  // ATP_TESTS_TRANSPORT_NETNS_PAIR_H_
