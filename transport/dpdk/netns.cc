// transport/dpdk/netns.cc
#include "transport/dpdk/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "atp/errno_status.h"

namespace atp::transport::internal {

absl::StatusOr<std::unique_ptr<NetnsGuard>> NetnsGuard::Enter(const std::string& name) {
  if (name.empty()) return std::unique_ptr<NetnsGuard>(new NetnsGuard(-1));
  if (name.find('/') != std::string::npos || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("network namespace name '", name, "'"));
  }
  const int saved = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (saved < 0) return ErrnoStatus(errno, "open(/proc/thread-self/ns/net)");
  const std::string path = absl::StrCat("/var/run/netns/", name);
  const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    const int error = errno;
    ::close(saved);
    return ErrnoStatus(error, absl::StrCat("open(", path, ") (create it with `ip netns add ", name, "`)"));
  }
  const int ret = ::setns(target, CLONE_NEWNET);
  const int error = errno;
  ::close(target);
  if (ret != 0) {
    ::close(saved);
    return ErrnoStatus(error, absl::StrCat("setns(", path, ") (needs root)"));
  }
  return std::unique_ptr<NetnsGuard>(new NetnsGuard(saved));
}

NetnsGuard::~NetnsGuard() {
  if (saved_fd_ < 0) return;
  // Going back to the namespace the thread came from cannot fail for lack of
  // rights it had a moment ago.
  (void)::setns(saved_fd_, CLONE_NEWNET);
  ::close(saved_fd_);
}

}  // namespace atp::transport::internal
