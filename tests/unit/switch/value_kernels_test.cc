// The switch's arithmetic: every kernel against a scalar reference, with random
// and extreme values, and the division-free aggregator index mapping.
#include "switch_emulator/pipeline/value_kernels.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "switch_emulator/pipeline/aggregator.h"
#include "switch_emulator/pipeline/job_table.h"

namespace atp::switch_emulator {
namespace {

constexpr size_t kValues = wire::kValuesPerFragment;
constexpr size_t kGuard = 32;  // bytes on each side of the payload that no kernel may touch
constexpr uint8_t kGuardByte = 0xA5;

// WireBuffer: 248 payload bytes between two guard zones, at a deliberately odd
// offset (frames put the payload at byte 58).
struct WireBuffer {
  std::array<uint8_t, kGuard + wire::kPayloadBytes + kGuard + 1> bytes;
  WireBuffer() { bytes.fill(kGuardByte); }
  uint8_t* payload() { return bytes.data() + kGuard + 1; }
  bool GuardsIntact() const {
    for (size_t i = 0; i < kGuard + 1; ++i) {
      if (bytes[i] != kGuardByte) return false;
    }
    for (size_t i = kGuard + 1 + wire::kPayloadBytes; i < bytes.size(); ++i) {
      if (bytes[i] != kGuardByte) return false;
    }
    return true;
  }
};

constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min();

// Reference: the sticky saturating add done the slow and obvious way, in
// int64: a lane at a bound stays; else a bound in the contribution is taken;
// else the exact sum, clamped.
int32_t ReferenceAdd(int32_t lane, int32_t value) {
  if (lane == kMin || lane == kMax) return lane;
  if (value == kMin || value == kMax) return value;
  const int64_t sum = int64_t{lane} + int64_t{value};
  return static_cast<int32_t>(std::clamp<int64_t>(sum, kMin, kMax));
}
int32_t ReadBigEndian(const uint8_t* p) {
  return static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
                              (uint32_t{p[2]} << 8) | uint32_t{p[3]});
}

// RandomValue: uniform int32 most of the time, extremes and small numbers
// often enough that saturation happens in every run.
int32_t RandomValue(std::mt19937& rng) {
  switch (rng() % 8) {
    case 0:
      return kMax - static_cast<int32_t>(rng() % 4);
    case 1:
      return kMin + static_cast<int32_t>(rng() % 4);
    case 2:
      return static_cast<int32_t>(rng() % 201) - 100;
    case 3:
      return static_cast<int32_t>(rng() % (1u << 30)) * ((rng() & 1) ? 1 : -1);
    default:
      return static_cast<int32_t>(rng());
  }
}

void FillWire(std::mt19937& rng, uint8_t* payload) {
  for (size_t i = 0; i < kValues; ++i) {
    const uint32_t v = static_cast<uint32_t>(RandomValue(rng));
    payload[4 * i] = static_cast<uint8_t>(v >> 24);
    payload[4 * i + 1] = static_cast<uint8_t>(v >> 16);
    payload[4 * i + 2] = static_cast<uint8_t>(v >> 8);
    payload[4 * i + 3] = static_cast<uint8_t>(v);
  }
}

void ExpectKernelsMatchReference(const ValueKernels& k) {
  std::mt19937 rng(20240611);
  AggregatorValues acc;
  std::array<int32_t, kAggregatorLanes> expected{};
  for (int round = 0; round < 2000; ++round) {
    WireBuffer wire;
    FillWire(rng, wire.payload());
    if (round % 16 == 0) {     // a fresh claim
      acc.lanes[62] = 0x5555;  // LoadFn must zero the padding
      k.load(acc.lanes, wire.payload());
      for (size_t i = 0; i < kValues; ++i) expected[i] = ReadBigEndian(wire.payload() + 4 * i);
    } else {
      k.add(acc.lanes, wire.payload());
      for (size_t i = 0; i < kValues; ++i) {
        expected[i] = ReferenceAdd(expected[i], ReadBigEndian(wire.payload() + 4 * i));
      }
    }
    ASSERT_TRUE(wire.GuardsIntact()) << "round " << round;
    for (size_t i = 0; i < kAggregatorLanes; ++i) {
      ASSERT_EQ(acc.lanes[i], expected[i]) << "round " << round << " lane " << i;
    }
    WireBuffer out;
    k.store(out.payload(), acc.lanes);
    ASSERT_TRUE(out.GuardsIntact()) << "round " << round;
    for (size_t i = 0; i < kValues; ++i) {
      ASSERT_EQ(ReadBigEndian(out.payload() + 4 * i), expected[i]) << "round " << round;
    }
  }
}

TEST(ValueKernelsTest, ScalarMatchesReference) {
  absl::StatusOr<ValueKernels> k = SelectValueKernels(ValueKernel::kScalar);
  ASSERT_TRUE(k.ok());
  ExpectKernelsMatchReference(*k);
}

TEST(ValueKernelsTest, Avx2MatchesReference) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  absl::StatusOr<ValueKernels> k = SelectValueKernels(ValueKernel::kAvx2);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->kind, ValueKernel::kAvx2);
  ExpectKernelsMatchReference(*k);
}

