// QuantizeToWire / DequantizeFromWire (network byte order, straight into and
// out of a frame's payload) give exactly the bits of Quantize / Dequantize
// with each int32 byte-swapped to big-endian: every implementation (scalar,
// AVX2, the dispatcher), every length 0..70 (the vector body and every tail),
// edge values at every position, unaligned buffers, and nothing written past
// the 4 * n bytes.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "atp/cpu_isa.h"
#include "atp/quantize.h"
#include "gtest/gtest.h"

namespace atp {
namespace {

constexpr size_t kMaxLen = 70;
constexpr uint8_t kSentinel = 0xa5;
constexpr uint64_t kSeed = 0x57495245;  // fixed: failures reproduce
// Offsets into the byte buffers: payloads sit at odd addresses in a frame
// (byte 58), so the kernels must not assume alignment.
constexpr size_t kMisalign = 3;

struct Impl {
  const char* name;
  QuantizeToWireFn quantize;
  DequantizeFromWireFn dequantize;
  bool (*available)();  // whether this CPU can run it
};

bool Always() { return true; }

// The AVX-512 row pairs the AVX2 quantizer (there is no AVX-512 one) with
// the AVX-512 dequantizer.
const Impl kImpls[] = {
    {"scalar", QuantizeToWireScalar, DequantizeFromWireScalar, Always},
    {"avx2", QuantizeToWireAvx2, DequantizeFromWireAvx2, HasAvx2},
    {"avx512", QuantizeToWireAvx512, DequantizeFromWireAvx512, HasAvx512},
    {"dispatch", QuantizeToWire, DequantizeFromWire, Always},
};

std::vector<uint8_t> BigEndian(std::span<const int32_t> q) {
  std::vector<uint8_t> bytes(q.size() * 4);
  for (size_t i = 0; i < q.size(); ++i) {
    const auto u = static_cast<uint32_t>(q[i]);
    bytes[4 * i] = static_cast<uint8_t>(u >> 24);
    bytes[4 * i + 1] = static_cast<uint8_t>(u >> 16);
    bytes[4 * i + 2] = static_cast<uint8_t>(u >> 8);
    bytes[4 * i + 3] = static_cast<uint8_t>(u);
  }
  return bytes;
}

void ExpectQuantizeToWireMatches(const Impl& impl, std::span<const float> in, double scale,
                                 const std::string& what) {
  std::vector<int32_t> q(in.size());
  const QuantizeOutcome want_outcome = QuantizeScalar(in, scale, q);
  const std::vector<uint8_t> want = BigEndian(q);
  std::vector<uint8_t> buffer(kMisalign + 4 * in.size() + 8, kSentinel);
  const std::span<uint8_t> out = std::span(buffer).subspan(kMisalign, 4 * in.size());
  ASSERT_EQ(impl.quantize(in, scale, out), want_outcome) << impl.name << " " << what;
  ASSERT_TRUE(std::equal(out.begin(), out.end(), want.begin()))
      << impl.name << " " << what << " n=" << in.size() << " scale=" << scale;
  for (size_t i = 0; i < kMisalign; ++i) ASSERT_EQ(buffer[i], kSentinel) << impl.name;
  for (size_t i = kMisalign + out.size(); i < buffer.size(); ++i) {
    ASSERT_EQ(buffer[i], kSentinel) << impl.name << " wrote past the end, n=" << in.size();
  }
}

std::vector<float> EdgeValues() {
  const float inf = std::numeric_limits<float>::infinity();
  return {std::bit_cast<float>(0x7fc00000u), inf, -inf, 0.0f, -0.0f,
          std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
          std::numeric_limits<float>::lowest(), 0.5f, -2.5f, 21.474836f, 21.474838f,
          -21.474838f, 2147483648.0f, -2147483648.0f};
}

TEST(QuantizeToWireTest, EqualsQuantizeInBigEndianForEveryLengthAndEdge) {
  std::mt19937_64 rng(kSeed);
  std::normal_distribution<float> gradient(0.0f, 1e-2f);
  const std::vector<float> edges = EdgeValues();
  for (const Impl& impl : kImpls) {
    if (!impl.available()) continue;
    for (size_t n = 0; n <= kMaxLen; ++n) {
      std::vector<float> background(n);
      for (float& x : background) x = gradient(rng);
      for (double scale : {kDefaultScale, 1.0, 1048576.0}) {
        ExpectQuantizeToWireMatches(impl, background, scale, "background");
        for (size_t pos = 0; pos < n; ++pos) {
          for (float e : edges) {
            std::vector<float> in = background;
            in[pos] = e;
            ExpectQuantizeToWireMatches(impl, in, scale, "edge at " + std::to_string(pos));
            if (testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(QuantizeToWireTest, RandomBitPatternsInLongBuffers) {
  // Longer than the AVX2 kernel's 1024-value NaN-fix chunk.
  std::mt19937_64 rng(kSeed + 1);
  std::vector<float> values(5000);
  for (float& x : values) x = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  for (const Impl& impl : kImpls) {
    if (!impl.available()) continue;
    ExpectQuantizeToWireMatches(impl, values, 1.0, "random bits");
  }
}

TEST(DequantizeFromWireTest, EqualsDequantizeOfTheSwappedInts) {
  std::mt19937_64 rng(kSeed + 2);
  for (const Impl& impl : kImpls) {
    if (!impl.available()) continue;
    for (size_t n = 0; n <= kMaxLen; ++n) {
      std::vector<int32_t> q(n);
      for (int32_t& v : q) v = static_cast<int32_t>(static_cast<uint32_t>(rng()));
      if (n > 0) q[0] = std::numeric_limits<int32_t>::min();
      if (n > 1) q[n - 1] = std::numeric_limits<int32_t>::max();
      std::vector<float> want(n);
      DequantizeScalar(q, kDefaultScale, want);
      const std::vector<uint8_t> bytes = BigEndian(q);
      std::vector<uint8_t> buffer(kMisalign + bytes.size());
      std::copy(bytes.begin(), bytes.end(), buffer.begin() + kMisalign);
      const float sentinel = std::bit_cast<float>(0x5a5a5a5au);
      std::vector<float> got(n + 1, sentinel);
      impl.dequantize(std::span<const uint8_t>(buffer).subspan(kMisalign), kDefaultScale,
                      std::span(got).first(n));
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << impl.name << " n=" << n << " i=" << i;
      }
      EXPECT_EQ(std::bit_cast<uint32_t>(got[n]), std::bit_cast<uint32_t>(sentinel)) << impl.name;
    }
  }
}

// The kernels a per-packet caller keeps are the ones the dispatchers call:
// the widest MaxCpuIsa() allows.
TEST(DequantizeFromWireTest, TheChosenKernelsAreTheWidestMaxCpuIsaAllows) {
  const DequantizeFromWireFn expected = MaxCpuIsa() >= CpuIsa::kAvx512 ? &DequantizeFromWireAvx512
                                        : MaxCpuIsa() >= CpuIsa::kAvx2 ? &DequantizeFromWireAvx2
                                                                       : &DequantizeFromWireScalar;
  EXPECT_EQ(ChosenDequantizeFromWire(), expected);
  const QuantizeToWireFn expected_quantize = MaxCpuIsa() >= CpuIsa::kAvx512 ? &QuantizeToWireAvx512
                                             : MaxCpuIsa() >= CpuIsa::kAvx2 ? &QuantizeToWireAvx2
                                                                            : &QuantizeToWireScalar;
  EXPECT_EQ(ChosenQuantizeToWire(), expected_quantize);
}

}  // namespace
}  // namespace atp
