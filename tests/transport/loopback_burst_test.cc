// The loopback wire's burst path (FrameProcessor::ProcessBurst): the wire
// hands a processor each sender's run of frames at once, and the processor
// sends what it decides through the wire's WireOutput.
#include <cstring>
#include <span>
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
using testing::FrameSpec;
using testing::MakeFrame;
using testing::Node;
using testing::PoolsAreFull;
using testing::SteppedWire;
using testing::Take;

uint32_t PositionOf(uint8_t* frame) { return wire::PositionOfSeq(wire::FrameView(frame).seq()); }

// RunRecorder: routes every frame through the output and remembers each run
// it was handed: its sender and the positions of its frames, in order.
// Process is never called: ProcessBurst is the path.
class RunRecorder : public FrameProcessor {
 public:
  struct Run {
    std::vector<EndpointId> from;
    std::vector<uint32_t> positions;
  };

  WireDecision Process(std::span<uint8_t, kFrameBytes>, EndpointId, TimePoint,
                       const LoopbackWire&) override {
    ADD_FAILURE() << "the wire called Process, not ProcessBurst";
    return WireDecision{WireAction::kDrop, {}};
  }
  void ProcessBurst(std::span<const BurstFrame> frames, TimePoint, const LoopbackWire&,
                    WireOutput& output) override {
    EXPECT_TRUE(in_burst_) << "between BeginBurst and EndBurst";
    Run run;
    for (const BurstFrame& frame : frames) {
      run.from.push_back(frame.from);
      run.positions.push_back(PositionOf(frame.data));
    }
    runs.push_back(std::move(run));
    OnRun(frames);
    for (const BurstFrame& frame : frames) output.Route(frame.data);
  }
  void BeginBurst() override { in_burst_ = true; }
  void EndBurst() override { in_burst_ = false; }

  std::vector<Run> runs;

 protected:
  // OnRun: a subclass's look at the run before it is routed.
  virtual void OnRun(std::span<const BurstFrame>) {}

 private:
  bool in_burst_ = false;
};

TEST(LoopbackBurst, StepProcessorHandsEachSendersRunAtOnceInOrder) {
  RunRecorder processor;
  auto wire = SteppedWire(processor);
  auto a = Add(*wire, 1);
  auto c = Add(*wire, 3);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(Take(a->queue(0), Frames(1, 2, 70)), 70u);
  ASSERT_EQ(Take(c->queue(0), Frames(3, 2, 5, 1000)), 5u);

  ASSERT_EQ(wire->StepProcessor(1000), 75u);
  // Up to 32 frames of one ring, then the next ring's, in turn.
  std::vector<size_t> sizes;
  uint32_t next_a = 0;
  uint32_t next_c = 1000;
  for (const RunRecorder::Run& run : processor.runs) {
    sizes.push_back(run.positions.size());
    ASSERT_FALSE(run.from.empty());
    for (size_t i = 0; i < run.from.size(); ++i) {
      EXPECT_EQ(run.from[i], run.from[0]) << "a run is one sender's";
      uint32_t& next = run.from[0] == 0 ? next_a : next_c;
      EXPECT_EQ(run.positions[i], next++);
    }
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{32, 5, 32, 6}));
  EXPECT_EQ(next_a, 70u);
  EXPECT_EQ(next_c, 1005u);

  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(75));
  EXPECT_EQ(wire->stats().frames_in, 75u);
  EXPECT_EQ(wire->stats().delivered, 75u);
  EXPECT_TRUE(PoolsAreFull(*a));
  EXPECT_TRUE(PoolsAreFull(*c));
}

