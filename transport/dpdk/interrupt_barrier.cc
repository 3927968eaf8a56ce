// transport/dpdk/interrupt_barrier.cc
//
// rte_intr_instance_alloc and the rte_intr_*_set accessors are "experimental"
// in DPDK 22.11 (the only way to build an interrupt handle since 21.11).
#define ALLOW_EXPERIMENTAL_API 1

#include "transport/dpdk/interrupt_barrier.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <thread>

#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/status.h"
#include "transport/dpdk/tsan.h"

namespace atp::transport::internal {
namespace {

struct Wakeup {
  int fd = -1;
  std::atomic<int> runs{0};
};

void OnWakeup(void* arg) {
  TakeOver(arg);
  auto* wakeup = static_cast<Wakeup*>(arg);
  uint64_t value = 0;
  (void)!::read(wakeup->fd, &value, sizeof(value));
  wakeup->runs.fetch_add(1, std::memory_order_release);
}

}  // namespace

absl::Status InterruptThreadBarrier(TimeDelta timeout) {
  Wakeup wakeup;
  wakeup.fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wakeup.fd < 0) return absl::InternalError("eventfd failed");
  rte_intr_handle* handle = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  if (handle == nullptr) {
    ::close(wakeup.fd);
    return absl::ResourceExhaustedError("rte_intr_instance_alloc failed");
  }
  rte_intr_fd_set(handle, wakeup.fd);
  rte_intr_type_set(handle, RTE_INTR_HANDLE_EXT);
  absl::Status status = absl::OkStatus();
  HandOver(&wakeup);  // to the interrupt thread, through the EAL's own lock
  if (int ret = rte_intr_callback_register(handle, OnWakeup, &wakeup); ret != 0) {
    status = RteErrorStatus(ret, "rte_intr_callback_register");
  } else {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::nanoseconds(timeout.ToNanoseconds());
    for (int round = 1; round <= 2 && status.ok(); ++round) {
      const uint64_t one = 1;
      (void)!::write(wakeup.fd, &one, sizeof(one));
      while (wakeup.runs.load(std::memory_order_acquire) < round) {
        if (std::chrono::steady_clock::now() > deadline) {
          status = absl::DeadlineExceededError("the EAL interrupt thread did not respond");
          break;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
    // -EAGAIN: our callback is running right now; it is about to return.
    while (rte_intr_callback_unregister(handle, OnWakeup, &wakeup) == -EAGAIN) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  rte_intr_instance_free(handle);
  ::close(wakeup.fd);
  return status;
}

}  // namespace atp::transport::internal
