// The numbered rules of ATP-SPEC section 4, one or more tests each, named
// after the rule they prove.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/wire/frame_view.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "tests/unit/switch/pipeline_fixture.h"
#include "tests/unit/switch/switch_test_util.h"

namespace atp::switch_emulator::testing {
namespace {

using wire::AtpHeader;
using wire::DecodeError;

constexpr uint32_t kSeq = 7;
constexpr uint16_t kAgg = 5;  // aggregator 5 of 64 (dynamic mode: index % 64)

// --- Rule 1: egress congestion -----------------------------------------------

TEST_F(PipelineTest, Rule1_EcnMarksWhenEgressOverThreshold) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  EXPECT_EQ(SendVerdict(w0, kT0, kEcnThreshold + 1), Verdict::kAbsorbed);
  Decoded d = Decode(w0);
  ASSERT_EQ(d.error, DecodeError::kOk) << "CE marking must keep the IPv4 checksum valid";
  EXPECT_TRUE(d.header().ecn);
  EXPECT_EQ(d.fields.ip_tos, wire::kTosCe);
  EXPECT_TRUE(State(kAgg).ecn) << "the claim records the mark it just made";
  EXPECT_EQ(pipeline().counters().ecn_marked, 1u);

  // The completing packet saw no congestion, yet the result carries it.
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(2));
  EXPECT_EQ(SendVerdict(w1, kT0, 0), Verdict::kToPs);
  d = Decode(w1);
  EXPECT_TRUE(d.header().ecn);
  EXPECT_EQ(d.fields.ip_tos, wire::kTosEct0) << "only this hop's congestion sets IPv4 CE";
}

TEST_F(PipelineTest, Rule1_NoMarkAtOrBelowThreshold) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  EXPECT_EQ(SendVerdict(w0, kT0, kEcnThreshold), Verdict::kAbsorbed);
  Decoded d = Decode(w0);
  EXPECT_FALSE(d.header().ecn);
  EXPECT_EQ(d.fields.ip_tos, wire::kTosEct0);
  EXPECT_FALSE(State(kAgg).ecn);
  EXPECT_EQ(pipeline().counters().ecn_marked, 0u);
}

TEST_F(PipelineTest, Rule1_UpstreamCeSurvivesAggregation) {
  // A forwarding switch upstream marked w0 CE (it never writes ATP headers);
  // this hop is not congested, yet the aggregate the PS gets carries ecn.
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  wire::FrameView(w0.bytes.data()).MarkCongestionExperienced();
  EXPECT_EQ(SendVerdict(w0, kT0, 0), Verdict::kAbsorbed);
  EXPECT_TRUE(State(kAgg).ecn) << "the aggregator records the upstream mark";
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(2));
  EXPECT_EQ(SendVerdict(w1, kT0, 0), Verdict::kToPs);
  const Decoded d = Decode(w1);
  ASSERT_EQ(d.error, DecodeError::kOk);
  EXPECT_TRUE(d.header().ecn);
  EXPECT_EQ(pipeline().counters().ecn_marked, 0u) << "not a mark of this hop";
}

TEST_F(PipelineTest, Rule1_EcnMarksParameterAndFpPacketsToo) {
  TestFrame ack = Frame(Ack(kJobA, kSeq, kAgg), Ramp(0));
  EXPECT_EQ(Send(ack, kT0, kEcnThreshold + 5), (Decision{Verdict::kMulticast, kGroupA}));
  EXPECT_TRUE(Decode(ack).header().ecn);
  AtpHeader fp = Worker(kJobA, kSeq, kAgg, 0, 2);
  fp.fp = true;
  TestFrame f = Frame(fp, Ramp(3));
  EXPECT_EQ(SendVerdict(f, kT0, kEcnThreshold + 5), Verdict::kToPs);
  EXPECT_TRUE(Decode(f).header().ecn);
  EXPECT_EQ(Decode(f).fields.ip_tos, wire::kTosCe);
  EXPECT_EQ(pipeline().counters().ecn_marked, 2u);
}

// --- Rule 2: parameter packets -------------------------------------------------

