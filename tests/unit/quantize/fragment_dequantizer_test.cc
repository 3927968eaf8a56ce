// FragmentDequantizer gives exactly DequantizeFromWireScalar's floats and a
// byte-exact copy of the payload, zero-padded to whole lines: whole fragments (its AVX-512 kernel
// where the CPU has one) and every shorter length, random, edge and midpoint ints, scales that take
// the reciprocal with and without its per-lane exponent check and scales that must divide, every
// rounding mode, payloads at unaligned addresses, and nothing written past the output's end.
#include "lib/quantize/fragment_dequantizer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "atp/cpu_isa.h"
#include "atp/quantize.h"
#include "gtest/gtest.h"
#include "tests/unit/quantize/rounding_mode_scope.h"

namespace atp {
namespace {

constexpr size_t kValues = FragmentDequantizer::kValues;
constexpr size_t kBytes = FragmentDequantizer::kBytes;
constexpr size_t kKeptBytes = FragmentDequantizer::kKeptBytes;
constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr uint64_t kSeed = 0x46524147;  // fixed: failures reproduce
// A frame's payload starts at byte 58: the kernel must not assume alignment.
constexpr size_t kMisalign = 2;
const float kSentinel = std::bit_cast<float>(0x5a5a5a5au);
// The single-precision path's ints: |q| <= 2^24.
constexpr int64_t kLimit = int64_t{1} << 24;

// Scales that take the multiply without an exponent check (1e8, 1, 2^20),
// with one (2^149: 1 / scale too small for ExponentsInRange), and the
// division (2^-1010 and 2^1010: outside ReciprocalApplies).
const std::array<double, 7> kScales = {
    kDefaultScale,        1.0, 1048576.0, std::ldexp(1.0, -1010), std::ldexp(1.0, 149), 3.0,
    std::ldexp(1.0, 1010)};

using testing_support::RoundingModeScope;

// A payload of big-endian ints at an unaligned address, its pad after `n` values
// nonzero (the copy must carry it as it is).
struct Payload {
  explicit Payload(std::span<const int32_t> q) : buffer(kMisalign + kBytes, 0xa5) {
    for (size_t i = 0; i < q.size(); ++i) {
      const auto u = static_cast<uint32_t>(q[i]);
      uint8_t* p = buffer.data() + kMisalign + 4 * i;
      p[0] = static_cast<uint8_t>(u >> 24);
      p[1] = static_cast<uint8_t>(u >> 16);
      p[2] = static_cast<uint8_t>(u >> 8);
      p[3] = static_cast<uint8_t>(u);
    }
  }
  std::span<const uint8_t, kBytes> bytes() const {
    return std::span<const uint8_t, kBytes>(buffer.data() + kMisalign, kBytes);
  }
  std::vector<uint8_t> buffer;
};

void ExpectSameAsScalar(const FragmentDequantizer& dequantizer, std::span<const int32_t> q,
                        const std::string& what) {
  ASSERT_LE(q.size(), kValues);
  const double scale = dequantizer.scale();
  const Payload payload(q);
  std::vector<float> want(q.size());
  DequantizeFromWireScalar(payload.bytes(), scale, want);
  std::vector<float> got(q.size() + 1, kSentinel);
  alignas(FragmentDequantizer::kKeptAlignment) std::array<uint8_t, kKeptBytes> keep;
  keep.fill(0xEE);
  dequantizer.KeepAndDequantize(payload.bytes(), std::span(got).first(q.size()), keep);
  for (size_t i = 0; i < q.size(); ++i) {
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << what << ": n=" << q.size() << " i=" << i << " q=" << q[i] << " scale=" << scale;
  }
  EXPECT_EQ(std::bit_cast<uint32_t>(got[q.size()]), std::bit_cast<uint32_t>(kSentinel))
      << what << ": wrote past the output, n=" << q.size();
  EXPECT_TRUE(std::equal(payload.bytes().begin(), payload.bytes().end(), keep.begin()))
      << what << ": the kept copy differs from the payload, n=" << q.size();
  EXPECT_TRUE(std::all_of(keep.begin() + kBytes, keep.end(), [](uint8_t b) { return b == 0; }))
      << what << ": the kept copy's padding is not zero, n=" << q.size();
}

std::vector<int32_t> RandomInts(std::mt19937_64& rng, size_t n) {
  std::vector<int32_t> q(n);
  for (int32_t& v : q) v = static_cast<int32_t>(static_cast<uint32_t>(rng()));
  return q;
}

// Where MaxCpuIsa() allows no AVX-512, every test here runs the dispatched
// general kernel and a copy: said, not passed silently.
TEST(FragmentDequantizerTest, TheWholeFragmentKernelIsTheOneTested) {
  if (MaxCpuIsa() < CpuIsa::kAvx512) {
    GTEST_SKIP() << "no AVX-512 here (or ATP_MAX_CPU_ISA caps it): the whole-fragment kernel is "
                    "untested, only the general one";
  }
  std::mt19937_64 rng(kSeed + 3);
  std::uniform_int_distribution<int32_t> small(-(1 << 24), 1 << 24);
  std::vector<int32_t> q(kValues);
  for (int32_t& v : q) v = small(rng);
  ExpectSameAsScalar(FragmentDequantizer(kDefaultScale), q, "small ints");
}

TEST(FragmentDequantizerTest, RandomFragmentsOfEveryLengthMatchScalar) {
  std::mt19937_64 rng(kSeed);
  for (double scale : kScales) {
    const FragmentDequantizer dequantizer(scale);
    for (size_t n = 0; n <= kValues; ++n) {
      ExpectSameAsScalar(dequantizer, RandomInts(rng, n), "random");
      if (testing::Test::HasFatalFailure()) return;
    }
    for (int i = 0; i < 2000; ++i) {
      ExpectSameAsScalar(dequantizer, RandomInts(rng, kValues), "random whole");
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(FragmentDequantizerTest, EdgeIntsAtEveryPositionOfAWholeFragment) {
  std::mt19937_64 rng(kSeed + 1);
  const std::array<int32_t, 7> edges = {0, 1, -1, kMax, kMin, 100000000, -123456789};
  for (double scale : kScales) {
    const FragmentDequantizer dequantizer(scale);
    const std::vector<int32_t> background = RandomInts(rng, kValues);
    for (size_t pos = 0; pos < kValues; ++pos) {
      for (int32_t e : edges) {
        std::vector<int32_t> q = background;
        q[pos] = e;
        ExpectSameAsScalar(dequantizer, q, "edge at " + std::to_string(pos));
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// Quotients exactly at a float midpoint and their neighbours (as in
// DequantizeAvx2Test.QuotientsAtFloatMidpointsMatchScalar), in whole
// fragments: the lanes the kernel must send to its division.
TEST(FragmentDequantizerTest, QuotientsAtFloatMidpointsMatchScalar) {
  std::vector<int32_t> ints;
  for (int64_t s : {3, 5, 10, 100}) {
    for (int64_t t = 0; t < 32; ++t) {
      for (int shift = 0; shift < 6; ++shift) {
        const int64_t q = s * (((int64_t{1} << 24) + 2 * t + 1) << shift);
        if (q > kMax) continue;
        for (int64_t d = -2; d <= 2; ++d)
          ints.push_back(static_cast<int32_t>((t % 2 ? -1 : 1) * (q + d)));
      }
    }
  }
  for (double scale : {3.0, 5.0, 10.0, 100.0, 1.0}) {
    const FragmentDequantizer dequantizer(scale);
    for (size_t first = 0; first + kValues <= ints.size(); first += kValues / 2) {
      ExpectSameAsScalar(dequantizer, std::span(ints).subspan(first, kValues), "midpoints");
      if (testing::Test::HasFatalFailure()) return;
    }
  }
}

// Every int with |q| <= 2^24 (the single-precision path's whole domain) at
// the default scale, in whole fragments, and every 61st at other float
// scales, the path's bounds included: the argument in dequantize_avx512.cc,
// checked where a job lives.
TEST(FragmentDequantizerTest, EverySmallIntMatchesScalar) {
  const auto check_every = [](double scale, int64_t step) {
    const FragmentDequantizer dequantizer(scale);
    std::vector<int32_t> q;
    q.reserve(kValues);
    for (int64_t v = -kLimit; v <= kLimit + static_cast<int64_t>(kValues) * step; v += step) {
      q.push_back(static_cast<int32_t>(std::min(v, kLimit)));
      if (q.size() < kValues) continue;
      ExpectSameAsScalar(dequantizer, q, "every small int");
      if (testing::Test::HasFatalFailure()) return;
      q.clear();
    }
  };
  check_every(kDefaultScale, 1);
  for (double scale :
       {1.0, 3.0, 0.75, 1e6, 1e10, 16777215.0, std::ldexp(1.0, -24), std::ldexp(1.0, 64)}) {
    check_every(scale, 61);
    if (testing::Test::HasFatalFailure()) return;
  }
}

// The rounding mode is the calling thread's at the call, not at
// construction: a dequantizer made in round-to-nearest follows a later mode,
// on the double-precision path (random ints) and on the single-precision
// one, which applies only in round-to-nearest (small ints).
TEST(FragmentDequantizerTest, FollowsTheRoundingModeOfEachCall) {
  std::mt19937_64 rng(kSeed + 2);
  std::vector<FragmentDequantizer> dequantizers;
  for (double scale : kScales) dequantizers.emplace_back(scale);
  for (int mode : {FE_TOWARDZERO, FE_UPWARD, FE_DOWNWARD, FE_TONEAREST}) {
    RoundingModeScope scope(mode);
    for (const FragmentDequantizer& dequantizer : dequantizers) {
      for (size_t n : {size_t{0}, size_t{5}, size_t{16}, size_t{61}, kValues}) {
        ExpectSameAsScalar(dequantizer, RandomInts(rng, n), "mode " + std::to_string(mode));
        if (testing::Test::HasFatalFailure()) return;
      }
      std::uniform_int_distribution<int32_t> small(-(1 << 24), 1 << 24);
      for (int i = 0; i < 50; ++i) {
        std::vector<int32_t> q(kValues);
        for (int32_t& v : q) v = small(rng);
        ExpectSameAsScalar(dequantizer, q, "small ints, mode " + std::to_string(mode));
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace atp
