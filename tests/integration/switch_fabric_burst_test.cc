// SwitchFabric as a stepped wire's processor, fed runs of frames
// (ProcessBurst): each sender's frames reach each receiver in order, and
// losses, filtered copies, absorbed frames and wipes are counted as for one
// frame at a time.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "atp/transport/loopback.h"
#include "gtest/gtest.h"
#include "lib/wire/byte_order.h"
#include "lib/wire/frame_view.h"
#include "testbed/switch_fabric.h"
#include "tests/transport/loopback_test_util.h"
#include "tests/transport/transport_test_util.h"

namespace atp::testbed {
namespace {

using transport::Device;
using transport::DeviceAddress;
using transport::EndpointId;
using transport::LoopbackWire;
using transport::testing::Add;
using transport::testing::Collector;
using transport::testing::FrameBytes;
using transport::testing::FrameSpec;
using transport::testing::MakeFrame;
using transport::testing::Node;
using transport::testing::Take;

// Nodes 1 and 2 in rack 0, node 3 in rack 1, the PS is node 9.
constexpr uint32_t kW0 = 1;
constexpr uint32_t kW1 = 2;
constexpr uint32_t kW2 = 3;
constexpr uint32_t kPs = 9;
const wire::Ipv4Address kGroup{0xEF010101u};  // 239.1.1.1

DeviceAddress Group() { return {kGroup, transport::DefaultMacFor(kGroup)}; }

// Frames: `count` frames from `from` to `to`, positions first, first + 1, ...
std::vector<FrameBytes> Frames(const DeviceAddress& from, const DeviceAddress& to, uint32_t count,
                               uint32_t first = 0) {
  std::vector<FrameBytes> frames;
  for (uint32_t p = first; p < first + count; ++p) {
    frames.push_back(MakeFrame(from, to, FrameSpec{wire::MakeSeq(0, p), p}));
  }
  return frames;
}

uint32_t PositionOf(FrameBytes frame) {
  return wire::PositionOfSeq(wire::FrameView(frame.data()).seq());
}

uint32_t SourceOf(const FrameBytes& frame) {
  return wire::internal::LoadBig32(frame.data() + wire::kIpv4Offset + 12);
}

std::vector<uint32_t> Positions(const std::vector<FrameBytes>& frames) {
  std::vector<uint32_t> positions;
  for (const FrameBytes& frame : frames) positions.push_back(PositionOf(frame));
  return positions;
}

std::vector<uint32_t> Range(uint32_t first, uint32_t count) {
  std::vector<uint32_t> range;
  for (uint32_t p = first; p < first + count; ++p) range.push_back(p);
  return range;
}

// Testbed: the fabric (no aggregation unless asked: the switches route and
// replicate) on a stepped wire with the three workers and the PS.
struct Testbed {
  explicit Testbed(SwitchFabricOptions options) {
    options.jobs.push_back({.job_id = 3,
                            .group = kGroup,
                            .racks = {{Node(kW0).ipv4, Node(kW1).ipv4}, {Node(kW2).ipv4}}});
    auto created = SwitchFabric::Create(options);
    EXPECT_TRUE(created.ok()) << created.status();
    fabric = *std::move(created);
    transport::LoopbackWireOptions wire_options{fabric.get(), {}};
    wire_options.stepped_processor = true;
    wire = LoopbackWire::Create(wire_options);
    w0 = Add(*wire, kW0);
    w1 = Add(*wire, kW1);
    w2 = Add(*wire, kW2);
    ps = Add(*wire, kPs);
  }
  // Step: the processor until nothing waits; returns the frames it took.
  size_t Step() {
    size_t total = 0;
    while (const size_t n = wire->StepProcessor(1024)) total += n;
    return total;
  }

