// The AVX2 quantizer is bit-identical to the scalar one: on millions of random
// inputs (random bit patterns, gradient-like magnitudes, exact ties) and on
// every edge value at every position of every length 0..70 (so every lane of
// the vector body and of the masked tail). Every case also holds the AVX-512
// quantizer and dequantizer to the scalar ones where the CPU has AVX-512.
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

#include "atp/quantize.h"
#include "gtest/gtest.h"
#include "tests/unit/quantize/rounding_mode_scope.h"

namespace atp {
namespace {

constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr size_t kMaxLen = 70;
// Written past the input's end, to check that nothing there changes.
constexpr int32_t kSentinel = 0x5a5a5a5a;
constexpr uint64_t kSeed = 0x41545021;  // fixed: failures reproduce

using testing_support::RoundingModeScope;

#define SKIP_WITHOUT_AVX2() \
  if (!HasAvx2()) GTEST_SKIP() << "this CPU has no AVX2: nothing to compare"

const std::vector<double>& Scales() {
  static const std::vector<double> scales = {
      1.0,          kDefaultScale,  1048576.0 /* 2^20 */, 2147483646.5, 2147483647.0,
      2147483647.5, std::ldexp(1.0, 149),  1e-3,          0.75,         3e9};
  return scales;
}

std::vector<float> EdgeValues() {
  const float inf = std::numeric_limits<float>::infinity();
  const float denorm_min = std::numeric_limits<float>::denorm_min();
  std::vector<float> v = {
      std::bit_cast<float>(0x7fc00000u),  // quiet NaN
      std::bit_cast<float>(0xffc00000u),  // negative quiet NaN
      std::bit_cast<float>(0x7f800001u),  // signaling NaN
      std::bit_cast<float>(0xffffffffu),  // NaN, all payload bits
      inf,
      -inf,
      0.0f,
      -0.0f,
      denorm_min,
      -denorm_min,
      std::nextafter(std::numeric_limits<float>::min(), 0.0f),  // largest denormal
      std::numeric_limits<float>::min(),
      std::numeric_limits<float>::max(),
      std::numeric_limits<float>::lowest(),
      0.5f,
      -0.5f,
      1.5f,
      -2.5f,
      8388607.5f,
      1.0f,
      -1.0f,
      2147483520.0f,  // largest float below 2^31
      -2147483520.0f,
      2147483648.0f,
      -2147483648.0f,
      21.474836f,  // just inside at scale 1e8
      21.474838f,  // just outside at scale 1e8
      -21.474836f,
      -21.474838f,
      0.5f / 1048576.0f,  // a tie at scale 2^20
      -1.5f / 1048576.0f,
  };
  return v;
}

// ExpectSameQuantize: runs both versions on `in` (out buffers one longer, with
// a sentinel) and expects identical bits and outcome.
void ExpectSameQuantize(std::span<const float> in, double scale, const std::string& what) {
  std::vector<int32_t> want(in.size() + 1, kSentinel);
  const QuantizeOutcome want_outcome = QuantizeScalar(in, scale, want);
  // The AVX2 kernel, and the AVX-512 one (quantize_avx512.cc) where the CPU
  // has it.
  for (const bool avx512 : {false, true}) {
    if (avx512 && !HasAvx512()) continue;
    const char* kernel = avx512 ? "avx512 " : "avx2 ";
    std::vector<int32_t> got(in.size() + 1, kSentinel);
    const QuantizeOutcome got_outcome =
        avx512 ? QuantizeAvx512(in, scale, got) : QuantizeAvx2(in, scale, got);
    ASSERT_EQ(got_outcome, want_outcome)
        << kernel << what << " scale=" << scale << " n=" << in.size();
    for (size_t i = 0; i <= in.size(); ++i) {
      ASSERT_EQ(got[i], want[i]) << kernel << what << " scale=" << scale << " n=" << in.size()
                                 << " i=" << i << " x bits=0x" << std::hex
                                 << (i < in.size() ? std::bit_cast<uint32_t>(in[i]) : 0u);
    }
  }
}

void ExpectSameDequantize(std::span<const int32_t> in, double scale, const std::string& what) {
  const float sentinel = std::bit_cast<float>(kSentinel);
  std::vector<float> want(in.size() + 1, sentinel);
  std::vector<float> got(in.size() + 1, sentinel);
  DequantizeScalar(in, scale, want);
  // The AVX2 kernel, and the AVX-512 one (dequantize_avx512.cc) where the
  // CPU has it.
  for (const bool avx512 : {false, true}) {
    if (avx512 && !HasAvx512()) continue;
    std::fill(got.begin(), got.end(), sentinel);
    if (avx512) {
      DequantizeAvx512(in, scale, got);
    } else {
      DequantizeAvx2(in, scale, got);
    }
    for (size_t i = 0; i <= in.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
          << (avx512 ? "avx512 " : "avx2 ") << what << " scale=" << scale
          << " n=" << in.size() << " i=" << i << " q=" << (i < in.size() ? in[i] : 0);
    }
  }
}

// Benign background values: small gradients, all exact at every test scale
// except the ones that deliberately saturate.
std::vector<float> Background(std::mt19937_64& rng, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Run in round-to-nearest (the vcvtpd2dq path) and toward zero (the vroundpd
// path, which must still round half-even).
TEST(QuantizeAvx2Test, EveryEdgeValueAtEveryPositionOfEveryLength) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed);
  const std::vector<float> edges = EdgeValues();
  for (size_t n = 0; n <= kMaxLen; ++n) {
    RoundingModeScope mode(n % 2 == 0 ? FE_TONEAREST : FE_TOWARDZERO);
    const std::vector<float> background = Background(rng, n);
    for (double scale : Scales()) {
      ExpectSameQuantize(background, scale, "background");
      for (size_t pos = 0; pos < n; ++pos) {
        for (float e : edges) {
          std::vector<float> in = background;
          in[pos] = e;
          ExpectSameQuantize(in, scale, "edge at pos " + std::to_string(pos));
        }
      }
    }
  }
}

TEST(QuantizeAvx2Test, EdgeValuesFillingWholeBuffers) {
  SKIP_WITHOUT_AVX2();
  const std::vector<float> edges = EdgeValues();
  for (size_t n = 0; n <= kMaxLen; ++n) {
    for (size_t rotate = 0; rotate < edges.size(); ++rotate) {
      std::vector<float> in(n);
      for (size_t i = 0; i < n; ++i) in[i] = edges[(i + rotate) % edges.size()];
      for (double scale : Scales()) ExpectSameQuantize(in, scale, "all edges");
    }
  }
}

// Splits `values` into chunks of random length 0..70 and compares each chunk,
// so the per-chunk outcome is checked too (a whole random buffer would always
// need float).
void CompareInRandomChunks(std::span<const float> values, double scale, std::mt19937_64& rng,
                           const std::string& what) {
  std::uniform_int_distribution<size_t> len(0, kMaxLen);
  size_t i = 0;
  while (i < values.size()) {
    const size_t n = std::min(len(rng), values.size() - i);
    ExpectSameQuantize(values.subspan(i, n), scale, what);
    if (testing::Test::HasFatalFailure()) return;
    i += n;
  }
}

TEST(QuantizeAvx2Test, RandomBitPatternsMatchScalar) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 1);
  std::vector<float> values(1 << 21);
  for (float& x : values) x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  for (double scale : {1.0, kDefaultScale, 1048576.0, 1e30, 1e-30}) {
    CompareInRandomChunks(values, scale, rng, "random bits");
    ExpectSameQuantize(values, scale, "random bits, one call");
  }
}

