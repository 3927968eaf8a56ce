// The scalar quantizer's semantics on chosen values: it is the definition the
// AVX2 version is checked against (quantize_avx2_test.cc).
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "atp/quantize.h"
#include "gtest/gtest.h"

namespace atp {
namespace {

constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr double kTwoTo20 = 1048576.0;

struct One {
  int32_t q;
  QuantizeOutcome outcome;
};

One Q(float x, double scale) {
  std::array<float, 1> in = {x};
  std::array<int32_t, 1> out = {12345};
  const QuantizeOutcome outcome = QuantizeScalar(in, scale, out);
  return {out[0], outcome};
}

void ExpectExact(float x, double scale, int32_t want) {
  const One got = Q(x, scale);
  EXPECT_EQ(got.q, want) << "x=" << x << " scale=" << scale;
  EXPECT_EQ(got.outcome, QuantizeOutcome::kExact) << "x=" << x << " scale=" << scale;
}

void ExpectNeedsFloat(float x, double scale, int32_t want) {
  const One got = Q(x, scale);
  EXPECT_EQ(got.q, want) << "x=" << x << " scale=" << scale;
  EXPECT_EQ(got.outcome, QuantizeOutcome::kNeedsFloat) << "x=" << x << " scale=" << scale;
}

TEST(QuantizeScalarTest, ScaleOneRoundsHalfToEven) {
  ExpectExact(0.5f, 1.0, 0);
  ExpectExact(1.5f, 1.0, 2);
  ExpectExact(2.5f, 1.0, 2);
  ExpectExact(3.5f, 1.0, 4);
  ExpectExact(-0.5f, 1.0, 0);
  ExpectExact(-1.5f, 1.0, -2);
  ExpectExact(-2.5f, 1.0, -2);
  ExpectExact(8388607.5f, 1.0, 8388608);  // the largest float with a .5
  ExpectExact(-8388606.5f, 1.0, -8388606);
}

TEST(QuantizeScalarTest, NonTiesRoundToNearest) {
  ExpectExact(std::nextafter(0.5f, 1.0f), 1.0, 1);
  ExpectExact(std::nextafter(0.5f, 0.0f), 1.0, 0);
  ExpectExact(std::nextafter(-2.5f, -3.0f), 1.0, -3);
  ExpectExact(2.4f, 1.0, 2);
  ExpectExact(-2.6f, 1.0, -3);
  ExpectExact(0.75f, 1.0, 1);
}

TEST(QuantizeScalarTest, PowerOfTwoScaleRoundsTiesToEven) {
  // (k + 0.5) / 2^20 is an exact float and an exact tie after scaling.
  ExpectExact(0.5f / 1048576.0f, kTwoTo20, 0);
  ExpectExact(1.5f / 1048576.0f, kTwoTo20, 2);
  ExpectExact(-5.5f / 1048576.0f, kTwoTo20, -6);
  ExpectExact(1.0f, kTwoTo20, 1 << 20);
  ExpectExact(-3.25f, kTwoTo20, -(13 << 18));
}

TEST(QuantizeScalarTest, DefaultScaleMultipliesTheWidenedFloat) {
  ExpectExact(1.0f, kDefaultScale, 100000000);
  ExpectExact(-1.5f, kDefaultScale, -150000000);
  // 0.1f is 0.100000001490116..., so the product is 10000000.149...
  ExpectExact(0.1f, kDefaultScale, 10000000);
  // The product is taken in double, not float: 1e-8f * 1e8 in float would be
  // 1, and in double it is 0.99999999392...
  ExpectExact(1e-8f, kDefaultScale, 1);
  ExpectExact(4e-9f, kDefaultScale, 0);
  ExpectExact(6e-9f, kDefaultScale, 1);
  for (float x : {0.3f, -0.7f, 12.345f, 1e-5f, -3e-7f}) {
    ExpectExact(x, kDefaultScale,
                static_cast<int32_t>(std::nearbyint(static_cast<double>(x) * kDefaultScale)));
  }
}

TEST(QuantizeScalarTest, NegativeZeroQuantizesToZero) {
  ExpectExact(-0.0f, 1.0, 0);
  ExpectExact(-0.0f, kDefaultScale, 0);
  ExpectExact(0.0f, kDefaultScale, 0);
  ExpectExact(-0.4f, 1.0, 0);
}

TEST(QuantizeScalarTest, DenormalsAreWidenedExactly) {
  const float denorm_min = std::numeric_limits<float>::denorm_min();  // 2^-149
  const float largest_denormal = std::nextafter(std::numeric_limits<float>::min(), 0.0f);
  ExpectExact(denorm_min, kDefaultScale, 0);
  ExpectExact(-denorm_min, kDefaultScale, 0);
  ExpectExact(largest_denormal, kDefaultScale, 0);
  const double two_to_149 = std::ldexp(1.0, 149);
  ExpectExact(denorm_min, two_to_149, 1);
  ExpectExact(-3 * denorm_min, two_to_149, -3);
  ExpectExact(largest_denormal, two_to_149, (1 << 23) - 1);
  ExpectExact(denorm_min, two_to_149 / 2, 0);      // 0.5: tie to even 0
  ExpectExact(3 * denorm_min, two_to_149 / 2, 2);  // 1.5: tie to even 2
}

TEST(QuantizeScalarTest, NanQuantizesToZeroAndNeedsFloat) {
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xffffffffu, 0x7fbfffffu}) {
    ExpectNeedsFloat(std::bit_cast<float>(bits), kDefaultScale, 0);
    ExpectNeedsFloat(std::bit_cast<float>(bits), 1.0, 0);
  }
}

