// What surrounds the numbered rules: malformed and foreign frames, job
// isolation, static partitions, one switch at both levels, lost state,
// forward-only mode, and configuration errors.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "tests/unit/switch/pipeline_fixture.h"
#include "tests/unit/switch/switch_test_util.h"

namespace atp::switch_emulator::testing {
namespace {

using wire::AtpHeader;
using wire::DecodeError;

constexpr uint32_t kSeq = 7;
constexpr uint16_t kAgg = 5;

void StoreBig16(TestFrame& f, size_t offset, uint16_t v) {
  f.bytes[offset] = static_cast<uint8_t>(v >> 8);
  f.bytes[offset + 1] = static_cast<uint8_t>(v);
}
void StoreBig32(TestFrame& f, size_t offset, uint32_t v) {
  StoreBig16(f, offset, static_cast<uint16_t>(v >> 16));
  StoreBig16(f, offset + 2, static_cast<uint16_t>(v));
}
constexpr size_t kIp = wire::kIpv4Offset;
constexpr size_t kUdp = wire::kUdpOffset;
constexpr size_t kAtp = wire::kAtpOffset;

// --- Malformed ATP frames ----------------------------------------------------------

struct Corruption {
  std::string name;
  DecodeError expected;
  void (*apply)(TestFrame&);
};

// The frame every corruption starts from: worker 1's resend for the aggregator
// worker 0 claimed. Valid, it would flush that aggregator.
TestFrame ResendOfWorker1() {
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 1, 3, /*rack=*/0, /*fan_in1=*/2);
  h.resend = true;
  return Frame(h, Ramp(11));
}

const Corruption kCorruptions[] = {
    {"ShortFrame", DecodeError::kShortFrame, [](TestFrame& f) { f.bytes.pop_back(); }},
    {"LongFrame", DecodeError::kLongFrame, [](TestFrame& f) { f.bytes.push_back(0); }},
    {"BadIpv4Checksum", DecodeError::kBadIpv4Checksum,
     [](TestFrame& f) { f.bytes[kIp + 11] ^= 1; }},
    {"Fragmented", DecodeError::kBadIpv4Header,
     [](TestFrame& f) {
       f.bytes[kIp + 6] |= 0x20;  // more fragments
       FixIpv4Checksum(f);
     }},
    {"BadIpv4TotalLength", DecodeError::kBadIpv4TotalLength,
     [](TestFrame& f) {
       StoreBig16(f, kIp + 2, 291);
       FixIpv4Checksum(f);
     }},
    {"BadUdpLength", DecodeError::kBadUdpLength,
     [](TestFrame& f) { StoreBig16(f, kUdp + 4, 271); }},
    {"BadUdpPort", DecodeError::kBadUdpPort,
     [](TestFrame& f) { StoreBig16(f, kUdp, wire::kDefaultBasePort + 1); }},
    {"BadTos", DecodeError::kBadTos,
     [](TestFrame& f) {
       f.bytes[kIp + 1] = 0x00;
       FixIpv4Checksum(f);
     }},
    {"JobZero", DecodeError::kJobZero, [](TestFrame& f) { f.bytes[kAtp] = 0; }},
    {"Bitmap0BeyondFanIn", DecodeError::kBitmap0BeyondFanIn,
     [](TestFrame& f) { StoreBig32(f, kAtp + 4, 0b1010); }},
    {"Bitmap1BeyondFanIn", DecodeError::kBitmap1BeyondFanIn,
     [](TestFrame& f) { StoreBig32(f, kAtp + 8, 0b100); }},
    {"EmptyBitmap0", DecodeError::kEmptyBitmap, [](TestFrame& f) { StoreBig32(f, kAtp + 4, 0); }},
    {"EmptyBitmap1", DecodeError::kEmptyBitmap, [](TestFrame& f) { StoreBig32(f, kAtp + 8, 0); }},
    {"AmbiguousRack", DecodeError::kAmbiguousRack,
     [](TestFrame& f) { StoreBig32(f, kAtp + 8, 0b11); }},
};

class MalformedTest : public PipelineTest, public ::testing::WithParamInterface<Corruption> {};

TEST_P(MalformedTest, MalformedFrameNeverTouchesAggregators) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 3, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  const AggregatorSnapshot snap = AggregatorSnapshot::Of(pipeline());