TEST_F(PipelineTest, Rule2_AckClearsOwnedAggregatorAndMulticasts) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  ASSERT_EQ(pipeline().aggregators_in_use(), 1u);

  TestFrame ack = Frame(Ack(kJobA, kSeq, kAgg), Ramp(9));
  const TestFrame before = ack;
  EXPECT_EQ(Send(ack), (Decision{Verdict::kMulticast, kGroupA}));
  EXPECT_EQ(ack.bytes, before.bytes) << "an ack is multicast as it came";
  EXPECT_TRUE(State(kAgg).is_free());
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
  EXPECT_EQ(pipeline().counters().acks, 1u);
  EXPECT_EQ(pipeline().counters().acks_cleared, 1u);
}

TEST_F(PipelineTest, Rule2_AckOfAnotherSeqOrJobLeavesAggregator) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  const AggregatorSnapshot before = AggregatorSnapshot::Of(pipeline());

  TestFrame other_seq = Frame(Ack(kJobA, kSeq + 1, kAgg), Ramp(0));
  EXPECT_EQ(Send(other_seq), (Decision{Verdict::kMulticast, kGroupA}));
  TestFrame other_job = Frame(Ack(kJobB, kSeq, kAgg), Ramp(0));
  EXPECT_EQ(Send(other_job), (Decision{Verdict::kMulticast, kGroupB}));

  EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), before);
  EXPECT_EQ(pipeline().counters().acks, 2u);
  EXPECT_EQ(pipeline().counters().acks_cleared, 0u);
}

TEST_F(PipelineTest, Rule2_AckClearsAggregatorAtEitherLevel) {
  PipelineConfig c = BaseConfig();
  c.jobs = {{.job = kJobA, .levels = JobLevels::kLevel2, .multicast_group = kGroupA}};
  Build(c);
  TestFrame r0 = Frame(Rack(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(r0), Verdict::kAbsorbed);
  ASSERT_EQ(State(kAgg).level, AggregationLevel::kLevel2);

  TestFrame ack = Frame(Ack(kJobA, kSeq, kAgg), Ramp(0));
  EXPECT_EQ(Send(ack), (Decision{Verdict::kMulticast, kGroupA}));
  EXPECT_TRUE(State(kAgg).is_free());
  EXPECT_EQ(pipeline().counters().acks_cleared, 1u);
}

TEST_F(PipelineTest, Rule2_CollisionAckUsesOldIndexToClear) {
  // A parameter packet reporting a collision carries the new index in bitmap1;
  // the aggregator it clears is still named by its aggregator field.
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  AtpHeader ack = Ack(kJobA, kSeq, kAgg);
  ack.collision = true;
  ack.bitmap1 = 0x1234;  // new index, far beyond any fan-in
  TestFrame f = Frame(ack, Ramp(0));
  EXPECT_EQ(Send(f), (Decision{Verdict::kMulticast, kGroupA}));
  EXPECT_TRUE(State(kAgg).is_free());
}

TEST_F(PipelineTest, Rule2_ControlFramesMoveWithoutTouchingAggregators) {
  // A control frame (fp, resend and collision set) names no fragment: the PS's
  // is multicast and a worker's goes to the PS, and neither releases or claims
  // the aggregator its seq and index point at.
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  const AggregatorSnapshot before = AggregatorSnapshot::Of(pipeline());

  AtpHeader from_ps = Ack(kJobA, kSeq, kAgg);
  from_ps.fp = from_ps.resend = from_ps.collision = true;
  TestFrame ps_control = Frame(from_ps, Ramp(0));
  EXPECT_EQ(Send(ps_control), (Decision{Verdict::kMulticast, kGroupA}));

  AtpHeader from_worker = Worker(kJobA, kSeq, kAgg, 1, 3);
  from_worker.fp = from_worker.resend = from_worker.collision = true;
  TestFrame worker_control = Frame(from_worker, Ramp(0));
  EXPECT_EQ(SendVerdict(worker_control), Verdict::kToPs);

  EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), before);
  EXPECT_EQ(pipeline().counters().acks_cleared, 0u);
  // Counted as a control frame, not as float32 data.
  EXPECT_EQ(pipeline().counters().forwarded_control, 1u);
  EXPECT_EQ(pipeline().counters().forwarded_fp, 0u);
  EXPECT_EQ(pipeline().job_counters(kJobA).forwarded_control, 1u);
}

