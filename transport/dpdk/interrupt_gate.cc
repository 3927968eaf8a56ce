// transport/dpdk/interrupt_gate.cc
//
// rte_intr_instance_alloc and the rte_intr_*_set accessors are "experimental"
// in DPDK 22.11 (the only way to build an interrupt handle since 21.11).
#define ALLOW_EXPERIMENTAL_API 1

#include "transport/dpdk/interrupt_gate.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/status.h"
#include "transport/dpdk/tsan.h"

namespace atp::transport::internal {
namespace {

// kPeriod: how long the interrupt thread stays parked when every gated link
// is up (memif events wait at most this long); kConnectingPeriod while one is
// down (a handshake is several messages, each handled after a park).
constexpr TimeDelta kPeriod = TimeDelta::FromMilliseconds(10);
constexpr TimeDelta kConnectingPeriod = TimeDelta::FromMilliseconds(2);

std::mutex g_gate_mu;
std::weak_ptr<InterruptGate> g_gate;  // under g_gate_mu

void Rearm(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

}  // namespace

absl::StatusOr<std::shared_ptr<InterruptGate>> InterruptGate::Acquire() {
  std::lock_guard<std::mutex> lock(g_gate_mu);
  if (std::shared_ptr<InterruptGate> gate = g_gate.lock()) return gate;
  std::shared_ptr<InterruptGate> gate(new InterruptGate());
  ATP_RETURN_IF_ERROR(gate->Start());
  g_gate = gate;
  return gate;
}

absl::Status InterruptGate::Start() {
  fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd_ < 0) return absl::InternalError("eventfd failed");
  handle_ = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  if (handle_ == nullptr) return absl::ResourceExhaustedError("rte_intr_instance_alloc failed");
  rte_intr_fd_set(handle_, fd_);
  rte_intr_type_set(handle_, RTE_INTR_HANDLE_EXT);
  HandOver(this);  // to the interrupt thread, through the EAL's own lock
  if (int ret = rte_intr_callback_register(handle_, OnWakeup, this); ret != 0) {
    return RteErrorStatus(ret, "rte_intr_callback_register (memif interrupt gate)");
  }
  registered_ = true;
  Rearm(fd_);  // the first round opens the gate
  return absl::OkStatus();
}

InterruptGate::~InterruptGate() {
  if (registered_) {
    {
      std::lock_guard<std::mutex> lock(park_mu_);
      stopping_ = true;
    }
    park_cv_.notify_all();
    // -EAGAIN: the callback is running (parked or closing); it returns soon
    // without re-arming.
    while (rte_intr_callback_unregister(handle_, OnWakeup, this) == -EAGAIN) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    TakeOver(this);  // the last callback has returned (see OnWakeup)
  }
  if (handle_ != nullptr) rte_intr_instance_free(handle_);
  if (fd_ >= 0) ::close(fd_);
}

void InterruptGate::Register(GateSlot* slot) {
  std::lock_guard<std::mutex> lock(slots_mu_);
  slots_.push_back(slot);
}

void InterruptGate::Unregister(GateSlot* slot) {
  std::lock_guard<std::mutex> lock(slots_mu_);
  slots_.erase(std::remove(slots_.begin(), slots_.end(), slot), slots_.end());
}

void InterruptGate::Enter(GateSlot& slot) {
  while (!TryEnter(slot)) {
    Hurry();
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void InterruptGate::Hurry() {
  {
    std::lock_guard<std::mutex> lock(park_mu_);
    hurry_ = true;
  }
  park_cv_.notify_all();
}

void InterruptGate::OnWakeup(void* arg) {
  TakeOver(arg);
  static_cast<InterruptGate*>(arg)->Park();
  // Back to the EAL, which lets a waiting unregister (the destructor) go on
  // under its own lock, one TSan cannot see.
  HandOver(arg);
}

TimeDelta InterruptGate::Period() {
  std::lock_guard<std::mutex> lock(slots_mu_);
  for (const GateSlot* slot : slots_) {
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(slot->port_id, &link) == 0 && link.link_status != RTE_ETH_LINK_UP) {
      return kConnectingPeriod;
    }
  }
  return kPeriod;
}

void InterruptGate::WaitForSlots() {
  std::lock_guard<std::mutex> lock(slots_mu_);
  for (const GateSlot* slot : slots_) {
    // A burst is a few microseconds; a thread preempted inside one takes longer.
    for (int spins = 0; slot->inside.load(std::memory_order_seq_cst) != 0; ++spins) {
      if (spins < 256) {
        rte_pause();
      } else {
        std::this_thread::yield();
      }
    }
  }
}

void InterruptGate::Park() {
  uint64_t value = 0;
  (void)!::read(fd_, &value, sizeof(value));
  const TimeDelta period = Period();
  {
    std::unique_lock<std::mutex> lock(park_mu_);
    if (stopping_) return;  // not re-armed: the gate is going away
    hurry_ = false;
    closed_.store(0, std::memory_order_seq_cst);
    park_cv_.wait_for(lock, std::chrono::nanoseconds(period.ToNanoseconds()),
                      [this] { return stopping_ || hurry_; });
    hurry_ = false;
    // Closed before the interrupt thread does anything else, even when
    // stopping: a device may still be closing its port.
    closed_.store(1, std::memory_order_seq_cst);
    if (stopping_) {
      closed_.store(0, std::memory_order_seq_cst);  // nothing to protect any more
      return;
    }
  }
  WaitForSlots();
  rounds_.fetch_add(1, std::memory_order_relaxed);
  // Back here as soon as the interrupt thread has handled what is pending.
  Rearm(fd_);
}

}  // namespace atp::transport::internal