TEST(ValueKernelsTest, Avx512MatchesReference) {
  if (!CpuHasAvx512()) GTEST_SKIP() << "no AVX-512 F/BW/DQ on this CPU";
  absl::StatusOr<ValueKernels> k = SelectValueKernels(ValueKernel::kAvx512);
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->kind, ValueKernel::kAvx512);
  ExpectKernelsMatchReference(*k);
}

// VectorMatchesScalarOnRandomSequences: one vector kernel set against the
// scalar one, bit for bit, over random claim/add sequences.
void ExpectMatchesScalar(const ValueKernels& vector_kernels) {
  std::mt19937 rng(7);
  AggregatorValues scalar, vector;
  for (int round = 0; round < 5000; ++round) {
    WireBuffer wire;
    FillWire(rng, wire.payload());
    if (round % 8 == 0) {
      internal::LoadScalar(scalar.lanes, wire.payload());
      vector_kernels.load(vector.lanes, wire.payload());
    } else {
      internal::AddScalar(scalar.lanes, wire.payload());
      vector_kernels.add(vector.lanes, wire.payload());
    }
    ASSERT_EQ(std::memcmp(scalar.lanes, vector.lanes, sizeof(scalar.lanes)), 0) << round;
    WireBuffer a, b;
    internal::StoreScalar(a.payload(), scalar.lanes);
    vector_kernels.store(b.payload(), vector.lanes);
    ASSERT_EQ(a.bytes, b.bytes) << round;
  }
}

TEST(ValueKernelsTest, Avx2MatchesScalarOnRandomSequences) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  ExpectMatchesScalar(*SelectValueKernels(ValueKernel::kAvx2));
}

TEST(ValueKernelsTest, Avx512MatchesScalarOnRandomSequences) {
  if (!CpuHasAvx512()) GTEST_SKIP() << "no AVX-512 F/BW/DQ on this CPU";
  ExpectMatchesScalar(*SelectValueKernels(ValueKernel::kAvx512));
}

TEST(ValueKernelsTest, AutoPicksTheBestSupported) {
  absl::StatusOr<ValueKernels> k = SelectValueKernels(ValueKernel::kAuto);
  ASSERT_TRUE(k.ok());
  const ValueKernel best = CpuHasAvx512() ? ValueKernel::kAvx512
                           : CpuHasAvx2() ? ValueKernel::kAvx2
                                          : ValueKernel::kScalar;
  EXPECT_EQ(k->kind, best);
  EXPECT_NE(ValueKernelName(k->kind), "unknown");
}