TEST(LoopbackBurst, TheBudgetCutsARun) {
  RunRecorder processor;
  auto wire = SteppedWire(processor);
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(Take(a->queue(0), Frames(1, 2, 10)), 10u);
  EXPECT_EQ(wire->StepProcessor(4), 4u);
  EXPECT_EQ(a->queue(0).Flush(), 6u) << "the rest still in the sender's slots";
  EXPECT_EQ(wire->StepProcessor(100), 6u);
  ASSERT_EQ(processor.runs.size(), 2u);
  EXPECT_EQ(processor.runs[0].positions, (std::vector<uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(processor.runs[1].positions, (std::vector<uint32_t>{4, 5, 6, 7, 8, 9}));
}

// SlotWatcher: while it holds a run, the sender's ingress ring has no slot
// to give: the frames being processed are not reused under it.
class SlotWatcher final : public RunRecorder {
 public:
  Queue* sender = nullptr;
  std::vector<size_t> free_during_run;

 protected:
  void OnRun(std::span<const BurstFrame> frames) override {
    free_during_run.push_back(sender->tx_pool().free_count());
    // The sender tries to write new frames now: whatever it gets is another slot.
    std::vector<FrameRef> grabbed(sender->tx_pool().capacity());
    grabbed.resize(sender->tx_pool().AllocBurst(grabbed));
    for (const FrameRef& slot : grabbed) {
      for (const BurstFrame& frame : frames) EXPECT_NE(slot.data, frame.data);
      std::memset(slot.data, 0xEE, kFrameBytes);
    }
    ReleaseFrames(grabbed);
  }
};

TEST(LoopbackBurst, IngressSlotsAreNotReusedBeforeTheRunReturns) {
  SlotWatcher processor;
  auto wire = SteppedWire(processor, 8);
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b);
  processor.sender = &a->queue(0);
  const std::vector<FrameBytes> frames = Frames(1, 2, 6);
  ASSERT_EQ(Take(a->queue(0), frames), 6u);
  EXPECT_EQ(wire->StepProcessor(100), 6u);
  EXPECT_EQ(processor.free_during_run, (std::vector<size_t>{2})) << "6 of 8 slots held";
  EXPECT_EQ(a->queue(0).tx_pool().free_count(), 8u) << "all back once the run returned";
  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(6));
  EXPECT_EQ(rx.on_queue(0), frames) << "untouched by the sender's writes meanwhile";
}

// Scripted: frame k of each run: k % 4 == 0 routed, 1 delivered to two
// endpoints (and rewritten first), 2 dropped, 3 delivered to an endpoint
// that has no such queue.
class Scripted final : public FrameProcessor {
 public:
  WireDecision Process(std::span<uint8_t, kFrameBytes>, EndpointId, TimePoint,
                       const LoopbackWire&) override {
    ADD_FAILURE() << "the wire called Process, not ProcessBurst";
    return WireDecision{WireAction::kDrop, {}};
  }
  void ProcessBurst(std::span<const BurstFrame> frames, TimePoint, const LoopbackWire& wire,
                    WireOutput& output) override {
    const EndpointId b = *wire.FindEndpoint(Node(2).ipv4);
    const EndpointId c = *wire.FindEndpoint(Node(3).ipv4);
    uint64_t dropped = 0;
    for (size_t k = 0; k < frames.size(); ++k) {
      uint8_t* frame = frames[k].data;
      switch (k % 4) {
        case 0:
          output.Route(frame);
          break;
        case 1:
          frame[kFrameBytes - 1] ^= 0xFF;
          output.Deliver(b, frame);
          output.Deliver(c, frame);
          break;
        case 2:
          ++dropped;
          break;
        case 3:
          output.Deliver(c, frame);
          break;
      }
    }
    output.Dropped(dropped);
  }
};

TEST(LoopbackBurst, TheOutputRoutesDeliversAndCountsDrops) {
  Scripted processor;
  auto wire = SteppedWire(processor);
  DeviceOptions two_queues;
  two_queues.num_queues = 2;
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2, two_queues);
  auto c = Add(*wire, 3);  // one queue: a frame for queue 1 is unroutable there
  ASSERT_TRUE(a && b && c);
  std::vector<FrameBytes> frames;
  for (uint32_t p = 0; p < 8; ++p) {
    frames.push_back(MakeFrame(Node(1), Node(2), FrameSpec{wire::MakeSeq(1, p), p}));
  }
  ASSERT_EQ(Take(a->queue(0), frames), 8u);
  ASSERT_EQ(wire->StepProcessor(100), 8u);

  Collector rx_b(*b);
  ASSERT_TRUE(rx_b.PollUntil(4));
  std::vector<FrameBytes> expected = {frames[0], frames[1], frames[4], frames[5]};
  expected[1][kFrameBytes - 1] ^= 0xFF;
  expected[3][kFrameBytes - 1] ^= 0xFF;
  EXPECT_EQ(rx_b.on_queue(1), expected) << "routed, delivered, in order";
  Collector rx_c(*c);
  rx_c.Settle();
  EXPECT_EQ(rx_c.total(), 0u);
  const LoopbackWireStats stats = wire->stats();
  EXPECT_EQ(stats.frames_in, 8u);
  EXPECT_EQ(stats.delivered, 4u);
  EXPECT_EQ(stats.processor_drops, 2u);
  EXPECT_EQ(stats.unroutable, 4u) << "frames 1, 3, 5 and 7 to c";
}