// --- Rule 3: fp ---------------------------------------------------------------

TEST_F(PipelineTest, Rule3_FpForwardedToPsUntouched) {
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 0, 2);
  h.fp = true;
  TestFrame f = Frame(h, Ramp(0x3F800000));  // float32 bit patterns
  const TestFrame before = f;
  EXPECT_EQ(SendVerdict(f), Verdict::kToPs);
  EXPECT_EQ(f.bytes, before.bytes);
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
  EXPECT_EQ(pipeline().counters().forwarded_fp, 1u);

  // Also when its seq's aggregator is live: fp never touches it.
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(w1), Verdict::kAbsorbed);
  const AggregatorSnapshot snap = AggregatorSnapshot::Of(pipeline());
  f = before;
  EXPECT_EQ(SendVerdict(f), Verdict::kToPs);
  EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), snap);
}

// --- Rule 4: free aggregator ----------------------------------------------------

TEST_F(PipelineTest, Rule4_FreeAggregatorClaimedAndPacketAbsorbed) {
  TestFrame w2 = Frame(Worker(kJobA, kSeq, kAgg, 2, 4), Ramp(-3));
  EXPECT_EQ(SendVerdict(w2, kT0 + TimeDelta::FromMicroseconds(5)), Verdict::kAbsorbed);
  const AggregatorState& s = State(kAgg);
  EXPECT_EQ(s.job(), kJobA);
  EXPECT_EQ(s.seq(), kSeq);
  EXPECT_EQ(s.level, AggregationLevel::kLevel1);
  EXPECT_EQ(s.bitmap, 0b100u);
  EXPECT_EQ(s.counter, 1);
  EXPECT_EQ(s.fan_in, 4);
  EXPECT_FALSE(s.ecn);
  EXPECT_EQ(s.timestamp, kT0 + TimeDelta::FromMicroseconds(5));
  EXPECT_EQ(Values(kAgg), Ramp(-3)) << "big-endian payload copied in host order";
  EXPECT_EQ(pipeline().aggregators().values(kAgg).lanes[62], 0);
  EXPECT_EQ(pipeline().aggregators().values(kAgg).lanes[63], 0);
  EXPECT_EQ(pipeline().aggregators_in_use(), 1u);
  EXPECT_EQ(pipeline().counters().claimed, 1u);
  EXPECT_EQ(pipeline().counters().aggregated, 1u);
}

TEST_F(PipelineTest, Rule4_IndexIsTakenModuloArraySize) {
  TestFrame f = Frame(Worker(kJobA, kSeq, 64 * 3 + kAgg, 0, 2), Ramp(1));
  EXPECT_EQ(SendVerdict(f), Verdict::kAbsorbed);
  EXPECT_FALSE(State(kAgg).is_free());
}

TEST_F(PipelineTest, Rule4_ClaimThatCompletesFanInCompletesAtOnce) {
  // A rack of one worker: its only contribution completes level 1.
  TestFrame solo = Frame(Worker(kJobA, kSeq, kAgg, 0, 1), Ramp(4));
  EXPECT_EQ(SendVerdict(solo), Verdict::kToPs);
  Decoded d = Decode(solo);
  EXPECT_TRUE(d.header().edge);
  EXPECT_EQ(d.header().bitmap0, 1u);
  EXPECT_EQ(d.payload, Ramp(4));
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
  EXPECT_EQ(pipeline().counters().completed, 1u);

  // A level-2 partial naming every rack completes level 2 at once.
  PipelineConfig c = BaseConfig();
  c.jobs = {{.job = kJobA, .levels = JobLevels::kLevel2, .multicast_group = kGroupA}};
  Build(c);
  AtpHeader partial = Rack(kJobA, kSeq, kAgg, 0, 2);
  partial.bitmap1 = 0b11;
  TestFrame p = Frame(partial, Ramp(6));
  EXPECT_EQ(SendVerdict(p), Verdict::kToPs);
  EXPECT_EQ(Decode(p).header().bitmap1, 0b11u);
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
}

