// transport/dpdk/rx_wait.h: a DPDK queue's wait_fd (atp/transport.h,
// Queue::wait_fd): the port's Rx interrupt for the queue's hardware RX queue
// and, with software steering, the signal of the queue's steering ring.
// Private to transport/dpdk.
//
// Drivers give Rx interrupts of two kinds, told apart at Create by whether
// rte_eth_dev_rx_intr_enable is supported:
//
// - Level (net_tap): no arming; the interrupt fd is the queue's own file
//   descriptor, readable while frames wait. It is polled as it is. (net_tap
//   reads a queue only after a signal the kernel sends for it has run, so
//   the fd may be readable while rte_eth_rx_burst still returns nothing, for
//   a few microseconds: the runtime polls again, which a level fd allows and
//   an edge consumed meanwhile would not.)
// - Armed (mlx5, the VFIO/UIO NICs): a driver raises one only while the
//   queue's interrupt is enabled, and the event must be consumed
//   (rte_epoll_wait reads the counter of the VFIO/UIO eventfds; mlx5's
//   rte_eth_dev_rx_intr_disable acknowledges its completion event). The queue
//   arms when it finds its hardware queue empty and disarms when frames come
//   again: one enable and one disable per idle -> busy transition, nothing
//   while it is busy:
//
//     RxBurst finds nothing:  consume stale events; enable if not armed; look again
//     RxBurst finds frames:   if armed, disable
//
//   Looking again after arming closes the race with a frame that arrived
//   between the empty look and the enable. Stale events (a frame that came
//   while the queue was busy, read since) are consumed on every empty look
//   while armed, so a sleeping runtime is not woken for frames already
//   taken; an event consumed there may be a new frame's, so the queue looks
//   again after consuming one. The interrupt goes into an epoll set of this
//   class's own (rte_eth_dev_rx_intr_ctl_q registers it edge-triggered, with
//   the callback that consumes it).
//
// wait_fd is the interrupt's fd (level) or set (armed), or, when the queue
// also has a steering ring signal, an outer epoll set holding both.
#ifndef ATP_TRANSPORT_DPDK_RX_WAIT_H_
#define ATP_TRANSPORT_DPDK_RX_WAIT_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace atp::transport::internal {

class RxWait {
 public:
  // Create: for hardware queue `queue` of started port `port_id`, whose
  // configuration asked for Rx interrupts (intr_conf.rxq). `steering_fd`: the
  // queue's steering ring signal (rx_signal.h), or -1. Fails (Unavailable)
  // when the driver gives the queue no interrupt.
  static absl::StatusOr<std::unique_ptr<RxWait>> Create(uint16_t port_id, uint16_t queue,
                                                        int steering_fd);
  RxWait(const RxWait&) = delete;
  RxWait& operator=(const RxWait&) = delete;
  // ~RxWait: takes the interrupt out of the epoll set; before the port closes.
  ~RxWait();

  int fd() const { return wait_fd_; }

  // OnEmpty: the hardware queue gave nothing. Armed interrupts: consumes
  // stale events and arms if not armed. True: look at the queue once more.
  bool OnEmpty() { return level_ ? false : ArmAndConsume(); }
  // OnFrames: the hardware queue gave frames: disarms if armed.
  void OnFrames() {
    if (armed_) Disarm();
  }

 private:
  RxWait(uint16_t port_id, uint16_t queue) : port_id_(port_id), queue_(queue) {}
  bool ArmAndConsume();
  // ConsumeEvents: the interrupt set's events, without waiting; how many.
  int ConsumeEvents();
  void Disarm();

  const uint16_t port_id_;
  const uint16_t queue_;
  bool level_ = false;         // the interrupt needs no arming (see above)
  int interrupt_set_fd_ = -1;  // armed: epoll set of the interrupt (DPDK's rte_epoll)
  int outer_fd_ = -1;          // epoll set of the interrupt (or its set) and the steering signal
  int wait_fd_ = -1;
  bool registered_ = false;  // the interrupt is in interrupt_set_fd_
  bool armed_ = false;
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_RX_WAIT_H_