  TestFrame bad = ResendOfWorker1();
  GetParam().apply(bad);
  ASSERT_EQ(wire::ValidateFrame(bad.span(), wire::kDefaultBasePort), GetParam().expected)
      << "the corruption does not produce the error it is named after";
  const TestFrame before = bad;
  // Congested egress and a later time: neither ECN nor the scan may react.
  EXPECT_EQ(SendVerdict(bad, kT0 + kOrphanTimeout / 2, kEcnThreshold + 1), Verdict::kMalformed);
  EXPECT_EQ(bad.bytes, before.bytes) << "a malformed frame is never written";
  EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), snap);
  const PipelineCounters& c = pipeline().counters();
  EXPECT_EQ(c.malformed, 1u);
  EXPECT_EQ(c.malformed_by_reason[static_cast<size_t>(GetParam().expected)], 1u);
  EXPECT_EQ(c.ecn_marked, 0u);

  // The same frame, intact, does touch it: the corruption alone made the difference.
  TestFrame good = ResendOfWorker1();
  EXPECT_EQ(SendVerdict(good), Verdict::kToPs);
  EXPECT_EQ(pipeline().counters().flushed, 1u);
}

INSTANTIATE_TEST_SUITE_P(EveryKind, MalformedTest, ::testing::ValuesIn(kCorruptions),
                         [](const ::testing::TestParamInfo<Corruption>& param_info) {
                           return param_info.param.name;
                         });

// --- Frames this switch does not aggregate --------------------------------------------

TEST_F(PipelineTest, NonAtpFramesForwardedUntouched) {
  TestFrame arp{std::vector<uint8_t>(60, 0)};
  arp.bytes[12] = 0x08;
  arp.bytes[13] = 0x06;
  TestFrame dns = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  StoreBig16(dns, kUdp, 53);
  StoreBig16(dns, kUdp + 2, 53);
  TestFrame empty;
  for (TestFrame* f : {&arp, &dns, &empty}) {
    const TestFrame before = *f;
    EXPECT_EQ(Send(*f, kT0, kEcnThreshold + 1), (Decision{Verdict::kForward}));
    EXPECT_EQ(f->bytes, before.bytes);
  }
  EXPECT_EQ(pipeline().counters().not_atp, 3u);
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
}

TEST_F(PipelineTest, UnknownJobForwardedUntouched) {
  TestFrame f = Frame(Worker(9, kSeq, kAgg, 0, 2), Ramp(1));
  const TestFrame before = f;
  EXPECT_EQ(Send(f, kT0, kEcnThreshold + 1), (Decision{Verdict::kForward}));
  EXPECT_EQ(f.bytes, before.bytes) << "not even ECN: the switch was not told about job 9";
  TestFrame ack = Frame(Ack(9, kSeq, kAgg), Ramp(0));
  EXPECT_EQ(Send(ack), (Decision{Verdict::kForward}));
  EXPECT_EQ(pipeline().counters().not_aggregated, 2u);
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
}

TEST_F(PipelineTest, WrongLevelGoesToPsUntouched) {
  PipelineConfig c = BaseConfig();
  c.jobs = {{.job = kJobA, .levels = JobLevels::kLevel1, .multicast_group = kGroupA},
            {.job = kJobB, .levels = JobLevels::kLevel2, .multicast_group = kGroupB}};
  Build(c);
  TestFrame a_level2 = Frame(Rack(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  TestFrame b_level1 = Frame(Worker(kJobB, kSeq, kAgg, 0, 2), Ramp(1));
  for (TestFrame* f : {&a_level2, &b_level1}) {
    const TestFrame before = *f;
    EXPECT_EQ(SendVerdict(*f), Verdict::kToPs);
    EXPECT_EQ(f->bytes, before.bytes);
  }
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
  EXPECT_EQ(pipeline().counters().not_aggregated, 2u);
}

// --- Isolation and partitions ------------------------------------------------------------

TEST_F(PipelineTest, JobIsolation_PacketsOfJobBNeverChangeJobAsAggregator) {
  TestFrame a0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(3));
  ASSERT_EQ(SendVerdict(a0), Verdict::kAbsorbed);
  const AggregatorSnapshot snap = AggregatorSnapshot::Of(pipeline());

  // Job B, same seq, same index, every kind of packet.
  std::vector<AtpHeader> b_packets;
  b_packets.push_back(Worker(kJobB, kSeq, kAgg, 1, 2));  // would complete A's if it matched
  b_packets.push_back(Worker(kJobB, kSeq, kAgg, 0, 2));  // same bitmap as A's contribution
  AtpHeader resend = Worker(kJobB, kSeq, kAgg, 1, 2);
  resend.resend = true;  // would flush A's if it matched
  b_packets.push_back(resend);
  b_packets.push_back(Ack(kJobB, kSeq, kAgg));  // would clear A's if it matched
  AtpHeader fp = Worker(kJobB, kSeq, kAgg, 1, 2);
  fp.fp = true;
  b_packets.push_back(fp);
  for (const AtpHeader& h : b_packets) {
    TestFrame f = Frame(h, Ramp(1000));
    const Verdict v = SendVerdict(f, kT0 + TimeDelta::FromMicroseconds(1), kEcnThreshold + 1);
    EXPECT_NE(v, Verdict::kAbsorbed);
    EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), snap);
  }
  TestFrame a1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(4));
  EXPECT_EQ(SendVerdict(a1), Verdict::kToPs);
  EXPECT_EQ(Decode(a1).payload, Sum(Ramp(3), Ramp(4)));
  EXPECT_FALSE(Decode(a1).header().ecn) << "job B's congestion never reaches job A's result";
}