TEST_F(PipelineTest, Rule4_ResendFindingFreeAggregatorGoesToPs) {
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 1, 3);
  h.resend = true;
  TestFrame f = Frame(h, Ramp(2));
  const TestFrame before = f;
  EXPECT_EQ(SendVerdict(f), Verdict::kToPs);
  EXPECT_EQ(f.bytes, before.bytes);
  EXPECT_TRUE(State(kAgg).is_free());
  EXPECT_EQ(pipeline().counters().resend_to_ps, 1u);
  EXPECT_EQ(pipeline().counters().claimed, 0u);
}

// --- Rule 5: owned by another ------------------------------------------------------

TEST_F(PipelineTest, Rule5_CollisionSetsFlagsAndForwards) {
  TestFrame owner = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(owner), Verdict::kAbsorbed);
  const AggregatorSnapshot snap = AggregatorSnapshot::Of(pipeline());

  TestFrame stranger = Frame(Worker(kJobA, kSeq + 64, kAgg, 1, 2), Ramp(5));
  EXPECT_EQ(SendVerdict(stranger), Verdict::kToPs);
  Decoded d = Decode(stranger);
  EXPECT_TRUE(d.header().collision);
  EXPECT_TRUE(d.header().resend);
  EXPECT_FALSE(d.header().edge);
  EXPECT_EQ(d.payload, Ramp(5)) << "a colliding packet carries its own data on";
  EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), snap);
  EXPECT_EQ(pipeline().counters().collisions, 1u);
}

TEST_F(PipelineTest, Rule5_ResendFindingStrangerIsJustForwarded) {
  TestFrame owner = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(owner), Verdict::kAbsorbed);
  AtpHeader h = Worker(kJobA, kSeq + 1, kAgg, 1, 2);
  h.resend = true;
  TestFrame f = Frame(h, Ramp(5));
  const TestFrame before = f;
  EXPECT_EQ(SendVerdict(f), Verdict::kToPs);
  EXPECT_EQ(f.bytes, before.bytes) << "no collision flag on a resend";
  EXPECT_EQ(State(kAgg).seq(), kSeq);
}

TEST_F(PipelineTest, Rule5_OtherLevelOfSameSeqIsAStranger) {
  PipelineConfig c = BaseConfig();
  c.jobs = {{.job = kJobA, .levels = JobLevels::kBoth, .multicast_group = kGroupA}};
  Build(c);
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2, /*rack=*/0, /*fan_in1=*/2), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  const AggregatorSnapshot snap = AggregatorSnapshot::Of(pipeline());

  // Rack 1's level-2 result for the same (job, seq) finds the level-1 aggregator.
  TestFrame r1 = Frame(Rack(kJobA, kSeq, kAgg, 1, 2, 3), Ramp(2));
  EXPECT_EQ(SendVerdict(r1), Verdict::kToPs);
  EXPECT_TRUE(Decode(r1).header().collision);
  EXPECT_TRUE(Decode(r1).header().resend);
  EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), snap);
}

TEST_F(PipelineTest, Rule5_SameSeqWithOtherFanInOrRackIsAStranger) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 4, /*rack=*/0, /*fan_in1=*/2), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  const AggregatorSnapshot snap = AggregatorSnapshot::Of(pipeline());
  // Summing these would write a bitmap0 naming workers the packet's fan-in
  // does not have, or mix two racks' worker numbers.
  TestFrame other_fan_in = Frame(Worker(kJobA, kSeq, kAgg, 1, 2, 0, 2), Ramp(2));
  TestFrame other_rack = Frame(Worker(kJobA, kSeq, kAgg, 1, 4, 1, 2), Ramp(2));
  for (TestFrame* f : {&other_fan_in, &other_rack}) {
    EXPECT_EQ(SendVerdict(*f), Verdict::kToPs);
    EXPECT_TRUE(Decode(*f).header().collision);
    EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), snap);
  }
  EXPECT_EQ(pipeline().counters().collisions, 2u);
}

// --- Rule 6: owned by (job, seq, level) --------------------------------------------

TEST_F(PipelineTest, Rule6_DuplicateDropped) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  TestFrame again = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  EXPECT_EQ(SendVerdict(again, kT0 + TimeDelta::FromMicroseconds(3)), Verdict::kAbsorbed);
  EXPECT_EQ(Values(kAgg), Ramp(1)) << "a duplicate adds nothing";
  EXPECT_EQ(State(kAgg).counter, 1);
  EXPECT_EQ(State(kAgg).timestamp, kT0) << "a duplicate does not keep an aggregator alive";
  EXPECT_EQ(pipeline().counters().duplicates, 1u);
  EXPECT_EQ(pipeline().counters().aggregated, 1u);
}