TEST(LoopbackBurst, DeliverCopiesTheBytesAsTheyAreThen) {
  Scripted processor;
  auto wire = SteppedWire(processor);
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  auto c = Add(*wire, 3);
  ASSERT_TRUE(a && b && c);
  const std::vector<FrameBytes> frames = Frames(1, 2, 2);
  ASSERT_EQ(Take(a->queue(0), frames), 2u);
  ASSERT_EQ(wire->StepProcessor(100), 2u);
  Collector rx_b(*b);
  Collector rx_c(*c);
  ASSERT_TRUE(rx_b.PollUntil(2));
  ASSERT_TRUE(rx_c.PollUntil(1));
  FrameBytes rewritten = frames[1];
  rewritten[kFrameBytes - 1] ^= 0xFF;
  EXPECT_EQ(rx_b.on_queue(0), (std::vector<FrameBytes>{frames[0], rewritten}));
  EXPECT_EQ(rx_c.on_queue(0), (std::vector<FrameBytes>{rewritten}));
  EXPECT_EQ(wire->stats().delivered, 3u);
}

// Without stepped_processor, TxBurst runs the processor on the sending
// thread: runs of at most 32 frames, in order.
TEST(LoopbackBurst, ProcessAndDeliverHandsTheSendersFramesInRuns) {
  RunRecorder processor;
  auto wire = LoopbackWire::Create({&processor, {}});
  DeviceOptions device;
  device.rx_ring_frames = 128;
  auto a = Add(*wire, 1, device);
  auto b = Add(*wire, 2, device);
  ASSERT_TRUE(a && b);
  const std::vector<FrameBytes> frames = Frames(1, 2, 40);
  ASSERT_EQ(Take(a->queue(0), frames), 40u);
  uint32_t next = 0;
  for (const RunRecorder::Run& run : processor.runs) {
    EXPECT_LE(run.positions.size(), 32u);
    for (size_t i = 0; i < run.positions.size(); ++i) {
      EXPECT_EQ(run.from[i], 0u);
      EXPECT_EQ(run.positions[i], next++);
    }
  }
  EXPECT_EQ(next, 40u);
  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(40));
  EXPECT_EQ(rx.on_queue(0), frames);
  EXPECT_TRUE(PoolsAreFull(*a));
}

// A processor with only Process: the default ProcessBurst carries out each
// decision, frame by frame.
class EveryOther final : public FrameProcessor {
 public:
  WireDecision Process(std::span<uint8_t, kFrameBytes> frame, EndpointId, TimePoint,
                       const LoopbackWire&) override {
    if (PositionOf(frame.data()) % 2 == 1) return WireDecision{WireAction::kDrop, {}};
    return WireDecision{WireAction::kSendTo, to};
  }
  std::vector<EndpointId> to;
};

TEST(LoopbackBurst, TheDefaultProcessBurstCarriesOutEachDecision) {
  EveryOther processor;
  auto wire = SteppedWire(processor);
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  auto c = Add(*wire, 3);
  ASSERT_TRUE(a && b && c);
  processor.to = {1, 2};
  const std::vector<FrameBytes> frames = Frames(1, 2, 6);
  ASSERT_EQ(Take(a->queue(0), frames), 6u);
  ASSERT_EQ(wire->StepProcessor(100), 6u);
  Collector rx_b(*b);
  Collector rx_c(*c);
  ASSERT_TRUE(rx_b.PollUntil(3));
  ASSERT_TRUE(rx_c.PollUntil(3));
  const std::vector<FrameBytes> even = {frames[0], frames[2], frames[4]};
  EXPECT_EQ(rx_b.on_queue(0), even);
  EXPECT_EQ(rx_c.on_queue(0), even);
  EXPECT_EQ(wire->stats().processor_drops, 3u);
  EXPECT_EQ(wire->stats().delivered, 6u);
}

}  // namespace
}  // namespace atp::transport