TEST_F(PipelineTest, StaticPartitionConfinesJobToItsSlice) {
  PipelineConfig c = BaseConfig();
  c.partition = PartitionMode::kStatic;
  c.jobs = {{.job = kJobA,
             .levels = JobLevels::kLevel1,
             .multicast_group = kGroupA,
             .slice = {.first = 0, .count = 16}},
            {.job = kJobB,
             .levels = JobLevels::kLevel1,
             .multicast_group = kGroupB,
             .slice = {.first = 16, .count = 32}}};
  Build(c);
  // index -> first + index % count.
  struct Case {
    uint8_t job;
    uint16_t index;
    size_t aggregator;
  };
  for (const Case& k : {Case{kJobA, 5, 5}, Case{kJobA, 20, 4}, Case{kJobB, 5, 21},
                        Case{kJobB, 40, 24}, Case{kJobB, 65535, 16 + 65535 % 32}}) {
    TestFrame f = Frame(Worker(k.job, k.index, k.index, 0, 2), Ramp(1));
    EXPECT_EQ(SendVerdict(f), Verdict::kAbsorbed) << int{k.job} << "/" << k.index;
    EXPECT_EQ(State(k.aggregator).job(), k.job) << int{k.job} << "/" << k.index;
    EXPECT_EQ(State(k.aggregator).seq(), k.index);
  }
  Build(c);
  // Many indices: job A stays inside [0, 16), job B inside [16, 48), and the
  // same index used by both never collides.
  for (uint32_t index = 0; index < 2000; index += 7) {
    for (uint8_t job : {kJobA, kJobB}) {
      TestFrame f = Frame(Worker(job, index, static_cast<uint16_t>(index), 0, 2), Ramp(1));
      Send(f);
    }
  }
  EXPECT_EQ(pipeline().counters().claimed + pipeline().counters().collisions, 2u * 286);
  for (size_t i = 0; i < 64; ++i) {
    const AggregatorState& s = State(i);
    if (i < 16) {
      EXPECT_EQ(s.job(), kJobA) << i;
    } else if (i < 48) {
      EXPECT_EQ(s.job(), kJobB) << i;
    } else {
      EXPECT_TRUE(s.is_free()) << i;
    }
  }
}

// --- One switch at both levels -------------------------------------------------------------

TEST_F(PipelineTest, SameSwitchBothLevels_Level1ResultFedIntoLevel2) {
  PipelineConfig c = BaseConfig();
  c.jobs = {{.job = kJobA, .levels = JobLevels::kBoth, .multicast_group = kGroupA}};
  Build(c);
  // Two racks; rack 0 (two workers) hangs off this switch, rack 1's result
  // arrives from its own level-1 switch.
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2, 0, 2), Ramp(1));
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2, 0, 2), Ramp(2));
  TestFrame r1 = Frame(Rack(kJobA, kSeq, kAgg, 1, 2, 3), Ramp(30));
  EXPECT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  EXPECT_EQ(SendVerdict(w1), Verdict::kAbsorbed) << "rack 0 complete, absorbed by level 2";
  EXPECT_EQ(State(kAgg).level, AggregationLevel::kLevel2);
  EXPECT_EQ(State(kAgg).bitmap, 0b01u);
  EXPECT_EQ(State(kAgg).fan_in, 2);
  EXPECT_EQ(Values(kAgg), Sum(Ramp(1), Ramp(2)));
  EXPECT_EQ(pipeline().counters().fed_to_level2, 1u);

  EXPECT_EQ(SendVerdict(r1), Verdict::kToPs);
  Decoded d = Decode(r1);
  EXPECT_EQ(d.payload, Sum(Sum(Ramp(1), Ramp(2)), Ramp(30)));
  EXPECT_EQ(d.header().bitmap1, 0b11u);
  EXPECT_TRUE(d.header().edge);
  EXPECT_EQ(pipeline().counters().completed, 2u);
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
}