TEST_F(PipelineTest, Rule6_DuplicateOrsEcn) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  AtpHeader dup = Worker(kJobA, kSeq, kAgg, 0, 2);
  dup.ecn = true;
  TestFrame f = Frame(dup, Ramp(1));
  EXPECT_EQ(SendVerdict(f), Verdict::kAbsorbed);
  EXPECT_TRUE(State(kAgg).ecn);
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(2));
  EXPECT_EQ(SendVerdict(w1), Verdict::kToPs);
  EXPECT_TRUE(Decode(w1).header().ecn);
}

TEST_F(PipelineTest, Rule6_DuplicateResendFlushes) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 4), Ramp(1));
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 4), Ramp(10));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  ASSERT_EQ(SendVerdict(w1), Verdict::kAbsorbed);
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 1, 4);
  h.resend = true;
  TestFrame resend = Frame(h, Ramp(10));
  EXPECT_EQ(SendVerdict(resend), Verdict::kToPs);
  Decoded d = Decode(resend);
  EXPECT_EQ(d.payload, Sum(Ramp(1), Ramp(10))) << "flushed without adding the duplicate";
  EXPECT_EQ(d.header().bitmap0, 0b11u);
  EXPECT_FALSE(d.header().edge);
  EXPECT_TRUE(d.header().resend);
  EXPECT_TRUE(State(kAgg).is_free());
  EXPECT_EQ(pipeline().counters().duplicates, 1u);
  EXPECT_EQ(pipeline().counters().flushed, 1u);
}

TEST_F(PipelineTest, Rule6_CompletionAtLevel1SetsEdgeAndClearsResend) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3, /*rack=*/2, /*fan_in1=*/4), Ramp(1));
  TestFrame w2 = Frame(Worker(kJobA, kSeq, kAgg, 2, 3, 2, 4), Ramp(-7));
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 1, 3, 2, 4);
  h.resend = true;  // the last contribution is a retransmission
  TestFrame w1 = Frame(h, Ramp(100));
  EXPECT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  EXPECT_EQ(SendVerdict(w2), Verdict::kAbsorbed);
  EXPECT_EQ(SendVerdict(w1), Verdict::kToPs);
  Decoded d = Decode(w1);
  EXPECT_EQ(d.payload, Sum(Sum(Ramp(1), Ramp(-7)), Ramp(100)));
  EXPECT_EQ(d.header().bitmap0, 0b111u);
  EXPECT_EQ(d.header().bitmap1, 0b100u) << "still names the rack";
  EXPECT_TRUE(d.header().edge);
  EXPECT_FALSE(d.header().resend) << "the rack is whole again";
  EXPECT_FALSE(d.header().collision);
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
  EXPECT_EQ(pipeline().counters().completed, 1u);
  EXPECT_EQ(pipeline().counters().aggregated, 3u);
}

TEST_F(PipelineTest, Rule6_Level2Completion) {
  PipelineConfig c = BaseConfig();
  c.jobs = {{.job = kJobA, .levels = JobLevels::kLevel2, .multicast_group = kGroupA}};
  Build(c);
  TestFrame r0 = Frame(Rack(kJobA, kSeq, kAgg, 0, 3, 4), Ramp(1));
  TestFrame r1 = Frame(Rack(kJobA, kSeq, kAgg, 1, 3, 2), Ramp(2));
  AtpHeader h = Rack(kJobA, kSeq, kAgg, 2, 3, 5);
  h.resend = true;
  TestFrame r2 = Frame(h, Ramp(3));
  EXPECT_EQ(SendVerdict(r0), Verdict::kAbsorbed);
  EXPECT_EQ(State(kAgg).level, AggregationLevel::kLevel2);
  EXPECT_EQ(State(kAgg).fan_in, 3);
  EXPECT_EQ(SendVerdict(r1), Verdict::kAbsorbed);
  EXPECT_EQ(SendVerdict(r2), Verdict::kToPs);
  Decoded d = Decode(r2);
  EXPECT_EQ(d.payload, Sum(Sum(Ramp(1), Ramp(2)), Ramp(3)));
  EXPECT_EQ(d.header().bitmap1, 0b111u) << "bitmap1 names every rack";
  EXPECT_TRUE(d.header().edge);
  EXPECT_TRUE(d.header().resend) << "level 2 leaves resend as it was";
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
}