// Random bit patterns confined to magnitudes that land near the int32 range at
// scale 1 (exponents 2^20..2^32): many saturate, many are exact, many round.
TEST(QuantizeAvx2Test, RandomValuesNearTheBoundsMatchScalar) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 2);
  std::vector<float> values(1 << 20);
  std::uniform_int_distribution<uint32_t> exponent(127 + 20, 127 + 32);
  for (float& x : values) {
    const uint32_t r = static_cast<uint32_t>(rng());
    x = std::bit_cast<float>((r & 0x807fffffu) | (exponent(rng) << 23));
  }
  CompareInRandomChunks(values, 1.0, rng, "near bounds");
  CompareInRandomChunks(values, 0.5, rng, "near bounds, halved");
}

// Gradient-like values: normal with a standard deviation drawn per chunk from
// 1e-9 to 30, so some chunks saturate at scale 1e8 and some are all zero.
TEST(QuantizeAvx2Test, GradientMagnitudesMatchScalar) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 3);
  std::uniform_real_distribution<double> log_sigma(-9.0, std::log10(30.0));
  std::vector<float> values(1 << 22);
  for (size_t i = 0; i < values.size(); i += 62) {
    std::normal_distribution<float> normal(0.0f,
                                           static_cast<float>(std::pow(10.0, log_sigma(rng))));
    for (size_t j = i; j < std::min(i + 62, values.size()); ++j) values[j] = normal(rng);
  }
  CompareInRandomChunks(values, kDefaultScale, rng, "gradients");
  CompareInRandomChunks(values, 1048576.0, rng, "gradients, 2^20");
}