TEST(QuantizeScalarTest, InfinitiesSaturateAndNeedFloat) {
  const float inf = std::numeric_limits<float>::infinity();
  ExpectNeedsFloat(inf, kDefaultScale, kMax);
  ExpectNeedsFloat(-inf, kDefaultScale, kMin);
  ExpectNeedsFloat(inf, 1.0, kMax);
  ExpectNeedsFloat(-inf, 1.0, kMin);
}

TEST(QuantizeScalarTest, LargeFiniteValuesSaturateAndNeedFloat) {
  ExpectNeedsFloat(std::numeric_limits<float>::max(), kDefaultScale, kMax);
  ExpectNeedsFloat(std::numeric_limits<float>::lowest(), kDefaultScale, kMin);
  ExpectNeedsFloat(2147483648.0f, 1.0, kMax);
  ExpectNeedsFloat(-2147483648.0f, 1.0, kMin);
  ExpectNeedsFloat(-2147483904.0f, 1.0, kMin);
  ExpectNeedsFloat(22.0f, kDefaultScale, kMax);
  ExpectNeedsFloat(-22.0f, kDefaultScale, kMin);
  // Scale 1e8: about +-21.47 is the limit.
  const float below = 21.474836f;  // 21.4748363494..., times 1e8 = 2147483634.9...
  ExpectExact(below, kDefaultScale, 2147483635);
  ExpectNeedsFloat(std::nextafter(below, 100.0f), kDefaultScale, kMax);
  ExpectExact(-below, kDefaultScale, -2147483635);
  ExpectNeedsFloat(-std::nextafter(below, 100.0f), kDefaultScale, kMin);
}

TEST(QuantizeScalarTest, LargestFloatBelowTheBoundIsExact) {
  ExpectExact(2147483520.0f, 1.0, 2147483520);  // nextafter(2^31, 0)
  ExpectExact(-2147483520.0f, 1.0, -2147483520);
}