TEST_F(PipelineTest, Rule6_PartialFlushOnResend) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(w0, kT0), Verdict::kAbsorbed);
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 2, 3);
  h.resend = true;
  h.ecn = true;
  TestFrame w2 = Frame(h, Ramp(20));
  EXPECT_EQ(SendVerdict(w2), Verdict::kToPs);
  Decoded d = Decode(w2);
  EXPECT_EQ(d.payload, Sum(Ramp(1), Ramp(20)));
  EXPECT_EQ(d.header().bitmap0, 0b101u);
  EXPECT_FALSE(d.header().edge) << "a partial result stays at its level";
  EXPECT_TRUE(d.header().resend);
  EXPECT_TRUE(d.header().ecn);
  EXPECT_TRUE(State(kAgg).is_free());
  EXPECT_EQ(pipeline().counters().flushed, 1u);
  EXPECT_EQ(pipeline().counters().completed, 0u);
}

TEST_F(PipelineTest, Rule6_SaturatingAdd) {
  // Workers send only values strictly inside the int32 range; sums that leave
  // it saturate.
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  wire::Payload a{}, b{}, c{};
  for (size_t i = 0; i < a.size(); ++i) {
    switch (i % 4) {
      case 0:  // saturates high
        a[i] = static_cast<uint32_t>(kMax - 1);
        b[i] = 5;
        c[i] = 7;
        break;
      case 1:  // saturates low
        a[i] = static_cast<uint32_t>(kMin + 1);
        b[i] = static_cast<uint32_t>(-5);
        c[i] = static_cast<uint32_t>(-1);
        break;
      case 2:  // exact
        a[i] = static_cast<uint32_t>(-1000);
        b[i] = 999;
        c[i] = 1;
        break;
      default:  // exact, through large values of both signs
        a[i] = static_cast<uint32_t>(kMax - 1);
        b[i] = static_cast<uint32_t>(kMin + 1);
        c[i] = static_cast<uint32_t>(kMax - 1);
        break;
    }
  }
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), a);
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 3), b);
  TestFrame w2 = Frame(Worker(kJobA, kSeq, kAgg, 2, 3), c);
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  ASSERT_EQ(SendVerdict(w1), Verdict::kAbsorbed);
  ASSERT_EQ(SendVerdict(w2), Verdict::kToPs);
  const wire::Payload result = Decode(w2).payload;
  for (size_t i = 0; i < result.size(); ++i) {
    const int32_t v = static_cast<int32_t>(result[i]);
    switch (i % 4) {
      case 0:
        ASSERT_EQ(v, kMax) << i;
        break;
      case 1:
        ASSERT_EQ(v, kMin) << i;
        break;
      case 2:
        ASSERT_EQ(v, 0) << i;
        break;
      default:
        ASSERT_EQ(v, kMax - 2) << i;
        break;
    }
  }
}

// Rule 6 with invariant 1: a bound in a sum means "overflowed" (workers never
// send one), so once a lane reaches a bound no later contribution may bring it
// back into range, and a contribution carrying a bound (a partial sum that
// saturated upstream) makes the lane that bound. Otherwise the PS would take
// an overflowed sum for an exact one.
// Run once per value kernel: the pipeline must behave the same with each.
class StickyTest : public PipelineTest, public ::testing::WithParamInterface<ValueKernel> {};