TEST(ValueKernelsTest, StickySaturatingAddKeepsEveryBound) {
  // Clamping.
  static_assert(StickySaturatingAdd(kMax - 1, 1) == kMax);
  static_assert(StickySaturatingAdd(kMax - 1, 5) == kMax);
  static_assert(StickySaturatingAdd(kMin + 1, -1) == kMin);
  static_assert(StickySaturatingAdd(kMin + 1, kMin + 1) == kMin);
  static_assert(StickySaturatingAdd(-5, 3) == -2);
  static_assert(StickySaturatingAdd(kMax - 1, kMin + 1) == -1);
  // A lane at a bound stays there: the overflow cannot be undone.
  static_assert(StickySaturatingAdd(kMax, -100) == kMax);
  static_assert(StickySaturatingAdd(kMin, 100) == kMin);
  static_assert(StickySaturatingAdd(kMax, kMin + 1) == kMax);
  // A contribution at a bound (a partial sum that saturated upstream) makes
  // the lane that bound.
  static_assert(StickySaturatingAdd(-100, kMax) == kMax);
  static_assert(StickySaturatingAdd(100, kMin) == kMin);
  static_assert(StickySaturatingAdd(0, kMax) == kMax);
  // Opposite bounds: the lane's own bound wins.
  static_assert(StickySaturatingAdd(kMax, kMin) == kMax);
  static_assert(StickySaturatingAdd(kMin, kMax) == kMin);
  static_assert(IsBound(kMax) && IsBound(kMin) && !IsBound(kMax - 1) && !IsBound(kMin + 1) &&
                !IsBound(0));
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const int32_t a = RandomValue(rng);
    const int32_t b = RandomValue(rng);
    ASSERT_EQ(StickySaturatingAdd(a, b), ReferenceAdd(a, b)) << a << " + " << b;
  }
}

// The values where the arithmetic has edges: the bounds, their neighbours,
// zero, a few ordinary ones, and the magnitude 2^30 where the vector kernels
// leave their wrapping fast path (value_kernels_simd.h) and its neighbours.
constexpr int32_t kEdgeValues[] = {
    kMin, kMin + 1, kMin + 2,      -(1 << 30) - 1, -(1 << 30),    -(1 << 30) + 1, -2,       -1,  0,
    1,    2,        (1 << 30) - 1, 1 << 30,        (1 << 30) + 1, kMax - 2,       kMax - 1, kMax};

// Every kernel against the reference for every pair of edge values, each pair
// tried in every lane (rows and the masked tail row alike).
void ExpectEveryEdgePairMatchesReference(const ValueKernels& k) {
  for (int32_t lane_value : kEdgeValues) {
    for (int32_t wire_value : kEdgeValues) {
      for (size_t lane = 0; lane < kValues; ++lane) {
        // The pair in `lane`; the others hold (lane, 1), so neighbours differ.
        AggregatorValues acc;
        std::array<int32_t, kValues> lanes{};
        std::array<int32_t, kValues> values{};
        for (size_t i = 0; i < kValues; ++i) {
          lanes[i] = i == lane ? lane_value : static_cast<int32_t>(i);
          values[i] = i == lane ? wire_value : 1;
          acc.lanes[i] = lanes[i];
        }
        WireBuffer wire;
        for (size_t i = 0; i < kValues; ++i) {
          const auto v = static_cast<uint32_t>(values[i]);
          uint8_t* p = wire.payload() + 4 * i;
          p[0] = static_cast<uint8_t>(v >> 24);
          p[1] = static_cast<uint8_t>(v >> 16);
          p[2] = static_cast<uint8_t>(v >> 8);
          p[3] = static_cast<uint8_t>(v);
        }
        k.add(acc.lanes, wire.payload());
        for (size_t i = 0; i < kValues; ++i) {
          ASSERT_EQ(acc.lanes[i], ReferenceAdd(lanes[i], values[i]))
              << ValueKernelName(k.kind) << ": " << lanes[i] << " + " << values[i] << " in lane "
              << i;
        }
        ASSERT_EQ(acc.lanes[62], 0);
        ASSERT_EQ(acc.lanes[63], 0);
      }
    }
  }
}

TEST(ValueKernelsTest, EveryKernelMatchesReferenceOnEveryPairOfEdgeValues) {
  for (ValueKernel kind : {ValueKernel::kScalar, ValueKernel::kAvx2, ValueKernel::kAvx512}) {
    absl::StatusOr<ValueKernels> k = SelectValueKernels(kind);
    if (!k.ok()) continue;  // not on this CPU (the Avx*MatchesReference tests say so)
    SCOPED_TRACE(ValueKernelName(kind));
    ExpectEveryEdgePairMatchesReference(*k);
  }
}

