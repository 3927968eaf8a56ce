// transport/dpdk/netns.h: running a piece of control path inside a network
// namespace. Private to transport/dpdk.
#ifndef ATP_TRANSPORT_DPDK_NETNS_H_
#define ATP_TRANSPORT_DPDK_NETNS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace atp::transport::internal {

// NetnsGuard: while it lives, the calling thread is in network namespace
// `name` (/var/run/netns/<name>, as `ip netns add` creates it); its
// destructor puts the thread back. Only the calling thread moves: the EAL's
// threads stay where they are. Needs CAP_SYS_ADMIN.
class NetnsGuard {
 public:
  // Enter: an empty name enters nothing (a guard that does nothing).
  static absl::StatusOr<std::unique_ptr<NetnsGuard>> Enter(const std::string& name);
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;
  ~NetnsGuard();

 private:
  explicit NetnsGuard(int saved_fd) : saved_fd_(saved_fd) {}
  int saved_fd_;  // the thread's own namespace, or -1
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_NETNS_H_
