// transport/dpdk/mpsc_ring.h: a bounded lock-free ring with many producers
// and one consumer, for software steering. Pure C++ (std::atomic), so that
// ThreadSanitizer can check it: DPDK's rte_ring orders its accesses with
// barriers TSan does not model. Private to transport/dpdk.
//
// Each cell carries a sequence number (D. Vyukov's bounded queue): cell i is
// free for the producer that reserved position p when its sequence is p, and
// holds p's value for the consumer when it is p + 1. A producer reserves a run
// of positions with one compare-and-swap on the enqueue position, fills the
// cells, and publishes each (release); the consumer reads a cell once its
// sequence says it is full (acquire), then frees it for position p + size.
// Values of one producer come out in the order it pushed them.
#ifndef ATP_TRANSPORT_DPDK_MPSC_RING_H_
#define ATP_TRANSPORT_DPDK_MPSC_RING_H_

#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace atp::transport::internal {

template <typename T>
class MpscRing {
 public:
  // MpscRing: holds exactly `capacity` values (a power of two).
  explicit MpscRing(size_t capacity)
      : mask_(capacity - 1), cells_(std::make_unique<Cell[]>(capacity)) {
    assert(std::has_single_bit(capacity));
    for (size_t i = 0; i < capacity; ++i) cells_[i].sequence.store(i, std::memory_order_relaxed);
  }
  MpscRing(const MpscRing&) = delete;
  MpscRing& operator=(const MpscRing&) = delete;

  // Push: appends values[0, n) in order, as many as there is room for, as one
  // run no other producer interleaves with; returns how many. Any thread.
  size_t Push(const T* values, size_t n) {
    if (n == 0) return 0;
    uint64_t position = enqueue_.load(std::memory_order_relaxed);
    size_t run = 0;
    for (;;) {
      // The consumer frees cells in order, so if the last cell of the run is
      // free, all are. Shrink the run to what is free.
      run = IsFree(position + n - 1) ? n : FreeRun(position, n);
      if (run == 0) {
        // Full, unless another producer moved on meanwhile.
        const uint64_t now = enqueue_.load(std::memory_order_relaxed);
        if (now == position) return 0;
        position = now;
        continue;
      }
      if (enqueue_.compare_exchange_weak(position, position + run, std::memory_order_relaxed)) break;
    }
    for (size_t i = 0; i < run; ++i) {
      Cell& cell = cells_[(position + i) & mask_];
      cell.value = values[i];
      cell.sequence.store(position + i + 1, std::memory_order_release);
    }
    return run;
  }

  // Pop: takes up to `n` values, oldest first, into `out`; returns how many.
  // The consumer's thread only.
  size_t Pop(T* out, size_t n) {
    size_t got = 0;
    for (; got < n; ++got) {
      Cell& cell = cells_[dequeue_ & mask_];
      if (cell.sequence.load(std::memory_order_acquire) != dequeue_ + 1) break;  // not filled yet
      out[got] = cell.value;
      cell.sequence.store(dequeue_ + mask_ + 1, std::memory_order_release);
      ++dequeue_;
    }
    return got;
  }

  size_t capacity() const { return mask_ + 1; }

 private:
  struct alignas(16) Cell {
    std::atomic<uint64_t> sequence{0};
    T value{};
  };

  bool IsFree(uint64_t position) const {
    return cells_[position & mask_].sequence.load(std::memory_order_acquire) == position;
  }
  // FreeRun: how many consecutive cells from `position` on are free, up to `run`.
  size_t FreeRun(uint64_t position, size_t run) const {
    size_t free = 0;
    while (free < run && IsFree(position + free)) ++free;
    return free;
  }

  const uint64_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<uint64_t> enqueue_{0};
  alignas(64) uint64_t dequeue_ = 0;  // the consumer's own
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_MPSC_RING_H_
