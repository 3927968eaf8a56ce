// IngressSlotRing: a stepped wire's ingress ring, which is also the sending
// queue's transmit pool (one producer, one consumer).
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/transport/loopback_test_util.h"
#include "transport/loopback/ingress_slot_ring.h"

namespace atp::transport::internal {
namespace {

using testing::Readable;

uint32_t Tag(const uint8_t* frame) {
  uint32_t tag = 0;
  std::memcpy(&tag, frame, sizeof(tag));
  return tag;
}

FrameRef Reserve(IngressSlotRing& ring, uint32_t tag) {
  FrameRef frame;
  EXPECT_EQ(ring.AllocBurst({&frame, 1}), 1u);
  std::memcpy(frame.data, &tag, sizeof(tag));
  frame.length = kFrameBytes;
  return frame;
}

// Drain: the tags of every published frame, popped in order.
std::vector<uint32_t> Drain(IngressSlotRing& ring) {
  std::vector<uint32_t> tags;
  for (uint8_t* frame = ring.Front(); frame != nullptr; frame = ring.Front()) {
    tags.push_back(Tag(frame));
    ring.Pop();
  }
  return tags;
}

TEST(IngressSlotRing, PublishesUpToTheFirstSlotStillReservedAndRaisesTheProcessor) {
  RxSignal processor;
  IngressSlotRing ring(8, &processor);
  EXPECT_EQ(ring.capacity(), 8u);
  EXPECT_EQ(ring.headroom(), kDefaultHeadroom);
  const FrameRef a = Reserve(ring, 1);
  const FrameRef b = Reserve(ring, 2);
  const FrameRef c = Reserve(ring, 3);
  EXPECT_EQ(ring.free_count(), 5u);
  EXPECT_EQ((reinterpret_cast<uintptr_t>(a.data) + wire::kPayloadOffset) % kCacheLineBytes, 0u)
      << "the payload starts on a cache line, as in a HeapFramePool buffer";

  ring.MarkSent(c);
  ring.Publish();
  EXPECT_EQ(ring.Front(), nullptr) << "c waits behind a and b";
  EXPECT_FALSE(Readable(processor.fd()));
  ring.MarkSent(a);
  ring.Publish();
  EXPECT_TRUE(Readable(processor.fd()));
  EXPECT_EQ(ring.Unprocessed(), 1u);
  ring.FreeBurst({&b, 1});  // a hole: publishes c too
  EXPECT_EQ(ring.Unprocessed(), 3u);
  EXPECT_EQ(Drain(ring), (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(ring.Unprocessed(), 0u);
  EXPECT_EQ(ring.free_count(), 8u);
}

TEST(IngressSlotRing, SlotsFreedAtTheEndOfTheReservationsAreReservedAgain) {
  RxSignal processor;
  IngressSlotRing ring(4, &processor);
  std::vector<FrameRef> burst(4);
  ASSERT_EQ(ring.AllocBurst(burst), 4u);
  EXPECT_EQ(ring.AllocBurst(burst), 0u) << "full";
  ring.MarkSent(burst[0]);
  ring.FreeBurst(std::span(burst).subspan(1));  // an allocated burst not all used
  EXPECT_EQ(ring.free_count(), 3u) << "only the sent frame holds a slot";
  std::vector<FrameRef> again(3);
  ASSERT_EQ(ring.AllocBurst(again), 3u);
  EXPECT_EQ(again[0].handle, burst[1].handle) << "the same positions, no holes";
  EXPECT_EQ(again[0].data, burst[1].data);
  ring.FreeBurst(again);
  EXPECT_EQ(Drain(ring).size(), 1u);
  EXPECT_EQ(ring.free_count(), 4u);
}

TEST(IngressSlotRing, AProducerAndAConsumerThreadLoseNothingAndKeepTheOrder) {
  constexpr uint32_t kFrames = 50000;
  RxSignal processor;
  IngressSlotRing ring(16, &processor);
  std::atomic<bool> failed{false};
  std::thread consumer([&] {
    uint32_t next = 0;
    while (next < kFrames && !failed.load()) {
      uint8_t* frame = ring.Front();
      if (frame == nullptr) {
        std::this_thread::yield();
        continue;
      }
      if (Tag(frame) != next) failed.store(true);
      ++next;
      ring.Pop();
    }
  });
  for (uint32_t tag = 0; tag < kFrames && !failed.load();) {
    // Every third frame has a hole before it: a slot allocated, then freed
    // unsent while the frame's slot after it is still reserved.
    FrameRef hole;
    const bool with_hole = tag % 3 == 0 && ring.AllocBurst({&hole, 1}) == 1;
    FrameRef frame;
    if (ring.AllocBurst({&frame, 1}) == 0) {
      if (with_hole) ring.FreeBurst({&hole, 1});  // the last reserved: simply given back
      std::this_thread::yield();
      continue;
    }
    std::memcpy(frame.data, &tag, sizeof(tag));
    if (with_hole) ring.FreeBurst({&hole, 1});
    ring.MarkSent(frame);
    ring.Publish();
    ++tag;
  }
  consumer.join();
  EXPECT_FALSE(failed.load()) << "a frame out of order";
  EXPECT_EQ(ring.Front(), nullptr);
  EXPECT_EQ(ring.free_count(), ring.capacity());
}

}  // namespace
}  // namespace atp::transport::internal
