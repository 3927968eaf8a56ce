// A random packet stream through pipelines that differ only in their value
// kernels (scalar against AVX2, and against AVX-512): every decision, every rewritten frame and
// every aggregator must come out identical. Also checks invariants that must hold after any packet:
// the in-use count matches the array, and valid frames stay valid.
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "tests/unit/switch/pipeline_fixture.h"
#include "tests/unit/switch/switch_test_util.h"

namespace atp::switch_emulator::testing {
namespace {

PipelineConfig DifferentialConfig(ValueKernel kernel) {
  PipelineConfig c;
  c.aggregator_count = 16;  // small: collisions, duplicates and flushes are frequent
  c.orphan_timeout = TimeDelta::FromMicroseconds(50);
  c.ecn_threshold = 5;
  c.orphan_scan_per_packet = 1;
  c.kernel = kernel;
  c.jobs = {{.job = 1, .levels = JobLevels::kBoth, .multicast_group = 10},
            {.job = 2, .levels = JobLevels::kLevel1, .multicast_group = 20},
            {.job = 3, .levels = JobLevels::kLevel2, .multicast_group = 30}};
  return c;
}

// RandomPacket: any header the wire allows for jobs 1..4, with values that
// saturate now and then.
TestFrame RandomPacket(std::mt19937& rng) {
  wire::AtpHeader h;
  h.job = static_cast<uint8_t>(1 + rng() % 4);
  h.seq = rng() % 3;
  h.aggregator = static_cast<uint16_t>(rng() % 24);
  // Each job has its shape (a few packets disagree); most level-1 traffic
  // comes from rack 0, as at a ToR.
  const bool odd_shape = rng() % 50 == 0;
  h.fan_in0 = static_cast<uint8_t>(odd_shape ? 1 + rng() % 4 : 2 + h.job % 3);
  h.fan_in1 = static_cast<uint8_t>(odd_shape ? 1 + rng() % 3 : 1 + h.job % 3);
  h.edge = rng() % 3 == 0;
  h.resend = rng() % 5 == 0;
  h.ecn = rng() % 7 == 0;
  h.ack = rng() % 9 == 0;
  h.fp = !h.ack && rng() % 15 == 0;
  const uint32_t all0 = (1u << h.fan_in0) - 1;
  const uint32_t all1 = (1u << h.fan_in1) - 1;
  if (h.edge) {
    h.bitmap0 = all0;
    h.bitmap1 = (rng() & all1) | (1u << (rng() % h.fan_in1));
  } else {
    h.bitmap0 = (rng() % 4 == 0) ? ((rng() & all0) | 1u) : (1u << (rng() % h.fan_in0));
    h.bitmap1 = rng() % 8 == 0 ? 1u << (rng() % h.fan_in1) : 1u;
  }
  // A third of the fragments hold only small values (the vector adds' fast
  // path), a third also values around the magnitude 2^30 where that path ends,
  // a third also values at and near the bounds.
  wire::Payload p;
  const uint32_t mix = rng() % 3;
  for (uint32_t& v : p) {
    const uint32_t small = static_cast<uint32_t>(rng() % 2001) - 1000;
    const uint32_t near_2_30 = (rng() % 2 == 0 ? 1u : ~0u) * ((1u << 30) - 8 + rng() % 16);
    const uint32_t near_bound = 0x7FFFFFF0u + rng() % 32;
    v = mix == 0 || rng() % 4 != 0 ? small : mix == 1 ? near_2_30 : near_bound;
  }
  TestFrame f = Frame(h, p);
  if (rng() % 25 == 0) f.bytes[wire::kIpv4Offset + 10] ^= 0x40;  // now and then, a bad checksum
  if (rng() % 25 == 0) {  // or any header bit flipped (each datapath validates its own way)
    f.bytes[rng() % wire::kPayloadOffset] ^= static_cast<uint8_t>(1u << (rng() % 8));
  }
  return f;
}

class PipelineDifferentialTest : public ::testing::TestWithParam<ValueKernel> {};

TEST_P(PipelineDifferentialTest, VectorAndScalarPipelinesAgreeOnRandomTraffic) {
  if ((GetParam() == ValueKernel::kAvx2 && !CpuHasAvx2()) ||
      (GetParam() == ValueKernel::kAvx512 && !CpuHasAvx512())) {
    GTEST_SKIP() << ValueKernelName(GetParam()) << " not supported on this CPU";
  }
  absl::StatusOr<SwitchPipeline> scalar =
      SwitchPipeline::Create(DifferentialConfig(ValueKernel::kScalar));
  absl::StatusOr<SwitchPipeline> vector = SwitchPipeline::Create(DifferentialConfig(GetParam()));
  ASSERT_TRUE(scalar.ok() && vector.ok());
  ASSERT_EQ(scalar->kernel(), ValueKernel::kScalar);
  ASSERT_EQ(vector->kernel(), GetParam());

  std::mt19937 rng(1234);
  TimePoint now = kT0;
  for (int n = 0; n < 30000; ++n) {
    now += TimeDelta::FromNanoseconds(static_cast<int64_t>(rng() % 3000));
    const uint32_t depth = rng() % 8;
    TestFrame a = RandomPacket(rng);
    TestFrame b = a;
    const bool valid = Decode(a).error == wire::DecodeError::kOk;
    const Decision da = scalar->Process(a.span(), now, depth);
    const Decision db = vector->Process(b.span(), now, depth);
    ASSERT_EQ(da, db) << "packet " << n;
    ASSERT_EQ(a.bytes, b.bytes) << "packet " << n;
    if (valid) {
      ASSERT_EQ(Decode(a).error, wire::DecodeError::kOk) << "packet " << n;
    }
    if (n % 500 == 0) {
      ASSERT_EQ(scalar->ScanOrphans(now, 8), vector->ScanOrphans(now, 8));
    }
  }
  ASSERT_EQ(AggregatorSnapshot::Of(*scalar), AggregatorSnapshot::Of(*vector));

  // The traffic exercised every rule, and the books balance.
  const PipelineCounters& c = scalar->counters();
  EXPECT_GT(c.claimed, 100u);
  EXPECT_GT(c.completed, 100u);
  EXPECT_GT(c.fed_to_level2, 10u);
  EXPECT_GT(c.collisions, 100u);
  EXPECT_GT(c.duplicates, 100u);
  EXPECT_GT(c.flushed, 30u);
  EXPECT_GT(c.resend_to_ps, 100u);
  EXPECT_GT(c.acks_cleared, 10u);
  EXPECT_GT(c.orphaned, 10u);
  EXPECT_GT(c.malformed, 100u);
  EXPECT_GT(c.not_aggregated, 100u);
  RecordProperty("duplicates", static_cast<int>(c.duplicates));
  RecordProperty("flushed", static_cast<int>(c.flushed));
  size_t in_use = 0;
  for (size_t i = 0; i < scalar->aggregators().size(); ++i) {
    in_use += scalar->aggregators().state(i).is_free() ? 0 : 1;
  }
  EXPECT_EQ(in_use, scalar->aggregators_in_use());
  EXPECT_EQ(c.claimed,
            c.completed + c.flushed + c.orphaned + c.acks_cleared + scalar->aggregators_in_use())
      << "every claimed aggregator is released exactly once";
}

// ProcessBurst is Process frame by frame: the same decisions, frames, state
// and counters, whatever the burst sizes (shorter and longer than the
// prefetch distance), on every datapath.
class BurstTest : public ::testing::TestWithParam<ValueKernel> {};

TEST_P(BurstTest, ProcessBurstEqualsProcessOneByOne) {
  if ((GetParam() == ValueKernel::kAvx2 && !CpuHasAvx2()) ||
      (GetParam() == ValueKernel::kAvx512 && !CpuHasAvx512())) {
    GTEST_SKIP() << ValueKernelName(GetParam()) << " not supported on this CPU";
  }
  // 16 aggregators: bursts run without prefetching; 4096 (1.2 MB): with.
  for (size_t aggregators : {size_t{16}, size_t{4096}}) {
    SCOPED_TRACE(aggregators);
    PipelineConfig config = DifferentialConfig(GetParam());
    config.aggregator_count = aggregators;
    absl::StatusOr<SwitchPipeline> single = SwitchPipeline::Create(config);
    absl::StatusOr<SwitchPipeline> burst = SwitchPipeline::Create(config);
    ASSERT_TRUE(single.ok() && burst.ok());

    std::mt19937 rng(77);
    TimePoint now = kT0;
    for (int round = 0; round < 1000; ++round) {
      now += TimeDelta::FromNanoseconds(static_cast<int64_t>(rng() % 20000));
      const uint32_t depth = rng() % 8;
      const size_t n = rng() % 41;  // 0..40 frames
      std::vector<TestFrame> a;
      for (size_t k = 0; k < n; ++k) a.push_back(RandomPacket(rng));
      if (round % 10 == 0 && n > 0) a[rng() % n].bytes.resize(rng() % 100);  // a short frame
      std::vector<TestFrame> b = a;
      std::vector<Decision> expected;
      for (TestFrame& f : a) expected.push_back(single->Process(f.span(), now, depth));
      std::vector<std::span<uint8_t>> spans;
      for (TestFrame& f : b) spans.push_back(f.span());
      std::vector<Decision> decisions(n);
      burst->ProcessBurst(spans, now, depth, decisions);
      ASSERT_EQ(decisions, expected) << "round " << round;
      for (size_t k = 0; k < n; ++k) ASSERT_EQ(a[k].bytes, b[k].bytes) << "round " << round;
    }
    ASSERT_EQ(AggregatorSnapshot::Of(*single), AggregatorSnapshot::Of(*burst));
    const PipelineCounters& cs = single->counters();
    const PipelineCounters& cb = burst->counters();
    static_assert(sizeof(PipelineCounters) % sizeof(uint64_t) == 0, "no padding to compare");
    EXPECT_EQ(std::memcmp(&cs, &cb, sizeof(PipelineCounters)), 0);
    EXPECT_GT(cs.completed, 100u);
    EXPECT_GT(cs.malformed, 50u);
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, BurstTest,
                         ::testing::Values(ValueKernel::kScalar, ValueKernel::kAvx2,
                                           ValueKernel::kAvx512),
                         [](const ::testing::TestParamInfo<ValueKernel>& param_info) {
                           return std::string(ValueKernelName(param_info.param));
                         });

INSTANTIATE_TEST_SUITE_P(Kernels, PipelineDifferentialTest,
                         ::testing::Values(ValueKernel::kAvx2, ValueKernel::kAvx512),
                         [](const ::testing::TestParamInfo<ValueKernel>& param_info) {
                           return std::string(ValueKernelName(param_info.param));
                         });

}  // namespace
}  // namespace atp::switch_emulator::testing