TEST_P(StickyTest, Rule6_SaturationIsSticky) {
  const ValueKernel kernel = GetParam();
  if ((kernel == ValueKernel::kAvx2 && !CpuHasAvx2()) ||
      (kernel == ValueKernel::kAvx512 && !CpuHasAvx512())) {
    GTEST_SKIP() << ValueKernelName(kernel) << " not supported on this CPU";
  }
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  PipelineConfig config = BaseConfig();
  config.kernel = kernel;
  Build(config);
  // Level 1, 4 workers: lanes overflow with the second contribution, then
  // the third and fourth pull them back (or push the other way).
  wire::Payload w[4]{};
  for (size_t i = 0; i < w[0].size(); ++i) {
    const bool high = i % 2 == 0;
    w[0][i] = static_cast<uint32_t>(high ? kMax - 10 : kMin + 10);
    w[1][i] = static_cast<uint32_t>(high ? 100 : -100);           // overflows
    w[2][i] = static_cast<uint32_t>(high ? -1000 : 1000);         // would undo it
    w[3][i] = static_cast<uint32_t>(high ? kMin + 1 : kMax - 1);  // far the other way
  }
  std::vector<TestFrame> frames;
  for (int k = 0; k < 4; ++k) frames.push_back(Frame(Worker(kJobA, kSeq, kAgg, k, 4), w[k]));
  for (int k = 0; k < 3; ++k) ASSERT_EQ(SendVerdict(frames[k]), Verdict::kAbsorbed);
  ASSERT_EQ(SendVerdict(frames[3]), Verdict::kToPs);
  const wire::Payload sum = Decode(frames[3]).payload;
  for (size_t i = 0; i < sum.size(); ++i) {
    ASSERT_EQ(static_cast<int32_t>(sum[i]), i % 2 == 0 ? kMax : kMin) << "lane " << i;
  }

  // Level 2: rack 0's result saturated at its level-1 switch; rack 1's is
  // ordinary. The bound it carries must survive, whatever order they arrive in.
  config.jobs[0].levels = JobLevels::kLevel2;
  for (int order = 0; order < 2; ++order) {
    Build(config);
    wire::Payload saturated{}, ordinary{};
    for (size_t i = 0; i < saturated.size(); ++i) {
      saturated[i] = static_cast<uint32_t>(i % 3 == 0 ? kMax : i % 3 == 1 ? kMin : 5);
      ordinary[i] = static_cast<uint32_t>(i % 2 == 0 ? -7 : 7);
    }
    TestFrame r0 = Frame(Rack(kJobA, kSeq, kAgg, 0, 2), saturated);
    TestFrame r1 = Frame(Rack(kJobA, kSeq, kAgg, 1, 2), ordinary);
    TestFrame& first = order == 0 ? r0 : r1;
    TestFrame& second = order == 0 ? r1 : r0;
    ASSERT_EQ(SendVerdict(first), Verdict::kAbsorbed);
    ASSERT_EQ(SendVerdict(second), Verdict::kToPs);
    const wire::Payload result = Decode(second).payload;
    for (size_t i = 0; i < result.size(); ++i) {
      const int32_t expected = i % 3 == 0   ? kMax
                               : i % 3 == 1 ? kMin
                                            : 5 + static_cast<int32_t>(ordinary[i]);
      ASSERT_EQ(static_cast<int32_t>(result[i]), expected) << "order " << order << " lane " << i;
    }
  }

  // Opposite bounds meet: the aggregator's bound stays (either bound tells the
  // PS "overflowed"; this one is defined so every kernel agrees).
  Build(config);
  wire::Payload all_max{}, all_min{};
  all_max.fill(static_cast<uint32_t>(kMax));
  all_min.fill(static_cast<uint32_t>(kMin));
  TestFrame hi = Frame(Rack(kJobA, kSeq, kAgg, 0, 2), all_max);
  TestFrame lo = Frame(Rack(kJobA, kSeq, kAgg, 1, 2), all_min);
  ASSERT_EQ(SendVerdict(hi), Verdict::kAbsorbed);
  ASSERT_EQ(SendVerdict(lo), Verdict::kToPs);
  EXPECT_EQ(Decode(lo).payload, all_max);
}

INSTANTIATE_TEST_SUITE_P(Kernels, StickyTest,
                         ::testing::Values(ValueKernel::kScalar, ValueKernel::kAvx2,
                                           ValueKernel::kAvx512),
                         [](const ::testing::TestParamInfo<ValueKernel>& param_info) {
                           return std::string(ValueKernelName(param_info.param));
                         });