  std::unique_ptr<SwitchFabric> fabric;
  std::shared_ptr<LoopbackWire> wire;
  std::unique_ptr<Device> w0, w1, w2, ps;
};

SwitchFabricOptions ForwardOnly() {
  SwitchFabricOptions options;
  options.aggregation = FabricAggregation::kForwardOnly;
  return options;
}

TEST(SwitchFabricBurst, EachSendersFramesArriveInOrder) {
  Testbed t(ForwardOnly());
  ASSERT_TRUE(t.w0 && t.w1 && t.w2 && t.ps);
  // Everything handed over before the fabric runs: runs of 32 frames.
  ASSERT_EQ(Take(t.w0->queue(0), Frames(Node(kW0), Node(kPs), 100)), 100u);
  ASSERT_EQ(Take(t.w2->queue(0), Frames(Node(kW2), Node(kPs), 100, 1000)), 100u);
  ASSERT_EQ(Take(t.ps->queue(0), Frames(Node(kPs), Group(), 70, 5000)), 70u);
  EXPECT_EQ(t.Step(), 270u);

  Collector ps(*t.ps);
  ASSERT_TRUE(ps.PollUntil(200));
  std::vector<FrameBytes> from_w0, from_w2;
  for (const FrameBytes& frame : ps.on_queue(0)) {
    (SourceOf(frame) == Node(kW0).ipv4.value ? from_w0 : from_w2).push_back(frame);
  }
  EXPECT_EQ(Positions(from_w0), Range(0, 100));
  EXPECT_EQ(Positions(from_w2), Range(1000, 100));
  for (Device* worker : {t.w0.get(), t.w1.get(), t.w2.get()}) {
    Collector rx(*worker);
    ASSERT_TRUE(rx.PollUntil(70));
    EXPECT_EQ(Positions(rx.on_queue(0)), Range(5000, 70)) << "every copy, in order";
  }

  const FabricStats stats = t.fabric->stats();
  EXPECT_EQ(stats.frames, 270u);
  EXPECT_EQ(stats.multicast, 70u);
  EXPECT_EQ(stats.absorbed, 0u);
  EXPECT_EQ(stats.lost, 0u);
  EXPECT_EQ(t.wire->stats().delivered, 200u + 3 * 70u);
  EXPECT_EQ(t.wire->stats().processor_drops, 0u);
}

// What arrives at the PS of 300 gradients sent by w0 with `loss_rate` on
// every hop, and the fabric's and wire's counts.
struct LossRun {
  std::vector<uint32_t> received;
  FabricStats fabric;
  transport::LoopbackWireStats wire;
};
LossRun RunWithLoss(double loss_rate, uint64_t seed) {
  SwitchFabricOptions options = ForwardOnly();
  options.loss_rate = loss_rate;
  options.seed = seed;
  Testbed t(options);
  EXPECT_TRUE(t.w0 && t.ps);
  EXPECT_EQ(Take(t.w0->queue(0), Frames(Node(kW0), Node(kPs), 300)), 300u);
  EXPECT_EQ(t.Step(), 300u);
  Collector ps(*t.ps);
  ps.Settle();
  return {Positions(ps.on_queue(0)), t.fabric->stats(), t.wire->stats()};
}

TEST(SwitchFabricBurst, LossesAreCountedDeterministicAndKeepTheOrder) {
  const LossRun run = RunWithLoss(0.1, 7);
  ASSERT_GT(run.fabric.lost, 0u);
  EXPECT_EQ(run.received.size() + run.fabric.lost, 300u) << "each frame lost once at most";
  EXPECT_TRUE(std::is_sorted(run.received.begin(), run.received.end()));
  EXPECT_EQ(std::adjacent_find(run.received.begin(), run.received.end()), run.received.end());
  EXPECT_EQ(run.wire.processor_drops, run.fabric.lost) << "every lost frame was consumed";
  EXPECT_GT(run.fabric.absorbed, 0u) << "some lost inside the switches";
  EXPECT_LT(run.fabric.absorbed, run.fabric.lost) << "and some on the way in";
  EXPECT_EQ(RunWithLoss(0.1, 7).received, run.received) << "the same seed, the same losses";
  EXPECT_NE(RunWithLoss(0.1, 8).received, run.received);
}

TEST(SwitchFabricBurst, FilteredCopiesAreCountedAndAFrameWithACopyOutIsNotAbsorbed) {
  Testbed t(ForwardOnly());
  ASSERT_TRUE(t.w0 && t.w1 && t.w2 && t.ps);
  // The original of each parameter packet goes down to rack 1, alone with w2;
  // the others get copies.
  t.fabric->SetDeliveryFilter(
      [](wire::Ipv4Address to, const wire::AtpHeader&) { return to != Node(kW2).ipv4; });
  ASSERT_EQ(Take(t.ps->queue(0), Frames(Node(kPs), Group(), 20)), 20u);
  EXPECT_EQ(t.Step(), 20u);
  FabricStats stats = t.fabric->stats();
  EXPECT_EQ(stats.filtered, 20u);
  EXPECT_EQ(stats.absorbed, 0u) << "copies of every frame left toward w0 and w1";
  EXPECT_EQ(t.wire->stats().processor_drops, 0u);
  Collector w0(*t.w0);
  Collector w2(*t.w2);
  ASSERT_TRUE(w0.PollUntil(20));
  w2.Settle();
  EXPECT_EQ(w2.total(), 0u);

  t.fabric->SetDeliveryFilter([](wire::Ipv4Address, const wire::AtpHeader&) { return false; });
  ASSERT_EQ(Take(t.ps->queue(0), Frames(Node(kPs), Group(), 20, 100)), 20u);
  EXPECT_EQ(t.Step(), 20u);
  stats = t.fabric->stats();
  EXPECT_EQ(stats.filtered, 20u + 3 * 20u);
  EXPECT_EQ(stats.absorbed, 20u) << "no copy left";
  EXPECT_EQ(t.wire->stats().processor_drops, 20u);
}

TEST(SwitchFabricBurst, WipesComeEveryNFramesWithinARun) {
  SwitchFabricOptions options;
  options.aggregation = FabricAggregation::kTwoLevel;
  options.wipe_every_frames = 8;
  Testbed t(options);
  ASSERT_TRUE(t.w0 && t.ps);
  ASSERT_EQ(Take(t.w0->queue(0), Frames(Node(kW0), Node(kPs), 30)), 30u);
  EXPECT_EQ(t.Step(), 30u);
  EXPECT_EQ(t.fabric->stats().wipes, 3u);
  EXPECT_EQ(t.fabric->stats().frames, 30u);
  ASSERT_EQ(Take(t.w0->queue(0), Frames(Node(kW0), Node(kPs), 2, 30)), 2u);
  EXPECT_EQ(t.Step(), 2u);
  EXPECT_EQ(t.fabric->stats().wipes, 4u) << "at frame 32";
}

// Process, for a caller that wants one frame's decision.
TEST(SwitchFabricBurst, ProcessAnswersForOneFrame) {
  Testbed t(ForwardOnly());
  ASSERT_TRUE(t.w0 && t.w1 && t.w2 && t.ps);
  const EndpointId ps = *t.wire->FindEndpoint(Node(kPs).ipv4);
  FrameBytes gradient = Frames(Node(kW0), Node(kPs), 1)[0];
  FrameBytes parameters = Frames(Node(kPs), Group(), 1)[0];
  FrameBytes not_atp = gradient;
  not_atp[12] = 0x86;  // not IPv4
  t.fabric->BeginBurst();
  const transport::WireDecision to_ps =
      t.fabric->Process(gradient, 0, TimePoint::FromNanoseconds(0), *t.wire);
  EXPECT_EQ(to_ps.action, transport::WireAction::kSendTo);
  EXPECT_EQ(std::vector<EndpointId>(to_ps.endpoints.begin(), to_ps.endpoints.end()),
            std::vector<EndpointId>{ps});
  const transport::WireDecision to_group =
      t.fabric->Process(parameters, ps, TimePoint::FromNanoseconds(0), *t.wire);
  EXPECT_EQ(to_group.action, transport::WireAction::kSendTo);
  EXPECT_EQ(to_group.endpoints.size(), 3u);
  EXPECT_EQ(t.fabric->Process(not_atp, 0, TimePoint::FromNanoseconds(0), *t.wire).action,
            transport::WireAction::kRoute);
  t.fabric->EndBurst();
  EXPECT_EQ(t.fabric->stats().frames, 3u);
}

}  // namespace
}  // namespace atp::testbed