// A rounded product equal to a bound saturates too: the int path carries only
// values strictly inside (INT32_MIN, INT32_MAX), so the bound means overflow.
TEST(QuantizeScalarTest, RoundedProductAtABoundNeedsFloat) {
  ExpectExact(1.0f, 2147483646.0, 2147483646);
  ExpectNeedsFloat(1.0f, 2147483647.0, kMax);
  ExpectExact(1.0f, 2147483646.5, 2147483646);  // tie, to even: inside
  ExpectNeedsFloat(1.0f, std::nextafter(2147483646.5, 3e9), kMax);
  ExpectExact(-1.0f, 2147483647.0, -2147483647);
  ExpectNeedsFloat(-1.0f, 2147483647.5, kMin);  // tie, to even -2^31: a bound
  ExpectExact(-1.0f, std::nextafter(2147483647.5, 0.0), -2147483647);
  ExpectNeedsFloat(-1.0f, 2147483648.0, kMin);
  ExpectNeedsFloat(1.0f, 2147483647.5, kMax);  // tie, to even 2^31: past the bound
}

TEST(QuantizeScalarTest, OneBadValueAnywhereMakesTheFragmentNeedFloat) {
  std::vector<float> in(62, 0.25f);
  std::vector<int32_t> out(62);
  EXPECT_EQ(QuantizeScalar(in, kDefaultScale, out), QuantizeOutcome::kExact);
  for (size_t pos : {size_t{0}, size_t{31}, size_t{61}}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), 30.0f, -30.0f,
                      std::numeric_limits<float>::infinity()}) {
      std::vector<float> v = in;
      v[pos] = bad;
      EXPECT_EQ(QuantizeScalar(v, kDefaultScale, out), QuantizeOutcome::kNeedsFloat);
      // The others are still quantized.
      EXPECT_EQ(out[pos == 0 ? 1 : 0], 25000000);
    }
  }
}

TEST(QuantizeScalarTest, EmptyInputIsExactAndWritesNothing) {
  std::array<int32_t, 2> out = {7, 8};
  EXPECT_EQ(QuantizeScalar({}, kDefaultScale, out), QuantizeOutcome::kExact);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[1], 8);
}

TEST(QuantizeScalarTest, OutputBeyondTheInputIsUntouched) {
  std::array<float, 3> in = {1.0f, 2.0f, 3.0f};
  std::array<int32_t, 5> out = {-1, -1, -1, -1, -1};
  EXPECT_EQ(QuantizeScalar(in, 1.0, out), QuantizeOutcome::kExact);
  EXPECT_EQ(out, (std::array<int32_t, 5>{1, 2, 3, -1, -1}));
  std::array<float, 5> fout = {-1, -1, -1, -1, -1};
  DequantizeScalar(std::span<const int32_t>(out).first(2), 1.0, fout);
  EXPECT_EQ(fout, (std::array<float, 5>{1, 2, -1, -1, -1}));
}

TEST(DequantizeScalarTest, DividesTheSumByTheScale) {
  // Three workers' values summed as the switches do, then dequantized.
  const std::array<float, 3> worker_values = {0.25f, -1.125f, 3.0f};
  int32_t sum = 0;
  for (float x : worker_values) sum += Q(x, kDefaultScale).q;
  EXPECT_EQ(sum, 212500000);
  std::array<float, 1> out;
  DequantizeScalar(std::array<int32_t, 1>{sum}, kDefaultScale, out);
  EXPECT_EQ(out[0], 2.125f);

  std::array<int32_t, 6> q = {0, 1, -1, 100000000, kMax, kMin};
  std::array<float, 6> f;
  DequantizeScalar(q, kDefaultScale, f);
  EXPECT_EQ(f[0], 0.0f);
  EXPECT_EQ(f[1], static_cast<float>(1e-8));
  EXPECT_EQ(f[2], static_cast<float>(-1e-8));
  EXPECT_EQ(f[3], 1.0f);
  EXPECT_EQ(f[4], static_cast<float>(21.47483647));
  EXPECT_EQ(f[5], static_cast<float>(-21.47483648));
  DequantizeScalar(std::array<int32_t, 2>{3 << 19, -(5 << 18)}, kTwoTo20, f);
  EXPECT_EQ(f[0], 1.5f);
  EXPECT_EQ(f[1], -1.25f);
}

