// transport/loopback/ingress_slot_ring.cc: reserving, publishing and taking
// the slots of a stepped wire's ingress ring.
#include "transport/loopback/ingress_slot_ring.h"

#include <new>

namespace atp::transport::internal {

IngressSlotRing::IngressSlotRing(uint32_t capacity, RxSignal* processor)
    : memory_(static_cast<uint8_t*>(
          ::operator new(size_t{capacity} * kStride, std::align_val_t{kCacheLineBytes}))),
      mask_(capacity - 1),
      processor_(processor) {
  assert(capacity >= 1 && (capacity & (capacity - 1)) == 0);
  // Each slot's header lives in the slot's first line, with its frame.
  for (uint64_t i = 0; i < capacity; ++i) new (memory_ + i * kStride) SlotHeader{kHole};
}

IngressSlotRing::~IngressSlotRing() {
  ::operator delete(memory_, std::align_val_t{kCacheLineBytes});
}

size_t IngressSlotRing::AllocBurst(std::span<FrameRef> frames) {
  const size_t room = free_count();
  const size_t n = frames.size() < room ? frames.size() : room;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t position = reserved_++;
    SlotAt(position).state = kReserved;
    frames[i] = FrameRef{FrameAt(position), this, position, 0};
  }
  return n;
}

void IngressSlotRing::FreeBurst(std::span<const FrameRef> frames) {
  for (const FrameRef& frame : frames) {
    assert(frame.pool == this && frame.handle >= published_local_ && frame.handle < reserved_ &&
           "a slot this ring did not reserve, or one already sent or freed");
    SlotAt(frame.handle).state = kHole;
  }
  // Freed at the end of the reservations (an allocated burst not all used):
  // the slots are simply reserved again next time.
  while (reserved_ > published_local_ && SlotAt(reserved_ - 1).state == kHole) --reserved_;
  Publish();
}

void IngressSlotRing::Publish() {
  const uint64_t before = published_local_;
  while (published_local_ < reserved_ && SlotAt(published_local_).state != kReserved) {
    ++published_local_;
  }
  if (published_local_ == before) return;
  published_.store(published_local_, std::memory_order_release);
  processor_->Raise();
}

size_t IngressSlotRing::Peek(std::span<uint8_t*> frames) {
  uint64_t next = processed_.load(std::memory_order_relaxed);
  const uint64_t published = published_.load(std::memory_order_acquire);
  // Holes before the first frame go back to the sender at once.
  while (next < published && SlotAt(next).state == kHole) {
    processed_.store(++next, std::memory_order_release);
  }
  size_t n = 0;
  for (; next < published && n < frames.size(); ++next) {
    if (SlotAt(next).state != kHole) frames[n++] = FrameAt(next);
  }
  // The holes after the last frame stay: the next Peek pops them.
  while (n > 0 && SlotAt(next - 1).state == kHole) --next;
  peeked_end_ = next;
  return n;
}

}  // namespace atp::transport::internal
