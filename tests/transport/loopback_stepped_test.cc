// The loopback wire with a stepped processor (LoopbackWireOptions::
// stepped_processor): senders write frames in their ingress ring's slots (the
// queue's tx_pool) and only hand them over, StepProcessor runs the processor
// over them, and nothing is lost when the rings fill.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "atp/transport/frame_pool.h"
#include "atp/transport/loopback.h"
#include "gtest/gtest.h"
#include "lib/wire/frame_view.h"
#include "tests/transport/loopback_test_util.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport {
namespace {

using testing::Add;
using testing::Collector;
using testing::FrameBytes;
using testing::Frames;
using testing::Node;
using testing::PoolsAreFull;
using testing::Readable;
using testing::SendAll;
using testing::SteppedWire;
using testing::Take;
using testing::Write;

// Recorder: routes every frame and remembers the thread, sender and position
// of each, in the order it saw them.
class Recorder final : public FrameProcessor {
 public:
  WireDecision Process(std::span<uint8_t, kFrameBytes> frame, EndpointId from, TimePoint,
                       const LoopbackWire&) override {
    threads.push_back(std::this_thread::get_id());
    from_.push_back(from);
    positions.push_back(wire::PositionOfSeq(wire::FrameView(frame.data()).seq()));
    return WireDecision{WireAction::kRoute, {}};
  }

  std::vector<std::thread::id> threads;
  std::vector<EndpointId> from_;
  std::vector<uint32_t> positions;
};

// SendWaiting: every frame through Take, 32 at a time, polling `drain` (may
// be null) in between; while the ring has no free slot it waits for another
// thread's StepProcessor, giving up only after 10 s without progress.
// Returns how many were taken.
size_t SendWaiting(Queue& queue, const std::vector<FrameBytes>& frames, Collector* drain) {
  size_t sent = 0;
  auto last_progress = std::chrono::steady_clock::now();
  while (sent < frames.size() &&
         std::chrono::steady_clock::now() - last_progress < std::chrono::seconds(10)) {
    const size_t end = std::min(frames.size(), sent + 32);
    const size_t taken = Take(queue, {frames.begin() + static_cast<ptrdiff_t>(sent),
                                      frames.begin() + static_cast<ptrdiff_t>(end)});
    sent += taken;
    if (drain != nullptr) drain->PollOnce();
    if (taken > 0) {
      last_progress = std::chrono::steady_clock::now();
    } else {
      std::this_thread::yield();
    }
  }
  return sent;
}

TEST(LoopbackSteppedProcessor, FramesWaitForStepProcessorAndItsWaitFdSaysSo) {
  Recorder processor;
  auto wire = SteppedWire(processor);
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b);
  const int fd = wire->processor_wait_fd();
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(Readable(fd));
  EXPECT_EQ(wire->StepProcessor(100), 0u) << "nothing waits";

  ASSERT_EQ(Take(a->queue(0), Frames(1, 2, 5)), 5u);
  EXPECT_TRUE(processor.positions.empty()) << "TxBurst only handed them over";
  EXPECT_TRUE(Readable(fd));
  EXPECT_EQ(wire->RxBacklog(1, 0), 0u);
  EXPECT_EQ(a->queue(0).Flush(), 5u) << "held in the ingress ring's slots until processed";
  EXPECT_FALSE(PoolsAreFull(*a));

  EXPECT_EQ(wire->StepProcessor(3), 3u) << "the budget holds";
  EXPECT_EQ(a->queue(0).Flush(), 2u);
  EXPECT_TRUE(Readable(fd)) << "two still wait";
  EXPECT_EQ(wire->StepProcessor(100), 2u);
  EXPECT_EQ(wire->StepProcessor(100), 0u);
  EXPECT_FALSE(Readable(fd)) << "an empty step lowers it";
  EXPECT_EQ(processor.positions, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(processor.from_, (std::vector<EndpointId>(5, 0)));
  EXPECT_EQ(a->queue(0).Flush(), 0u);
  EXPECT_TRUE(PoolsAreFull(*a)) << "every slot came back once processed";

  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(5));
  EXPECT_EQ(rx.on_queue(0), Frames(1, 2, 5));
  EXPECT_EQ(wire->stats().frames_in, 5u);
  EXPECT_EQ(wire->stats().delivered, 5u);
}