TEST_F(PipelineTest, SameSwitchBothLevels_SingleRackCompletesBothLevelsAtOnce) {
  PipelineConfig c = BaseConfig();
  c.jobs = {{.job = kJobA, .levels = JobLevels::kBoth, .multicast_group = kGroupA}};
  Build(c);
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 1, 2);
  h.resend = true;
  TestFrame w1 = Frame(h, Ramp(2));
  EXPECT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  EXPECT_EQ(SendVerdict(w1), Verdict::kToPs);
  Decoded d = Decode(w1);
  EXPECT_EQ(d.payload, Sum(Ramp(1), Ramp(2)));
  EXPECT_EQ(d.header().bitmap0, 0b11u);
  EXPECT_EQ(d.header().bitmap1, 0b1u);
  EXPECT_TRUE(d.header().edge);
  EXPECT_FALSE(d.header().resend);
  EXPECT_EQ(pipeline().counters().completed, 2u);
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
}

// --- Lost state, forward-only ----------------------------------------------------------------

TEST_F(PipelineTest, WipeStateForgetsEveryAggregator) {
  TestFrame a = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  TestFrame b = Frame(Worker(kJobB, kSeq, 9, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(a), Verdict::kAbsorbed);
  ASSERT_EQ(SendVerdict(b), Verdict::kAbsorbed);
  pipeline().WipeState();
  EXPECT_EQ(pipeline().aggregators_in_use(), 0u);
  EXPECT_TRUE(State(kAgg).is_free());
  EXPECT_TRUE(State(9).is_free());
  EXPECT_EQ(pipeline().counters().wipes, 1u);

  // The rest of the seq goes to the PS, which the workers' resends complete.
  AtpHeader h = Worker(kJobA, kSeq, kAgg, 1, 2);
  h.resend = true;
  TestFrame resend = Frame(h, Ramp(2));
  EXPECT_EQ(SendVerdict(resend), Verdict::kToPs);
  TestFrame fresh = Frame(Worker(kJobA, kSeq + 1, kAgg, 0, 2), Ramp(1));
  EXPECT_EQ(SendVerdict(fresh), Verdict::kAbsorbed) << "the switch aggregates again at once";
  EXPECT_EQ(pipeline().aggregators_in_use(), 1u);
}

TEST_F(PipelineTest, ForwardOnlyNeverTouchesAggregators) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  pipeline().SetMode(PipelineMode::kForwardOnly);
  EXPECT_EQ(pipeline().mode(), PipelineMode::kForwardOnly);
  const AggregatorSnapshot snap = AggregatorSnapshot::Of(pipeline());

  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(2));
  const TestFrame w1_before = w1;
  EXPECT_EQ(SendVerdict(w1), Verdict::kToPs);
  EXPECT_EQ(w1.bytes, w1_before.bytes);
  TestFrame other = Frame(Worker(kJobA, kSeq + 1, kAgg + 1, 0, 2), Ramp(2));
  EXPECT_EQ(SendVerdict(other), Verdict::kToPs);
  TestFrame ack = Frame(Ack(kJobA, kSeq, kAgg), Ramp(0));
  EXPECT_EQ(Send(ack), (Decision{Verdict::kMulticast, kGroupA}));
  EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), snap);
  EXPECT_EQ(pipeline().counters().not_aggregated, 2u);

  TestFrame congested = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(2));
  EXPECT_EQ(SendVerdict(congested, kT0, kEcnThreshold + 1), Verdict::kToPs);
  EXPECT_TRUE(Decode(congested).header().ecn) << "congestion marking is not aggregation";

  pipeline().SetMode(PipelineMode::kAggregating);
  TestFrame w1_again = w1_before;
  EXPECT_EQ(SendVerdict(w1_again), Verdict::kToPs);
  EXPECT_EQ(Decode(w1_again).payload, Sum(Ramp(1), Ramp(2)));
}

