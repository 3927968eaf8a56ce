// transport/dpdk/rx_wait.cc
#include "transport/dpdk/rx_wait.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "transport/dpdk/dpdk_headers.h"

namespace atp::transport::internal {

absl::StatusOr<std::unique_ptr<RxWait>> RxWait::Create(uint16_t port_id, uint16_t queue,
                                                       int steering_fd) {
  std::unique_ptr<RxWait> wait(new RxWait(port_id, queue));
  const int interrupt_fd = rte_eth_dev_rx_intr_ctl_q_get_fd(port_id, queue);
  if (interrupt_fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("port ", port_id, " queue ", queue, " has no Rx interrupt fd"));
  }
  // Whether the driver arms its interrupts (a try now, undone at once).
  const int enabled = rte_eth_dev_rx_intr_enable(port_id, queue);
  if (enabled == 0) {
    (void)rte_eth_dev_rx_intr_disable(port_id, queue);
  } else if (enabled != -ENOTSUP) {
    return absl::UnavailableError(
        absl::StrCat("port ", port_id, " queue ", queue,
                     ": rte_eth_dev_rx_intr_enable: ", rte_strerror(-enabled)));
  }
  wait->level_ = enabled == -ENOTSUP;
  int watched = interrupt_fd;  // the driver's: not ours to close
  if (!wait->level_) {
    wait->interrupt_set_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (wait->interrupt_set_fd_ < 0) {
      return absl::ResourceExhaustedError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
    }
    if (int ret = rte_eth_dev_rx_intr_ctl_q(port_id, queue, wait->interrupt_set_fd_,
                                            RTE_INTR_EVENT_ADD, nullptr);
        ret != 0) {
      return absl::UnavailableError(absl::StrCat(
          "port ", port_id, " queue ", queue, ": rte_eth_dev_rx_intr_ctl_q: ", rte_strerror(-ret)));
    }
    wait->registered_ = true;
    watched = wait->interrupt_set_fd_;
  }
  wait->wait_fd_ = watched;
  if (steering_fd >= 0) {
    wait->outer_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (wait->outer_fd_ < 0) {
      return absl::ResourceExhaustedError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
    }
    for (int fd : {watched, steering_fd}) {
      epoll_event event{};
      event.events = EPOLLIN;  // level-triggered: readable while either is
      event.data.fd = fd;
      if (::epoll_ctl(wait->outer_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
        return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
      }
    }
    wait->wait_fd_ = wait->outer_fd_;
  }
  return wait;
}

RxWait::~RxWait() {
  if (armed_) Disarm();
  if (registered_) {
    (void)rte_eth_dev_rx_intr_ctl_q(port_id_, queue_, interrupt_set_fd_, RTE_INTR_EVENT_DEL,
                                    nullptr);
  }
  if (outer_fd_ >= 0) ::close(outer_fd_);
  if (interrupt_set_fd_ >= 0) ::close(interrupt_set_fd_);
}

int RxWait::ConsumeEvents() {
  rte_epoll_event events[1];
  int total = 0;
  // One registered fd: one event at most per call, but an edge may come
  // while the first is handled.
  for (int n; (n = rte_epoll_wait(interrupt_set_fd_, events, 1, 0)) > 0;) total += n;
  return total;
}

bool RxWait::ArmAndConsume() {
  const bool consumed = ConsumeEvents() > 0;
  if (armed_) return consumed;
  (void)rte_eth_dev_rx_intr_enable(port_id_, queue_);
  armed_ = true;
  return true;
}

void RxWait::Disarm() {
  (void)rte_eth_dev_rx_intr_disable(port_id_, queue_);
  armed_ = false;
}

}  // namespace atp::transport::internal