// Whatever order the contributions arrive in, a sum ends at a bound iff one
// of them was a bound or the exact int64 running sum left the open int32
// range: so the PS sees every overflow. Checked on every kernel over random
// sequences of 2..8 contributions per lane, with bounds and near-bounds
// frequent.
TEST(ValueKernelsTest, OverflowIsVisibleWhateverTheOrder) {
  std::mt19937 rng(99);
  for (ValueKernel kind : {ValueKernel::kScalar, ValueKernel::kAvx2, ValueKernel::kAvx512}) {
    absl::StatusOr<ValueKernels> k = SelectValueKernels(kind);
    if (!k.ok()) continue;
    SCOPED_TRACE(ValueKernelName(kind));
    for (int round = 0; round < 3000; ++round) {
      const int contributions = 2 + static_cast<int>(rng() % 7);
      std::array<bool, kValues> overflowed{};
      std::array<int64_t, kValues> exact{};
      AggregatorValues acc;
      for (int c = 0; c < contributions; ++c) {
        WireBuffer wire;
        FillWire(rng, wire.payload());
        for (size_t i = 0; i < kValues; ++i) {
          const int32_t v = ReadBigEndian(wire.payload() + 4 * i);
          exact[i] += v;
          overflowed[i] = overflowed[i] || IsBound(v) || exact[i] <= kMin || exact[i] >= kMax;
        }
        if (c == 0) {
          k->load(acc.lanes, wire.payload());
        } else {
          k->add(acc.lanes, wire.payload());
        }
      }
      for (size_t i = 0; i < kValues; ++i) {
        ASSERT_EQ(IsBound(acc.lanes[i]), overflowed[i]) << "round " << round << " lane " << i;
        if (!overflowed[i]) {
          ASSERT_EQ(acc.lanes[i], exact[i]) << "round " << round;
        }
      }
    }
  }
}

// --- JobTable's index mapping ---------------------------------------------------

TEST(JobTableTest, ModuloOfMatchesTheOperatorForEveryIndex) {
  for (uint32_t d : {1u, 2u, 3u, 7u, 63u, 64u, 100u, 4096u, 65535u, 65536u, 65537u, 100003u,
                     1u << 20, (1u << 24) - 1, 1u << 24}) {
    const uint64_t r = ReciprocalFor(d);
    for (uint32_t a = 0; a <= 0xFFFF; ++a) {
      ASSERT_EQ(ModuloOf(static_cast<uint16_t>(a), d, r), a % d) << a << " % " << d;
    }
  }
}

TEST(JobTableTest, AggregatorForIsFirstPlusIndexModuloCount) {
  // Powers of two take the mask, the rest the reciprocal: both must agree
  // with the operator for every 16-bit index.
  for (uint32_t count : {1u, 2u, 3u, 64u, 100u, 4096u, 65535u, 65536u, 65537u}) {
    const JobConfig jobs[] = {{.job = 9, .slice = {.first = 7, .count = count}}};
    absl::StatusOr<JobTable> t = JobTable::Create(jobs, PartitionMode::kStatic, 7 + count);
    ASSERT_TRUE(t.ok()) << t.status();
    const JobEntry& e = t->Entry(9);
    for (uint32_t index = 0; index <= 0xFFFF; ++index) {
      ASSERT_EQ(e.AggregatorFor(static_cast<uint16_t>(index)), 7 + index % count)
          << index << " % " << count;
    }
  }
}

TEST(JobTableTest, FindReturnsOnlyConfiguredJobs) {
  const JobConfig jobs[] = {{.job = 3, .levels = JobLevels::kBoth, .multicast_group = 30}};
  absl::StatusOr<JobTable> t = JobTable::Create(jobs, PartitionMode::kDynamic, 100);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->Find(0), nullptr);
  EXPECT_EQ(t->Find(4), nullptr);
  const JobEntry* e = t->Find(3);
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->AggregatesAt(AggregationLevel::kLevel1));
  EXPECT_TRUE(e->AggregatesAt(AggregationLevel::kLevel2));
  EXPECT_EQ(e->multicast_group, 30u);
  EXPECT_EQ(e->AggregatorFor(250), 50u);
}

}  // namespace
}  // namespace atp::switch_emulator