// Exact .5 ties after scaling, at scales 1 and 2^20.
TEST(QuantizeAvx2Test, RandomTiesMatchScalar) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 4);
  std::uniform_int_distribution<int32_t> k(-(1 << 22), 1 << 22);
  std::vector<float> values(1 << 20);
  for (float& x : values) x = static_cast<float>(k(rng)) + 0.5f;
  CompareInRandomChunks(values, 1.0, rng, "ties");
  for (float& x : values) x /= 1048576.0f;  // exact: a power of two
  CompareInRandomChunks(values, 1048576.0, rng, "ties, 2^20");
}

// Products just around half-integers, up to 2^24 in magnitude, at float
// scales that are not powers of two: where the AVX-512 kernel's
// single-precision path (quantize_avx512.cc) would round wrong without its
// round-to-odd step or with a wider range, in whole 16-lane blocks of them. x is
// the float nearest (n + 1/2) / s and its neighbours up to 3 ulps away.
TEST(QuantizeAvx2Test, ProductsAroundHalfIntegersMatchScalar) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 8);
  for (double scale : {kDefaultScale, 3.0, 10.0, 0.75, 1e6}) {
    std::vector<float> values;
    for (int i = 0; i < 20000; ++i) {
      const int magnitude_bits = static_cast<int>(rng() % 25);  // n up to 2^24
      const auto n = static_cast<int64_t>(rng() % (uint64_t{1} << magnitude_bits));
      const float x = static_cast<float>((static_cast<double>(n) + 0.5) / scale) *
                      (rng() % 2 == 0 ? 1.0f : -1.0f);
      float below = x;
      float above = x;
      values.push_back(x);
      for (int k = 0; k < 3; ++k) {
        below = std::nextafter(below, -std::numeric_limits<float>::infinity());
        above = std::nextafter(above, std::numeric_limits<float>::infinity());
        values.push_back(below);
        values.push_back(above);
      }
    }
    ExpectSameQuantize(values, scale, "around half-integers");
    if (testing::Test::HasFatalFailure()) return;
  }
}

// Scalar rounds by hand and AVX2 with an explicit rounding immediate, and the
// remaining operations (multiply, float conversion) are the same IEEE
// operations in both, so they agree under every MXCSR rounding mode.
TEST(QuantizeAvx2Test, MatchesScalarUnderEveryRoundingMode) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 5);
  std::vector<float> values = Background(rng, 1 << 16);
  std::vector<int32_t> ints(values.size());
  for (size_t i = 0; i < values.size(); i += 3) values[i] *= 1e4f;
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int32_t>(rng());
  for (int mode : {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
    RoundingModeScope scope(mode);
    ExpectSameQuantize(values, kDefaultScale, "mode " + std::to_string(mode));
    ExpectSameDequantize(ints, kDefaultScale, "mode " + std::to_string(mode));
    ExpectSameQuantize(EdgeValues(), kDefaultScale, "edges, mode " + std::to_string(mode));
    ExpectSameQuantize(EdgeValues(), 1.0, "edges, mode " + std::to_string(mode));
  }
}

