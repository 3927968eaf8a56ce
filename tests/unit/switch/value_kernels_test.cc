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

// Reference: the arithmetic done the slow and obvious way.
int32_t ReferenceAdd(int32_t a, int32_t b) {
  const int64_t sum = int64_t{a} + int64_t{b};
  return static_cast<int32_t>(std::clamp<int64_t>(sum, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}
int32_t ReadBigEndian(const uint8_t* p) {
  return static_cast<int32_t>((uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
                              (uint32_t{p[2]} << 8) | uint32_t{p[3]});
}

// RandomValue: uniform int32 most of the time, extremes and small numbers
// often enough that saturation happens in every run.
int32_t RandomValue(std::mt19937& rng) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
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

TEST(ValueKernelsTest, SaturatingAddClamps) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  static_assert(SaturatingAdd(kMax, 1) == kMax);
  static_assert(SaturatingAdd(kMin, -1) == kMin);
  static_assert(SaturatingAdd(kMax, kMin) == -1);
  static_assert(SaturatingAdd(-5, 3) == -2);
  std::mt19937 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const int32_t a = RandomValue(rng);
    const int32_t b = RandomValue(rng);
    ASSERT_EQ(SaturatingAdd(a, b), ReferenceAdd(a, b)) << a << " + " << b;
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
