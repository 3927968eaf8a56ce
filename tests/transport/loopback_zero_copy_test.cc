// The loopback wire's zero-copy receive (LoopbackEndpointOptions::
// zero_copy_rx): RxBurst lends the receive ring's slots, and a slot comes
// back to the ring when its frame is released, in whatever order.
#include <cstring>
#include <memory>
#include <vector>

#include "atp/transport/loopback.h"
#include "gtest/gtest.h"
#include "tests/transport/loopback_test_util.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport {
namespace {

using testing::Add;
using testing::Collector;
using testing::FrameBytes;
using testing::Frames;
using testing::FrameSpec;
using testing::MakeFrame;
using testing::Node;
using testing::PoolsAreFull;
using testing::Readable;
using testing::SendAll;
using testing::Take;

FrameBytes BytesOf(const FrameRef& frame) {
  FrameBytes bytes;
  EXPECT_EQ(frame.length, kFrameBytes);
  std::memcpy(bytes.data(), frame.data, kFrameBytes);
  return bytes;
}

TEST(LoopbackZeroCopyRx, FramesAreReadInTheRingAndTheirSlotsComeBackWhenReleased) {
  auto wire = LoopbackWire::Create({});
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2, {}, /*zero_copy_rx=*/true);
  ASSERT_TRUE(a && b);
  const std::vector<FrameBytes> sent = Frames(1, 2, 8);
  ASSERT_EQ(SendAll(a->queue(0), sent, nullptr), sent.size());
  EXPECT_TRUE(Readable(b->queue(0).wait_fd()));

  std::vector<FrameRef> frames(16);
  ASSERT_EQ(b->queue(0).RxBurst(frames), sent.size());
  FramePool* lender = frames[0].pool;
  ASSERT_NE(lender, nullptr);
  EXPECT_NE(lender, &b->queue(0).rx_pool()) << "not a copy in an rx_pool buffer";
  EXPECT_EQ(lender->headroom(), 0u);
  EXPECT_EQ(lender->free_count(), lender->capacity() - sent.size());
  for (size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(BytesOf(frames[i]), sent[i]) << i;
  EXPECT_EQ(wire->RxBacklog(1, 0), sent.size()) << "lent slots still hold their frames";

  ReleaseFrames({frames.data(), sent.size()});
  EXPECT_EQ(wire->RxBacklog(1, 0), 0u);
  EXPECT_EQ(lender->free_count(), lender->capacity());
  EXPECT_EQ(b->queue(0).RxBurst(frames), 0u);
  EXPECT_FALSE(Readable(b->queue(0).wait_fd())) << "an empty RxBurst lowers it";
  EXPECT_TRUE(PoolsAreFull(*b));
  EXPECT_EQ(b->queue(0).stats().rx_frames, sent.size());
}

TEST(LoopbackZeroCopyRx, SlotsReturnedOutOfOrderLeaveTheRingAtItsHead) {
  auto wire = LoopbackWire::Create({});
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2, {}, /*zero_copy_rx=*/true);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(SendAll(a->queue(0), Frames(1, 2, 4), nullptr), 4u);
  std::vector<FrameRef> first(4);
  ASSERT_EQ(b->queue(0).RxBurst(first), 4u);

  ReleaseFrames({&first[3], 1});
  ReleaseFrames({&first[1], 1});
  EXPECT_EQ(wire->RxBacklog(1, 0), 4u) << "the oldest is still held";
  // More frames arrive behind the held ones, and come out after them.
  ASSERT_EQ(SendAll(a->queue(0), Frames(1, 2, 2, 4), nullptr), 2u);
  std::vector<FrameRef> second(4);
  ASSERT_EQ(b->queue(0).RxBurst(second), 2u);
  EXPECT_EQ(BytesOf(second[0]), Frames(1, 2, 1, 4)[0]);
  EXPECT_EQ(BytesOf(second[1]), Frames(1, 2, 1, 5)[0]);
  EXPECT_EQ(BytesOf(first[2]), Frames(1, 2, 1, 2)[0]) << "a held frame is left alone";

  ReleaseFrames({&first[0], 1});
  EXPECT_EQ(wire->RxBacklog(1, 0), 4u) << "0 and 1 went; 2 is held";
  ReleaseFrames({&first[2], 1});
  EXPECT_EQ(wire->RxBacklog(1, 0), 2u) << "2 and the returned 3 went";
  ReleaseFrames({second.data(), 2});
  EXPECT_EQ(wire->RxBacklog(1, 0), 0u);
  EXPECT_EQ(second[0].pool->free_count(), second[0].pool->capacity());
}

TEST(LoopbackZeroCopyRx, ARingFullOfHeldFramesHoldsTheSenderBackAndLosesNothing) {
  auto wire = LoopbackWire::Create({});
  DeviceOptions small;
  small.rx_ring_frames = 4;
  small.max_burst = 4;
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2, small, /*zero_copy_rx=*/true);
  ASSERT_TRUE(a && b);
  const std::vector<FrameBytes> sent = Frames(1, 2, 6);
  ASSERT_EQ(Take(a->queue(0), sent), sent.size()) << "taken: 4 delivered, 2 waiting";
  EXPECT_EQ(a->queue(0).Flush(), 2u);
  std::vector<FrameRef> held(4);
  ASSERT_EQ(b->queue(0).RxBurst(held), 4u);
  EXPECT_EQ(a->queue(0).Flush(), 2u) << "the lent slots are not free yet";

  ReleaseFrames(held);
  EXPECT_EQ(a->queue(0).Flush(), 0u);
  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(2));
  EXPECT_EQ(rx.on_queue(0), std::vector<FrameBytes>(sent.begin() + 4, sent.end()));
  EXPECT_EQ(b->queue(0).stats().rx_dropped, 0u);
  EXPECT_TRUE(PoolsAreFull(*a));
}

TEST(LoopbackZeroCopyRx, ALentFrameForwardedThroughAnotherQueueComesBackWhenDelivered) {
  auto wire = LoopbackWire::Create({});
  auto a = Add(*wire, 1);
  auto middle = Add(*wire, 2, {}, /*zero_copy_rx=*/true);
  auto c = Add(*wire, 3);
  ASSERT_TRUE(a && middle && c);
  ASSERT_EQ(SendAll(a->queue(0), Frames(1, 2, 1), nullptr), 1u);
  FrameRef frame;
  ASSERT_EQ(middle->queue(0).RxBurst({&frame, 1}), 1u);
  // Readdressed to C in its slot, then sent on: the slot is the send's now.
  const FrameBytes readdressed = MakeFrame(Node(1), Node(3), FrameSpec{wire::MakeSeq(0, 0), 0});
  std::memcpy(frame.data, readdressed.data(), kFrameBytes);
  FramePool* lender = frame.pool;
  ASSERT_EQ(middle->queue(0).TxBurst({&frame, 1}), 1u);
  EXPECT_EQ(middle->queue(0).Flush(), 0u);
  EXPECT_EQ(lender->free_count(), lender->capacity()) << "delivered, so its slot came back";
  EXPECT_EQ(wire->RxBacklog(1, 0), 0u);
  Collector rx(*c);
  ASSERT_TRUE(rx.PollUntil(1));
  EXPECT_EQ(rx.on_queue(0)[0], readdressed);
  EXPECT_TRUE(PoolsAreFull(*middle));
}

}  // namespace
}  // namespace atp::transport