TEST(LoopbackSteppedProcessor, AFullIngressRingHoldsTheSenderBackAndLosesNothing) {
  Recorder processor;
  auto wire = SteppedWire(processor, 5);  // rounded up to 8
  DeviceOptions device;
  device.rx_ring_frames = 64;
  auto a = Add(*wire, 1, device);
  auto b = Add(*wire, 2, device);
  ASSERT_TRUE(a && b);
  Queue& q = a->queue(0);
  EXPECT_EQ(q.tx_pool().capacity(), 8u) << "the transmit pool is the ingress ring";
  const std::vector<FrameBytes> frames = Frames(1, 2, 40);
  // Written in place: 8 slots, then allocation back-pressures.
  EXPECT_EQ(Take(q, frames), 8u);
  EXPECT_EQ(q.Flush(), 8u);
  EXPECT_EQ(q.tx_pool().free_count(), 0u);
  // Written elsewhere (another pool): copied into a slot, none free now.
  auto elsewhere = *HeapFramePool::Create({.frames = 4});
  FrameRef foreign;
  ASSERT_TRUE(elsewhere->Alloc(&foreign));
  std::memcpy(foreign.data, frames[8].data(), kFrameBytes);
  foreign.length = kFrameBytes;
  EXPECT_EQ(q.TxBurst({&foreign, 1}), 0u) << "no slot to copy it into";
  EXPECT_EQ(q.stats().tx_backpressure, 1u);

  EXPECT_EQ(wire->StepProcessor(3), 3u);
  EXPECT_EQ(q.Flush(), 5u);
  ASSERT_EQ(q.TxBurst({&foreign, 1}), 1u) << "a processed slot is free again";
  EXPECT_EQ(elsewhere->free_count(), 4u) << "the copy's source went back at once";
  EXPECT_EQ(Take(q, std::vector<FrameBytes>(frames.begin() + 9, frames.begin() + 11)), 2u);

  // The rest with the processor on a thread of its own.
  Collector rx(*b);
  std::atomic<bool> done{false};
  std::thread processor_thread([&] {
    while (!done.load()) {
      if (wire->StepProcessor(1000) == 0) std::this_thread::yield();
    }
  });
  const std::vector<FrameBytes> rest(frames.begin() + 11, frames.end());
  EXPECT_EQ(SendWaiting(q, rest, &rx), rest.size());
  ASSERT_TRUE(rx.PollUntil(frames.size()));
  done.store(true);
  processor_thread.join();
  EXPECT_EQ(rx.on_queue(0), frames) << "every frame, in order";
  EXPECT_EQ(wire->stats().egress_drops, 0u);
  EXPECT_TRUE(PoolsAreFull(*a));
}