// The AVX2 version works in chunks of 1024 floats and repairs NaN lanes per
// chunk: put a NaN, -inf or a negative overflow on each side of each chunk
// boundary of a 3-chunk buffer, alone and together, and in the tail.
TEST(QuantizeAvx2Test, NanAndNegativeOverflowAroundChunkBoundaries) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 8);
  const size_t n = 3 * 1024 + 5;
  const std::vector<float> background = Background(rng, n);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const std::vector<size_t> positions = {0, 1, 7, 8, 1023, 1024, 1025, 2047, 2048, 3071,
                                         3072, 3073, n - 1};
  for (size_t pos : positions) {
    for (float bad : {nan, minus_inf, -1e9f, 1e9f}) {
      std::vector<float> in = background;
      in[pos] = bad;
      ExpectSameQuantize(in, kDefaultScale, "pos " + std::to_string(pos));
      // A NaN in one chunk and a negative overflow in another.
      in[(pos + 1024) % n] = std::isnan(bad) ? -1e9f : nan;
      ExpectSameQuantize(in, kDefaultScale, "two chunks, pos " + std::to_string(pos));
    }
  }
  std::vector<float> all_nan(n, nan);
  ExpectSameQuantize(all_nan, kDefaultScale, "all NaN");
}

TEST(DequantizeAvx2Test, EdgeIntsAtEveryPositionOfEveryLength) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 6);
  const std::array<int32_t, 9> edges = {0, 1, -1, kMax, kMin, kMax - 1, kMin + 1, 100000000,
                                        -123456789};
  for (size_t n = 0; n <= kMaxLen; ++n) {
    std::vector<int32_t> background(n);
    for (int32_t& q : background) q = static_cast<int32_t>(rng());
    for (double scale : Scales()) {
      ExpectSameDequantize(background, scale, "background");
      for (size_t pos = 0; pos < n; ++pos) {
        for (int32_t e : edges) {
          std::vector<int32_t> in = background;
          in[pos] = e;
          ExpectSameDequantize(in, scale, "edge at pos " + std::to_string(pos));
        }
      }
    }
  }
}

TEST(DequantizeAvx2Test, RandomIntsMatchScalar) {
  SKIP_WITHOUT_AVX2();
  std::mt19937_64 rng(kSeed + 7);
  std::vector<int32_t> ints(1 << 22);
  for (int32_t& q : ints) q = static_cast<int32_t>(rng());
  for (double scale : {1.0, kDefaultScale, 1048576.0, 3.0, 1e-30, 1e30}) {
    ExpectSameDequantize(ints, scale, "random ints");
    ExpectSameDequantize(std::span<const int32_t>(ints).subspan(1, 61), scale, "offset 1");
  }
}

// Quotients that are exactly a midpoint between two floats (q = s * m for a
// 25-bit odd significand m, at scale s), their neighbours q +- 1 .. 3, and
// the same ints at power-of-two scales: the results closest to a rounding
// boundary that can be constructed, which the kernels send to their division
// (dequantize_reciprocal.h). A quotient where the multiply and the division
// would actually round to different floats needs the two doubles to straddle
// a midpoint (about 1 in 10^9 random quotients, and no closed form): the
// margin argument in dequantize_reciprocal.h covers it, not this test.
TEST(DequantizeAvx2Test, QuotientsAtFloatMidpointsMatchScalar) {
  SKIP_WITHOUT_AVX2();
  std::vector<int32_t> ints;
  for (int64_t s : {3, 5, 7, 10, 11, 100, 127}) {
    for (int64_t t = 0; t < 64; ++t) {
      for (int shift = 0; shift < 8; ++shift) {
        const int64_t m = ((int64_t{1} << 24) + 2 * t + 1) << shift;
        const int64_t q = s * m;
        if (q > kMax) continue;
        for (int64_t d = -3; d <= 3; ++d) {
          ints.push_back(static_cast<int32_t>(q + d));
          ints.push_back(static_cast<int32_t>(-(q + d)));
        }
      }
    }
  }
  for (double scale : {3.0, 5.0, 7.0, 10.0, 11.0, 100.0, 127.0, 1.0, 2.0, 1048576.0}) {
    ExpectSameDequantize(ints, scale, "midpoints");
  }
}

}  // namespace
}  // namespace atp
