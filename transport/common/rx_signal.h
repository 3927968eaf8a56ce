// transport/common/rx_signal.h: a receive ring's wake-up: an eventfd that
// polls readable while frames may be waiting on the ring, for a runtime's
// back-off to sleep on (atp/transport.h, Queue::wait_fd). Loopback receive
// rings and DPDK's software steering rings use it. Private to transport/.
//
// Senders Raise() after putting frames on the ring; the ring's consumer calls
// LowerIfRaised() when it finds the ring empty and then looks once more. A
// flag keeps the eventfd to one write and one read per idle -> busy
// transition, however many frames arrive in between:
//
//   sender:    push frames; if (!raised.exchange(true)) write(fd, 1)
//   consumer:  ring empty and raised: read(fd); if it read the write,
//              raised.exchange(false); look at the ring again
//
// Both sides change the flag with read-modify-writes, so when the consumer's
// exchange sees a sender's `true`, that sender's frames are visible to its
// second look: no wakeup is lost. A consumer that finds the flag raised but
// the eventfd not yet written (a sender between its exchange and its write)
// leaves the flag up: the write is on its way and is read next time, so the
// eventfd never stays readable with the flag down (which would wake a
// sleeping runtime over and over for nothing).
#ifndef ATP_TRANSPORT_COMMON_RX_SIGNAL_H_
#define ATP_TRANSPORT_COMMON_RX_SIGNAL_H_

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace atp::transport::internal {

class RxSignal {
 public:
  // An eventfd that cannot be made (out of descriptors) leaves fd() at -1:
  // the queue then has no wait_fd, as the interface allows.
  RxSignal() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  RxSignal(const RxSignal&) = delete;
  RxSignal& operator=(const RxSignal&) = delete;
  ~RxSignal() {
    if (fd_ >= 0) ::close(fd_);
  }

  int fd() const { return fd_; }

  // Raise: any sender thread, after its frames are on the ring.
  void Raise() {
    if (fd_ < 0 || raised_.exchange(true, std::memory_order_acq_rel)) return;
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(fd_, &one, sizeof(one));
  }

  // LowerIfRaised: the consumer, on finding the ring empty. True when the
  // flag was up: then frames may have arrived since, and the caller looks at
  // the ring once more.
  bool LowerIfRaised() {
    if (fd_ < 0 || !raised_.load(std::memory_order_relaxed)) return false;
    uint64_t count = 0;
    if (::read(fd_, &count, sizeof(count)) == static_cast<ssize_t>(sizeof(count))) {
      raised_.exchange(false, std::memory_order_acq_rel);
    }
    return true;
  }

 private:
  const int fd_;
  alignas(64) std::atomic<bool> raised_{false};
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_COMMON_RX_SIGNAL_H_
