// transport/loopback/frame_slot_ring.h: a bounded ring of 306-byte frame
// slots with any number of producer threads and one consumer thread; the
// receive ring of a loopback queue.
//
// Each slot carries a turn counter (the classic bounded-queue scheme with a
// sequence number per cell): a producer claims position p by advancing the
// tail when slot p % capacity shows turn p, copies the frame in and publishes
// turn p + 1; the consumer takes position p when it sees p + 1 and frees the
// slot for the next lap with turn p + capacity. No locks; a full ring refuses.
#ifndef ATP_TRANSPORT_LOOPBACK_FRAME_SLOT_RING_H_
#define ATP_TRANSPORT_LOOPBACK_FRAME_SLOT_RING_H_

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

#include "atp/transport.h"
#include "transport/common/copy.h"

namespace atp::transport::internal {

class FrameSlotRing {
 public:
  // `capacity` must be a power of two.
  explicit FrameSlotRing(uint32_t capacity)
      : slots_(new Slot[capacity]), mask_(capacity - 1) {
    assert(capacity >= 2 && (capacity & (capacity - 1)) == 0);
    for (uint64_t i = 0; i < capacity; ++i) slots_[i].turn.store(i, std::memory_order_relaxed);
  }

  FrameSlotRing(const FrameSlotRing&) = delete;
  FrameSlotRing& operator=(const FrameSlotRing&) = delete;

  // TryPush: any thread. Copies `frame` (kFrameBytes) into the ring; false
  // when the ring is full.
  bool TryPush(const uint8_t* frame) {
    uint64_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& slot = slots_[pos & mask_];
      const uint64_t turn = slot.turn.load(std::memory_order_acquire);
      const int64_t lag = static_cast<int64_t>(turn - pos);
      if (lag == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          CopyBytes<kFrameBytes>(slot.bytes, frame);
          slot.turn.store(pos + 1, std::memory_order_release);
          return true;
        }
        // pos was reloaded by the failed exchange.
      } else if (lag < 0) {
        return false;  // the slot still holds the frame of the previous lap
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  // TryPushExclusive: TryPush for a producer that is the ring's only one for
  // as long as it pushes (every producer of the ring holds the same lock, as
  // the wire's processor does): no compare-and-swap on the tail.
  bool TryPushExclusive(const uint8_t* frame) {
    const uint64_t pos = tail_.load(std::memory_order_relaxed);
    Slot& slot = slots_[pos & mask_];
    if (slot.turn.load(std::memory_order_acquire) != pos) return false;  // full
    tail_.store(pos + 1, std::memory_order_relaxed);
    CopyBytes<kFrameBytes>(slot.bytes, frame);
    slot.turn.store(pos + 1, std::memory_order_release);
    return true;
  }

  // Front: consumer thread only. The oldest frame, or null when empty. Valid
  // until Pop.
  const uint8_t* Front() const {
    const Slot& slot = slots_[head_ & mask_];
    if (slot.turn.load(std::memory_order_acquire) != head_ + 1) return nullptr;
    return slot.bytes;
  }

  // FrontAt: consumer thread only. The frame `k` places behind the oldest
  // (FrontAt(0) is Front()), or null when fewer than k + 1 frames wait;
  // the consumer's to change in place until it pops it. For a consumer that
  // lends frames out in place and pops them when they come back (a zero-copy
  // receive).
  uint8_t* FrontAt(uint64_t k) {
    const uint64_t position = head_ + k;
    Slot& slot = slots_[position & mask_];
    if (slot.turn.load(std::memory_order_acquire) != position + 1) return nullptr;
    return slot.bytes;
  }

  // head: consumer thread only. The position of the oldest frame.
  uint64_t head() const { return head_; }

  // Pop: consumer thread only, after a non-null Front.
  void Pop() {
    PopQuietly();
    PublishHead();
  }
  // PopQuietly / PublishHead: Pop in two halves, for a consumer that pops a
  // burst and tells Backlog once: its head's line then moves to the cores
  // that read Backlog once per burst, not once per frame.
  void PopQuietly() {
    Slot& slot = slots_[head_ & mask_];
    slot.turn.store(head_ + mask_ + 1, std::memory_order_release);
    ++head_;
  }
  void PublishHead() { published_head_.store(head_, std::memory_order_relaxed); }

  // Backlog: frames claimed and not yet popped; any thread, a snapshot.
  size_t Backlog() const {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    const uint64_t head = published_head_.load(std::memory_order_relaxed);
    return tail > head ? static_cast<size_t>(tail - head) : 0;
  }

  size_t capacity() const { return mask_ + 1; }

 private:
  struct alignas(kCacheLineBytes) Slot {
    std::atomic<uint64_t> turn{0};
    uint8_t bytes[kFrameBytes];
  };
  static_assert(sizeof(Slot) == 5 * kCacheLineBytes, "turn + one frame in five lines");

  std::unique_ptr<Slot[]> slots_;
  const uint64_t mask_;
  alignas(kCacheLineBytes) std::atomic<uint64_t> tail_{0};
  // Consumer side, on its own line: head_ is private, published_head_ is what
  // Backlog reads from other threads.
  alignas(kCacheLineBytes) uint64_t head_ = 0;
  std::atomic<uint64_t> published_head_{0};
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_LOOPBACK_FRAME_SLOT_RING_H_