TEST(DequantizeScalarTest, RoundTripOfAQuantizedValueIsWithinHalfAStep) {
  for (float x : {0.1f, -0.7f, 3.14159f, 1e-6f, -21.0f}) {
    std::array<float, 1> back;
    DequantizeScalar(std::array<int32_t, 1>{Q(x, kDefaultScale).q}, kDefaultScale, back);
    EXPECT_NEAR(back[0], x, 0.5e-8 + std::abs(x) * 1e-7) << x;
  }
}

// Dequantize is float(double(q) / scale): the correctly rounded quotient, not
// q * (1 / scale), which differs from it in the double for many q.
TEST(DequantizeScalarTest, IsTheFloatOfTheCorrectlyRoundedQuotient) {
  const double reciprocal = 1.0 / kDefaultScale;
  int double_differs = 0;
  std::array<float, 1> out;
  for (int32_t q = -1'000'000'000; q < 1'000'000'000; q += 999'983) {
    const double quotient = static_cast<double>(q) / kDefaultScale;
    if (quotient != static_cast<double>(q) * reciprocal) ++double_differs;
    DequantizeScalar(std::array<int32_t, 1>{q}, kDefaultScale, out);
    ASSERT_EQ(out[0], static_cast<float>(quotient)) << "q=" << q;
    Dequantize(std::array<int32_t, 1>{q}, kDefaultScale, out);
    ASSERT_EQ(out[0], static_cast<float>(quotient)) << "q=" << q;
  }
  // Why the form is pinned: the reciprocal form is not the same double.
  EXPECT_GT(double_differs, 100);
}

TEST(QuantizeDispatchTest, HasAvx2MatchesTheCpu) {
#if defined(__x86_64__)
  EXPECT_EQ(HasAvx2(), __builtin_cpu_supports("avx2") != 0);
#else
  EXPECT_FALSE(HasAvx2());
#endif
  EXPECT_EQ(HasAvx2(), HasAvx2());
}

TEST(QuantizeDispatchTest, HasAvx512MatchesTheCpu) {
#if defined(__x86_64__)
  EXPECT_EQ(HasAvx512(), HasAvx2() && __builtin_cpu_supports("avx512f") != 0 &&
                             __builtin_cpu_supports("avx512bw") != 0);
#else
  EXPECT_FALSE(HasAvx512());
#endif
}

TEST(QuantizeDispatchTest, DispatchersAgreeWithScalar) {
  std::vector<float> in;
  for (int i = 0; i < 100; ++i) in.push_back(static_cast<float>(i - 50) * 0.37f);
  in.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<int32_t> a(in.size()), b(in.size());
  for (size_t n : {size_t{0}, size_t{62}, size_t{100}, in.size()}) {
    std::span<const float> part(in.data(), n);
    EXPECT_EQ(Quantize(part, kDefaultScale, a), QuantizeScalar(part, kDefaultScale, b));
    EXPECT_EQ(a, b);
  }
  std::vector<float> fa(a.size()), fb(a.size());
  Dequantize(a, kDefaultScale, fa);
  DequantizeScalar(a, kDefaultScale, fb);
  EXPECT_EQ(fa, fb);
}

// HasAvx2's cached answer is initialized once, safely, whichever thread asks
// first (run under -fsanitize=thread in CI).
TEST(QuantizeDispatchTest, CallableFromSeveralThreadsAtOnce) {
  std::vector<float> in(62, 0.5f);
  std::array<std::vector<int32_t>, 4> outs;
  std::array<QuantizeOutcome, 4> outcomes;
  std::vector<std::thread> threads;
  for (size_t t = 0; t < outs.size(); ++t) {
    outs[t].resize(in.size());
    threads.emplace_back([&, t] { outcomes[t] = Quantize(in, kDefaultScale, outs[t]); });
  }
  for (std::thread& th : threads) th.join();
  for (size_t t = 0; t < outs.size(); ++t) {
    EXPECT_EQ(outcomes[t], QuantizeOutcome::kExact);
    EXPECT_EQ(outs[t], std::vector<int32_t>(in.size(), 50000000));
  }
}

}  // namespace
}  // namespace atp
