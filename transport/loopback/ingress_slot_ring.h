// transport/loopback/ingress_slot_ring.h: a sending queue's frames on their
// way to a stepped processor, written in place: the ring of frame slots is
// also the queue's transmit pool, so a frame the sender writes into a buffer
// it allocated is handed over without a copy.
//
// Single producer (the sending queue's thread), single consumer
// (StepProcessor, one thread at a time). Positions count slots from the
// first:
//
//   processed <= published <= reserved <= processed + capacity
//
// processed and published only grow; reserved steps back over slots freed
// unsent at its end (an allocated burst not all used), which are reserved
// again next time.
// AllocBurst reserves the next free slots, in order. A reserved slot is then
// either sent (MarkSent: the processor will see its frame) or freed without
// being sent (a hole it skips). Publish hands the processor every slot up to
// the first one still reserved, so frames reach it in the order their slots
// were allocated, and a slot the sender keeps reserved holds back the ones
// after it; every publication raises the processor's signal. The consumer
// takes a run of published slots in order (Peek), works on the frames in
// place, and pops the whole run when done with all (PopPeeked): the slots
// are free for the sender again.
//
// Memory order: the producer writes a slot's frame and state, then stores
// published_ (release); the consumer loads published_ (acquire) before it
// reads any slot below it, so it sees those writes. The consumer stores
// processed_ (release) only once it no longer reads the slots below it; the
// producer loads processed_ (acquire, free_count) before it reserves and
// writes a slot again, so its writes come after the consumer's reads.
#ifndef ATP_TRANSPORT_LOOPBACK_INGRESS_SLOT_RING_H_
#define ATP_TRANSPORT_LOOPBACK_INGRESS_SLOT_RING_H_

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>

#include "atp/transport/frame_pool.h"
#include "transport/common/rx_signal.h"

namespace atp::transport::internal {

class IngressSlotRing final : public FramePool {
 public:
  // `capacity`: a power of two. `processor` (not owned, outlives the ring):
  // raised whenever slots are published.
  IngressSlotRing(uint32_t capacity, RxSignal* processor);
  ~IngressSlotRing() override;

  IngressSlotRing(const IngressSlotRing&) = delete;
  IngressSlotRing& operator=(const IngressSlotRing&) = delete;

  // FramePool, producer side. FreeBurst of a reserved slot leaves a hole
  // (and publishes what it no longer holds back).
  size_t AllocBurst(std::span<FrameRef> frames) override;
  void FreeBurst(std::span<const FrameRef> frames) override;
  size_t free_count() const override {
    return capacity() - static_cast<size_t>(reserved_ - processed_.load(std::memory_order_acquire));
  }
  size_t capacity() const override { return mask_ + 1; }
  size_t frame_capacity() const override { return wire::kFrameBytes; }
  size_t headroom() const override { return kHeadroom; }

  // Producer side.
  // MarkSent: the frame in this ring's reserved slot goes to the processor.
  void MarkSent(const FrameRef& frame) {
    assert(frame.pool == this && frame.handle >= published_local_ && frame.handle < reserved_);
    SlotAt(frame.handle).state = kSent;
  }
  // Publish: every slot before the first still reserved goes to the
  // processor, which is raised if any did.
  void Publish();
  // Unprocessed: published slots the processor has not popped yet.
  size_t Unprocessed() const {
    return static_cast<size_t>(published_local_ - processed_.load(std::memory_order_acquire));
  }

  // Consumer side.
  // Peek: up to frames.size() of the oldest published frames not yet popped,
  // in order (holes skipped; those before the first frame are popped on the
  // way), written to `frames`; returns how many. They stay in their slots,
  // not reused by the sender, until PopPeeked; a second Peek before it
  // returns the same frames.
  size_t Peek(std::span<uint8_t*> frames);
  // PopPeeked: every slot up to the last frame the latest Peek returned (and
  // the holes among them) goes back to the sender; once nothing reads those
  // frames any more. Nothing to do after a Peek that returned 0.
  void PopPeeked() { processed_.store(peeked_end_, std::memory_order_release); }

 private:
  // A slot: its state word, then the frame at kHeadroom, so that the payload
  // (frame offset 58) starts on a cache line like a HeapFramePool buffer's.
  static constexpr uint32_t kHeadroom = kDefaultHeadroom;
  static constexpr size_t kStride =
      (kHeadroom + wire::kFrameBytes + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
  enum State : uint8_t { kReserved, kSent, kHole };
  struct SlotHeader {
    State state;
  };
  static_assert(sizeof(SlotHeader) <= kHeadroom);

  SlotHeader& SlotAt(uint64_t position) const {
    return *std::launder(reinterpret_cast<SlotHeader*>(memory_ + (position & mask_) * kStride));
  }
  uint8_t* FrameAt(uint64_t position) const {
    return memory_ + (position & mask_) * kStride + kHeadroom;
  }

  uint8_t* const memory_;  // owned; 64-byte aligned
  const uint64_t mask_;
  RxSignal* const processor_;
  // Producer only.
  uint64_t reserved_ = 0;
  uint64_t published_local_ = 0;
  alignas(kCacheLineBytes) std::atomic<uint64_t> published_{0};  // written by the producer
  alignas(kCacheLineBytes) std::atomic<uint64_t> processed_{0};  // written by the consumer
  uint64_t peeked_end_ = 0;  // consumer only: the position after the latest Peek's run
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_LOOPBACK_INGRESS_SLOT_RING_H_