TEST(LoopbackSteppedProcessor, FramesReachTheProcessorInTheOrderTheirSlotsWereAllocated) {
  Recorder processor;
  auto wire = SteppedWire(processor);
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b);
  Queue& q = a->queue(0);
  std::vector<FrameRef> slots = Write(q, Frames(1, 2, 4));
  ASSERT_EQ(slots.size(), 4u);
  ASSERT_EQ(q.TxBurst({&slots[2], 1}), 1u);
  EXPECT_EQ(wire->StepProcessor(100), 0u) << "slot 2 waits behind slots 0 and 1";
  ASSERT_EQ(q.TxBurst({&slots[0], 1}), 1u);
  ReleaseFrames({&slots[1], 1});  // never sent: a hole the processor skips
  EXPECT_EQ(wire->StepProcessor(100), 2u);
  EXPECT_EQ(processor.positions, (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(q.Flush(), 0u) << "slot 3 is still the sender's, not the wire's";
  ASSERT_EQ(q.TxBurst({&slots[3], 1}), 1u);
  EXPECT_EQ(wire->StepProcessor(100), 1u);
  EXPECT_EQ(processor.positions, (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_TRUE(PoolsAreFull(*a));
  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(3));
}

TEST(LoopbackSteppedProcessor, TakesTheSendersInTurn) {
  Recorder processor;
  auto wire = SteppedWire(processor);
  auto a = Add(*wire, 1);
  auto c = Add(*wire, 3);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(Take(a->queue(0), Frames(1, 2, 100)), 100u);
  ASSERT_EQ(Take(c->queue(0), Frames(3, 2, 100, 1000)), 100u);
  // One step of 64: both senders get frames, each in its own order.
  ASSERT_EQ(wire->StepProcessor(64), 64u);
  size_t from_a = 0;
  size_t from_c = 0;
  for (EndpointId from : processor.from_) (from == 0 ? from_a : from_c) += 1;
  EXPECT_GT(from_a, 0u);
  EXPECT_GT(from_c, 0u);
  while (wire->StepProcessor(64) > 0) {
  }
  uint32_t next_a = 0;
  uint32_t next_c = 1000;
  for (size_t i = 0; i < processor.from_.size(); ++i) {
    uint32_t& next = processor.from_[i] == 0 ? next_a : next_c;
    EXPECT_EQ(processor.positions[i], next++);
  }
  EXPECT_EQ(next_a, 100u);
  EXPECT_EQ(next_c, 1100u);
}

// The processor runs on the stepping thread only, while senders and a
// receiver run on theirs: every frame arrives, in order per sender.
TEST(LoopbackSteppedProcessor, RunsOnlyOnTheSteppingThread) {
  constexpr uint32_t kPerSender = 8000;
  Recorder processor;
  auto wire = SteppedWire(processor, 64);
  // Room for every frame at the receiver: a copy for a full ring would be an
  // egress drop, and the receiver thread may be descheduled for a while.
  DeviceOptions device;
  device.rx_ring_frames = 16384;
  auto a = Add(*wire, 1, device);
  auto c = Add(*wire, 3, device);
  auto b = Add(*wire, 2, device);
  ASSERT_TRUE(a && b && c);
  std::atomic<bool> done{false};
  std::thread stepper([&] {
    while (!done.load()) {
      if (wire->StepProcessor(256) == 0) std::this_thread::yield();
    }
  });
  const std::thread::id stepper_id = stepper.get_id();
  std::thread send_a(
      [&] { EXPECT_EQ(SendWaiting(a->queue(0), Frames(1, 2, kPerSender), nullptr), kPerSender); });
  std::thread send_c([&] {
    EXPECT_EQ(SendWaiting(c->queue(0), Frames(3, 2, kPerSender, 100000), nullptr), kPerSender);
  });
  uint32_t next_a = 0;
  uint32_t next_c = 100000;
  uint32_t received = 0;
  while (received < 2 * kPerSender) {
    FrameRef frames[32];
    const size_t n = b->queue(0).RxBurst(frames);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t position = wire::PositionOfSeq(wire::FrameView(frames[i].data).seq());
      uint32_t& next = position >= 100000 ? next_c : next_a;
      ASSERT_EQ(position, next);
      ++next;
    }
    received += static_cast<uint32_t>(n);
    ReleaseFrames({frames, n});
    if (n == 0) std::this_thread::yield();
  }
  send_a.join();
  send_c.join();
  done.store(true);
  stepper.join();
  ASSERT_EQ(processor.threads.size(), 2u * kPerSender);
  for (const std::thread::id& id : processor.threads) ASSERT_EQ(id, stepper_id);
  EXPECT_EQ(wire->stats().egress_drops, 0u);
  EXPECT_TRUE(PoolsAreFull(*a));
  EXPECT_TRUE(PoolsAreFull(*b));
  EXPECT_TRUE(PoolsAreFull(*c));
}

TEST(LoopbackSteppedProcessor, HasNoEffectWithoutAProcessor) {
  LoopbackWireOptions options;
  options.stepped_processor = true;
  auto wire = LoopbackWire::Create(options);
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(wire->processor_wait_fd(), -1);
  ASSERT_EQ(SendAll(a->queue(0), Frames(1, 2, 3), nullptr), 3u);
  EXPECT_EQ(wire->StepProcessor(100), 0u);
  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(3)) << "delivered directly";
}

}  // namespace
}  // namespace atp::transport