TEST_F(PipelineTest, PrefetchAggregatorIsSafeOnAnyFrameAndChangesNothing) {
  TestFrame w0 = Frame(Worker(kJobA, kSeq, kAgg, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(w0), Verdict::kAbsorbed);
  const AggregatorSnapshot snap = AggregatorSnapshot::Of(pipeline());
  const PipelineCounters counters = pipeline().counters();
  TestFrame w1 = Frame(Worker(kJobA, kSeq, kAgg, 1, 2), Ramp(1));
  TestFrame unknown = Frame(Worker(9, kSeq, kAgg, 1, 2), Ramp(1));
  TestFrame tiny{std::vector<uint8_t>(wire::kAtpOffset + 15, 0xFF)};
  TestFrame empty;
  for (TestFrame* f : {&w1, &unknown, &tiny, &empty}) pipeline().PrefetchAggregator(f->span());
  EXPECT_EQ(AggregatorSnapshot::Of(pipeline()), snap);
  EXPECT_EQ(pipeline().counters().packets, counters.packets);
  EXPECT_EQ(SendVerdict(w1), Verdict::kToPs);
}

// --- Configuration -----------------------------------------------------------------------

void ExpectConfigError(const PipelineConfig& config, const std::string& field) {
  absl::StatusOr<SwitchPipeline> p = SwitchPipeline::Create(config);
  ASSERT_FALSE(p.ok()) << field;
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  EXPECT_NE(p.status().message().find(field), std::string::npos) << p.status();
}

TEST_F(PipelineTest, ConfigValidationNamesTheField) {
  PipelineConfig c = BaseConfig();
  c.aggregator_count = 0;
  ExpectConfigError(c, "PipelineConfig.aggregator_count");
  c.aggregator_count = kMaxAggregators + 1;
  ExpectConfigError(c, "PipelineConfig.aggregator_count");

  c = BaseConfig();
  c.orphan_timeout = TimeDelta::Zero();
  ExpectConfigError(c, "PipelineConfig.orphan_timeout");
  c.orphan_timeout = TimeDelta::FromNanoseconds(-1);
  ExpectConfigError(c, "PipelineConfig.orphan_timeout");

  c = BaseConfig();
  c.base_port = 65530;
  ExpectConfigError(c, "PipelineConfig.base_port");

  c = BaseConfig();
  c.jobs[0].job = 0;
  ExpectConfigError(c, "PipelineConfig.jobs[0].job");
  c = BaseConfig();
  c.jobs[1].job = kJobA;
  ExpectConfigError(c, "PipelineConfig.jobs[1].job");
  c = BaseConfig();
  c.jobs[0].levels = static_cast<JobLevels>(0);
  ExpectConfigError(c, "PipelineConfig.jobs[0].levels");
  c.jobs[0].levels = static_cast<JobLevels>(4);
  ExpectConfigError(c, "PipelineConfig.jobs[0].levels");

  c = BaseConfig();
  c.jobs[0].slice = {.first = 0, .count = 8};
  ExpectConfigError(c, "PipelineConfig.jobs[0].slice");  // dynamic mode takes no slice

  c = BaseConfig();
  c.partition = PartitionMode::kStatic;
  c.jobs[0].slice = {.first = 0, .count = 32};
  ExpectConfigError(c, "PipelineConfig.jobs[1].slice");  // empty
  c.jobs[1].slice = {.first = 32, .count = 33};
  ExpectConfigError(c, "PipelineConfig.jobs[1].slice");  // beyond the array
  c.jobs[1].slice = {.first = 31, .count = 2};
  ExpectConfigError(c, "overlaps jobs[0].slice");
  c.jobs[1].slice = {.first = 32, .count = 32};
  EXPECT_TRUE(SwitchPipeline::Create(c).ok()) << "adjacent slices do not overlap";

  c = BaseConfig();
  c.jobs.clear();
  EXPECT_TRUE(SwitchPipeline::Create(c).ok()) << "a switch with no jobs forwards everything";
}

}  // namespace
}  // namespace atp::switch_emulator::testing
