// The loopback wire with a stepped processor (LoopbackWireOptions::
// stepped_processor): senders only queue frames on the wire's ingress rings,
// StepProcessor runs the processor over them, and nothing is lost when the
// rings fill.
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

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
using testing::FrameSpec;
using testing::MakeFrame;
using testing::Node;
using testing::PoolsAreFull;
using testing::Readable;
using testing::SendAll;

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

std::vector<FrameBytes> Frames(uint32_t from, uint32_t to, uint32_t count, uint32_t first = 0) {
  std::vector<FrameBytes> frames;
  for (uint32_t p = first; p < first + count; ++p) {
    frames.push_back(MakeFrame(Node(from), Node(to), FrameSpec{wire::MakeSeq(0, p), p}));
  }
  return frames;
}

TEST(LoopbackSteppedProcessor, FramesWaitForStepProcessorAndItsWaitFdSaysSo) {
  Recorder processor;
  LoopbackWireOptions options{&processor, {}};
  options.stepped_processor = true;
  auto wire = LoopbackWire::Create(options);
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b);
  const int fd = wire->processor_wait_fd();
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(Readable(fd));
  EXPECT_EQ(wire->StepProcessor(100), 0u) << "nothing waits";

  ASSERT_EQ(SendAll(a->queue(0), Frames(1, 2, 5), nullptr), 5u);
  EXPECT_TRUE(processor.positions.empty()) << "TxBurst only queued them";
  EXPECT_TRUE(Readable(fd));
  EXPECT_EQ(wire->RxBacklog(1, 0), 0u);
  EXPECT_TRUE(PoolsAreFull(*a)) << "the sender's buffers come back at once (copied)";

  EXPECT_EQ(wire->StepProcessor(3), 3u) << "the budget holds";
  EXPECT_TRUE(Readable(fd)) << "two still wait";
  EXPECT_EQ(wire->StepProcessor(100), 2u);
  EXPECT_EQ(wire->StepProcessor(100), 0u);
  EXPECT_FALSE(Readable(fd)) << "an empty step lowers it";
  EXPECT_EQ(processor.positions, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(processor.from_, (std::vector<EndpointId>(5, 0)));

  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(5));
  EXPECT_EQ(rx.on_queue(0), Frames(1, 2, 5));
  EXPECT_EQ(wire->stats().frames_in, 5u);
  EXPECT_EQ(wire->stats().delivered, 5u);
}

TEST(LoopbackSteppedProcessor, AFullIngressRingHoldsFramesAtTheSenderAndLosesNone) {
  Recorder processor;
  LoopbackWireOptions options{&processor, {}};
  options.stepped_processor = true;
  options.ingress_ring_frames = 5;  // rounded up to 8
  auto wire = LoopbackWire::Create(options);
  DeviceOptions device;
  device.tx_ring_frames = 16;
  device.rx_ring_frames = 64;
  auto a = Add(*wire, 1, device);
  auto b = Add(*wire, 2, device);
  ASSERT_TRUE(a && b);
  const std::vector<FrameBytes> frames = Frames(1, 2, 40);
  // Twice the rings' room (8 on the wire, 16 on the transmit ring), then
  // back-pressure: TxBurst takes no more until the processor makes room.
  std::vector<FrameRef> burst(frames.size());
  const size_t allocated = a->queue(0).tx_pool().AllocBurst(burst);
  ASSERT_EQ(allocated, frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    std::memcpy(burst[i].data, frames[i].data(), kFrameBytes);
    burst[i].length = kFrameBytes;
  }
  const size_t taken = a->queue(0).TxBurst(burst);
  EXPECT_EQ(taken, 8u + 16u);
  EXPECT_EQ(a->queue(0).Flush(), 16u) << "frames held at the sender, in order";
  EXPECT_EQ(a->queue(0).stats().tx_backpressure, 1u);
  ReleaseFrames({burst.data() + taken, burst.size() - taken});

  // The processor frees the ring; each Flush moves more on; then the rest.
  size_t processed = 0;
  while (processed < taken) {
    processed += wire->StepProcessor(1000);
    a->queue(0).Flush();
  }
  EXPECT_EQ(processed, taken);
  std::vector<FrameBytes> rest(frames.begin() + static_cast<ptrdiff_t>(taken), frames.end());
  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(taken));
  std::atomic<bool> done{false};
  std::thread processor_thread([&] {
    while (!done.load()) {
      if (wire->StepProcessor(1000) == 0) std::this_thread::yield();
    }
  });
  EXPECT_EQ(SendAll(a->queue(0), rest, &rx), rest.size());
  ASSERT_TRUE(rx.PollUntil(frames.size()));
  done.store(true);
  processor_thread.join();
  EXPECT_EQ(rx.on_queue(0), frames) << "every frame, in order";
  EXPECT_EQ(wire->stats().egress_drops, 0u);
  EXPECT_TRUE(PoolsAreFull(*a));
}

TEST(LoopbackSteppedProcessor, TakesTheSendersInTurn) {
  Recorder processor;
  LoopbackWireOptions options{&processor, {}};
  options.stepped_processor = true;
  auto wire = LoopbackWire::Create(options);
  auto a = Add(*wire, 1);
  auto c = Add(*wire, 3);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(SendAll(a->queue(0), Frames(1, 2, 100), nullptr), 100u);
  ASSERT_EQ(SendAll(c->queue(0), Frames(3, 2, 100, 1000), nullptr), 100u);
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
  LoopbackWireOptions options{&processor, {}};
  options.stepped_processor = true;
  options.ingress_ring_frames = 64;
  auto wire = LoopbackWire::Create(options);
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
  std::thread send_a([&] { SendAll(a->queue(0), Frames(1, 2, kPerSender), nullptr); });
  std::thread send_c([&] { SendAll(c->queue(0), Frames(3, 2, kPerSender, 100000), nullptr); });
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
