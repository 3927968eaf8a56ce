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

// Front: the oldest published frame not yet popped (a Peek of one; PopPeeked
// pops it), or null.
uint8_t* Front(IngressSlotRing& ring) {
  uint8_t* frame = nullptr;
  return ring.Peek({&frame, 1}) == 1 ? frame : nullptr;
}

// Drain: the tags of every published frame, popped one by one in order.
std::vector<uint32_t> Drain(IngressSlotRing& ring) {
  std::vector<uint32_t> tags;
  for (uint8_t* frame = Front(ring); frame != nullptr; frame = Front(ring)) {
    tags.push_back(Tag(frame));
    ring.PopPeeked();
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
  EXPECT_EQ(Front(ring), nullptr) << "c waits behind a and b";
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

// Peek takes a run of published frames at once, skipping holes, and leaves
// their slots to the consumer until PopPeeked.
TEST(IngressSlotRing, PeekedFramesKeepTheirSlotsUntilPopPeeked) {
  RxSignal processor;
  IngressSlotRing ring(8, &processor);
  std::vector<FrameRef> burst;
  for (uint32_t tag = 1; tag <= 6; ++tag) burst.push_back(Reserve(ring, tag));
  FrameRef leading_hole = burst[0];
  FrameRef middle_hole = burst[2];
  for (const FrameRef& frame : burst) {
    if (frame.data != leading_hole.data && frame.data != middle_hole.data) ring.MarkSent(frame);
  }
  ring.FreeBurst({&leading_hole, 1});
  ring.FreeBurst({&middle_hole, 1});  // publishes 2..6, holes at 1 and 3
  EXPECT_EQ(ring.Unprocessed(), 6u);

  std::vector<uint8_t*> run(3);
  ASSERT_EQ(ring.Peek(run), 3u) << "at most what was asked for";
  EXPECT_EQ(Tag(run[0]), 2u);
  EXPECT_EQ(Tag(run[1]), 4u) << "the hole between skipped";
  EXPECT_EQ(Tag(run[2]), 5u);
  EXPECT_EQ(ring.free_count(), 3u) << "only the leading hole went back";
  std::vector<uint8_t*> again(8);
  ASSERT_EQ(ring.Peek(again), 4u) << "nothing popped: the same frames, and one more";
  EXPECT_EQ(again[0], run[0]);
  EXPECT_EQ(Tag(again[3]), 6u);
  ASSERT_EQ(ring.Peek(run), 3u);

  ring.PopPeeked();
  EXPECT_EQ(ring.free_count(), 7u) << "the run and the hole among it went back";
  EXPECT_EQ(ring.Unprocessed(), 1u);
  ASSERT_EQ(ring.Peek(run), 1u);
  EXPECT_EQ(Tag(run[0]), 6u);
  ring.PopPeeked();
  EXPECT_EQ(ring.Peek(run), 0u);
  ring.PopPeeked();  // after an empty Peek: nothing
  EXPECT_EQ(ring.free_count(), 8u);
}

TEST(IngressSlotRing, AProducerAndAConsumerThreadLoseNothingAndKeepTheOrder) {
  constexpr uint32_t kFrames = 50000;
  RxSignal processor;
  IngressSlotRing ring(16, &processor);
  std::atomic<bool> failed{false};
  std::thread consumer([&] {
    uint32_t next = 0;
    while (next < kFrames && !failed.load()) {
      uint8_t* frame = Front(ring);
      if (frame == nullptr) {
        std::this_thread::yield();
        continue;
      }
      if (Tag(frame) != next) failed.store(true);
      ++next;
      ring.PopPeeked();
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
  EXPECT_EQ(Front(ring), nullptr);
  EXPECT_EQ(ring.free_count(), ring.capacity());
}

}  // namespace
}  // namespace atp::transport::internal