TEST_F(PipelineTest, Rule6_AddRefreshesTimestampAndOrsEcn) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(w0, kT0), Verdict::kAbsorbed);
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 1, 3);
  h.ecn = true;
  TestFrame w1 = Frame(h, Ramp(1));
  ASSERT_EQ(SendVerdict(w1, kT0 + TimeDelta::FromMicroseconds(40)), Verdict::kAbsorbed);
  EXPECT_EQ(State(kAgg).timestamp, kT0 + TimeDelta::FromMicroseconds(40));
  EXPECT_TRUE(State(kAgg).ecn);
  EXPECT_EQ(State(kAgg).counter, 2);
  EXPECT_EQ(State(kAgg).bitmap, 0b11u);
}

// --- Rule 7: orphans -----------------------------------------------------------------

TEST_F(PipelineTest, Rule7_OrphansReleasedAfterTimeout) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(w0, kT0), Verdict::kAbsorbed);
  EXPECT_EQ(pipeline().ScanOrphans(kT0 + kOrphanTimeout, 64), 0u) << "not longer than T yet";
  EXPECT_EQ(pipeline().aggregators_in_use(), 1u);
  EXPECT_EQ(pipeline().ScanOrphans(kT0 + kOrphanTimeout + TimeDelta::FromNanoseconds(1), 64), 1u);
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
  EXPECT_TRUE(State(kAgg).is_free());
  EXPECT_EQ(pipeline().counters().orphaned, 1u);

  // The late worker then finds a free aggregator and starts over.
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(2));
  EXPECT_EQ(SendVerdict(w1, kT0 + kOrphanTimeout * 2), Verdict::kAbsorbed);
}

TEST_F(PipelineTest, Rule7_AddKeepsAggregatorAlive) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3), Ramp(1));
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(w0, kT0), Verdict::kAbsorbed);
  const TimePoint t1 = kT0 + kOrphanTimeout / 2;
  ASSERT_EQ(SendVerdict(w1, t1), Verdict::kAbsorbed);
  EXPECT_EQ(pipeline().ScanOrphans(kT0 + kOrphanTimeout + TimeDelta::FromNanoseconds(1), 64), 0u);
  EXPECT_EQ(pipeline().ScanOrphans(t1 + kOrphanTimeout + TimeDelta::FromNanoseconds(1), 64), 1u);
}

TEST_F(PipelineTest, Rule7_ScanIsIncrementalAndWraps) {
  for (uint16_t agg : {uint16_t{3}, uint16_t{40}}) {
    TestFrame f = Frame(Worker(kJobA, agg, agg, 0, 2), Ramp(1));
    ASSERT_EQ(SendVerdict(f, kT0), Verdict::kAbsorbed);
  }
  const TimePoint late = kT0 + kOrphanTimeout * 2;
  EXPECT_EQ(pipeline().ScanOrphans(late, 32), 1u) << "aggregators 0..31";
  EXPECT_FALSE(State(40).is_free());
  EXPECT_EQ(pipeline().ScanOrphans(late, 32), 1u) << "aggregators 32..63";
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);

  // A budget beyond the array is one full pass, wherever the cursor is.
  TestFrame f = Frame(Worker(kJobA, 20, 20, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(f, kT0), Verdict::kAbsorbed);
  EXPECT_EQ(pipeline().ScanOrphans(late, 10), 0u) << "aggregators 0..9";
  EXPECT_EQ(pipeline().ScanOrphans(late, 1000), 1u);
}

TEST_F(PipelineTest, Rule7_ProcessScansSomeAggregatorsEveryPacket) {
  PipelineConfig c = BaseConfig();
  c.orphan_scan_per_packet = 4;
  Build(c);
  TestFrame w0 = Frame(Worker(kJobA, kSeq, 62, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(w0, kT0), Verdict::kAbsorbed);  // scanned 0..3
  const TimePoint late = kT0 + kOrphanTimeout * 2;
  // Non-ATP traffic alone keeps the scan going: 15 more packets reach 60..63.
  TestFrame other{std::vector<uint8_t>(60, 0)};
  for (int k = 0; k < 14; ++k) {
    EXPECT_EQ(SendVerdict(other, late), Verdict::kForward);
  }
  EXPECT_FALSE(State(62).is_free());
  EXPECT_EQ(SendVerdict(other, late), Verdict::kForward);
  EXPECT_TRUE(State(62).is_free());
  EXPECT_EQ(pipeline().counters().orphaned, 1u);
}

}  // namespace
}  // namespace atp::switch_emulator::testing
