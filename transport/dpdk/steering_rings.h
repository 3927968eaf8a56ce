// transport/dpdk/steering_rings.h: software steering's hand-over rings, one
// per queue. Private to transport/dpdk.
//
// Thread ownership: ring q has many producers (every queue's thread, each
// posting what its own hardware RX queue received for q) and one consumer
// (queue q's thread): an MpscRing. The drop counters are atomics because
// producers on other threads bump them while queue q's thread reads its stats.
#ifndef ATP_TRANSPORT_DPDK_STEERING_RINGS_H_
#define ATP_TRANSPORT_DPDK_STEERING_RINGS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/common/rx_signal.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/mbuf_pool.h"
#include "transport/dpdk/mpsc_ring.h"

namespace atp::transport::internal {

class SteeringRings {
 public:
  // Create: `num_queues` rings of exactly `ring_frames` mbufs each (a power
  // of two).
  static absl::StatusOr<std::unique_ptr<SteeringRings>> Create(uint32_t num_queues,
                                                               uint32_t ring_frames);
  SteeringRings(const SteeringRings&) = delete;
  SteeringRings& operator=(const SteeringRings&) = delete;
  // ~SteeringRings: frees the mbufs still waiting, then the rings. No queue
  // may be running.
  ~SteeringRings();

  // Post: hands mbufs[0, n) to queue q (any thread); those that do not fit
  // are freed and counted as q's drops. Raises q's signal, if it has one.
  void Post(uint32_t q, rte_mbuf* const* mbufs, size_t n) {
    Slot& slot = *slots_[q];
    const size_t done = slot.ring.Push(mbufs, n);
    if (done < n) {
      FreeMbufs(const_cast<rte_mbuf**>(mbufs + done), n - done);
      slot.drops.fetch_add(n - done, std::memory_order_relaxed);
    }
    if (done > 0 && slot.signal != nullptr) slot.signal->Raise();
  }

  // Take: up to `n` mbufs waiting for queue q, oldest first. Queue q's thread only.
  size_t Take(uint32_t q, rte_mbuf** out, size_t n) { return slots_[q]->ring.Pop(out, n); }

  // AddSignal: gives ring q a wake-up (rx_signal.h) for a queue that sleeps
  // on its wait_fd; returns its eventfd (-1: none could be made). Control
  // path, before the queues run.
  int AddSignal(uint32_t q) {
    slots_[q]->signal = std::make_unique<RxSignal>();
    return slots_[q]->signal->fd();
  }
  // LowerIfRaised: queue q's thread, on finding ring q empty: true when it
  // may have been posted to since (look again). rx_signal.h.
  bool LowerIfRaised(uint32_t q) {
    RxSignal* signal = slots_[q]->signal.get();
    return signal != nullptr && signal->LowerIfRaised();
  }

  uint64_t drops(uint32_t q) const { return slots_[q]->drops.load(std::memory_order_relaxed); }

 private:
  struct Slot {
    explicit Slot(size_t frames) : ring(frames) {}
    MpscRing<rte_mbuf*> ring;
    alignas(64) std::atomic<uint64_t> drops{0};
    std::unique_ptr<RxSignal> signal;  // with Rx interrupts only
  };
  SteeringRings() = default;

  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_STEERING_RINGS_H_
