// FragmentQuantizer::ToWire gives exactly QuantizeToWireScalar's bytes and
// outcome: whole fragments (the AVX-512 whole-fragment kernel where the CPU
// has one: all four blocks small, or not) and every shorter length, small
// and large products, products around half-integers, NaN, infinities and
// saturation in any block, scales that are floats and scales that are not,
// every rounding mode, output at unaligned addresses, and nothing written past
// 4 * n bytes.
#include "lib/quantize/fragment_quantizer.h"

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

constexpr size_t kValues = FragmentQuantizer::kValues;
constexpr size_t kBytes = FragmentQuantizer::kBytes;
constexpr uint64_t kSeed = 0x46525155;  // fixed: failures reproduce
constexpr uint8_t kUntouched = 0xa5;
// A frame's payload starts at byte 58: the kernel must not assume alignment.
constexpr size_t kMisalign = 2;

// Float scales (the single-precision path applies) and scales that are not
// floats (1e11 needs 26 significant bits; 0.1 has no finite binary form).
const std::array<double, 6> kScales = {kDefaultScale, 1.0, 3.0, 1e6, 1e11, 0.1};

void ExpectSameAsScalar(const FragmentQuantizer& quantizer, std::span<const float> in,
                        const std::string& what) {
  ASSERT_LE(in.size(), kValues);
  std::array<uint8_t, kBytes> want;
  want.fill(kUntouched);
  const QuantizeOutcome want_outcome = QuantizeToWireScalar(in, quantizer.scale(), want);
  std::vector<uint8_t> buffer(kMisalign + kBytes, kUntouched);
  const std::span<uint8_t, kBytes> got(buffer.data() + kMisalign, kBytes);
  ASSERT_EQ(quantizer.ToWire(in, got), want_outcome)
      << what << ": n=" << in.size() << " scale=" << quantizer.scale();
  for (size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(got[i], want[i]) << what << ": byte " << i << " n=" << in.size()
                               << " scale=" << quantizer.scale();
  }
}

// Gradient-like values (every product small at 1e8), or spread up to 30.
std::vector<float> Values(std::mt19937_64& rng, size_t n, float sigma) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// The whole-fragment AVX-512 kernel called directly (the tests below reach
// it through FragmentQuantizer only where MaxCpuIsa() allows it): small and
// large fragments, float and non-float scales. Skipped, and said so, where
// the CPU has no AVX-512.
TEST(FragmentQuantizerTest, TheAvx512KernelMatchesScalar) {
  if (!HasAvx512())
    GTEST_SKIP() << "this CPU has no AVX-512: the whole-fragment kernel is untested";
  std::mt19937_64 rng(kSeed + 4);
  for (double scale : kScales) {
    const auto as_float = static_cast<float>(scale);
    const float float_scale = double{as_float} == scale ? as_float : 0.0f;
    for (float sigma : {1e-3f, 1e-2f, 30.0f}) {
      const std::vector<float> in = Values(rng, kValues, sigma);
      std::array<uint8_t, kBytes> want;
      std::array<uint8_t, kBytes> got;
      EXPECT_EQ(quantize_internal::QuantizeFragmentToWireAvx512(in.data(), scale, float_scale,
                                                                got.data()),
                QuantizeToWireScalar(in, scale, want))
          << "scale=" << scale << " sigma=" << sigma;
      EXPECT_EQ(got, want) << "scale=" << scale << " sigma=" << sigma;
    }
  }
}

TEST(FragmentQuantizerTest, EveryLengthMatchesScalar) {
  std::mt19937_64 rng(kSeed);
  for (double scale : kScales) {
    const FragmentQuantizer quantizer(scale);
    for (float sigma : {1e-3f, 1e-2f, 1.0f, 30.0f}) {
      for (size_t n = 0; n <= kValues; ++n) {
        ExpectSameAsScalar(quantizer, Values(rng, n, sigma), "random");
        if (testing::Test::HasFatalFailure()) return;
      }
      for (int i = 0; i < 500; ++i) {
        ExpectSameAsScalar(quantizer, Values(rng, kValues, sigma), "random whole");
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// One value that leaves the single-precision path (large, a NaN, an
// infinity, a saturating value, a half-integer product) at every position
// of an otherwise small fragment: the whole fragment must then take the
// general path, with its outcome.
TEST(FragmentQuantizerTest, OneOddValueAtEveryPositionOfASmallFragment) {
  std::mt19937_64 rng(kSeed + 1);
  const float inf = std::numeric_limits<float>::infinity();
  for (double scale : kScales) {
    const FragmentQuantizer quantizer(scale);
    const std::vector<float> background = Values(rng, kValues, 1e-3f);
    const std::array<float, 7> odd = {std::numeric_limits<float>::quiet_NaN(),
                                      inf,
                                      -inf,
                                      static_cast<float>(3e9 / scale),
                                      static_cast<float>(-3e7 / scale),
                                      static_cast<float>(4194304.5 / scale),
                                      static_cast<float>(2.5 / scale)};
    for (size_t pos = 0; pos < kValues; ++pos) {
      for (float x : odd) {
        std::vector<float> in = background;
        in[pos] = x;
        ExpectSameAsScalar(quantizer, in, "odd value at " + std::to_string(pos));
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// Products just around half-integers, in whole fragments of them: the
// single-precision path's rounding (quantize_avx512.cc) where it matters.
TEST(FragmentQuantizerTest, ProductsAroundHalfIntegersMatchScalar) {
  std::mt19937_64 rng(kSeed + 2);
  for (double scale : {kDefaultScale, 3.0, 10.0, 1e6}) {
    const FragmentQuantizer quantizer(scale);
    std::vector<float> in;
    for (int i = 0; i < 20000; ++i) {
      const auto n = static_cast<int64_t>(rng() % (uint64_t{1} << (rng() % 23)));
      float x = static_cast<float>((static_cast<double>(n) + 0.5) / scale);
      if (rng() % 2 == 0) x = -x;
      for (int k = static_cast<int>(rng() % 5); k > 0; --k) x = std::nextafter(x, 0.0f);
      in.push_back(x);
      if (in.size() == kValues) {
        ExpectSameAsScalar(quantizer, in, "around half-integers");
        if (testing::Test::HasFatalFailure()) return;
        in.clear();
      }
    }
  }
}

TEST(FragmentQuantizerTest, MatchesScalarInEveryRoundingMode) {
  std::mt19937_64 rng(kSeed + 3);
  std::vector<FragmentQuantizer> quantizers;
  for (double scale : kScales) quantizers.emplace_back(scale);
  for (int mode : {FE_TOWARDZERO, FE_UPWARD, FE_DOWNWARD, FE_TONEAREST}) {
    testing_support::RoundingModeScope scope(mode);
    for (const FragmentQuantizer& quantizer : quantizers) {
      for (float sigma : {1e-2f, 30.0f}) {
        ExpectSameAsScalar(quantizer, Values(rng, kValues, sigma), "mode " + std::to_string(mode));
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

}  // namespace
}  // namespace atp
