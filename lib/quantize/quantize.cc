// Scalar quantizer (the reference definition) and the run-time dispatch.
//
// The scalar code is the specification the AVX2 versions (quantize_avx2.cc)
// and the AVX-512 ones (quantize_avx512.cc, dequantize_avx512.cc) are tested
// against bit for bit; keep it obviously correct rather than fast.
#include "atp/quantize.h"

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>

#include "atp/cpu_isa.h"
#include "lib/wire/byte_order.h"

namespace atp {
namespace {

constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min();

// Both bounds are exactly representable as doubles.
static_assert(static_cast<double>(kMax) == 2147483647.0);
static_assert(static_cast<double>(kMin) == -2147483648.0);

// QuantizeOne: one value, q = saturate(round_half_even(double(x) * scale)).
// Sets *needs_float when x is NaN or the rounded product is >= kMax or <= kMin
// (the int path only carries values strictly inside the int32 range).
//
// Rounding is done by hand rather than with std::nearbyint so that it is
// half-even whatever the current rounding mode, like the AVX2 version's
// _MM_FROUND_TO_NEAREST_INT. The product itself is an ordinary IEEE multiply,
// as it is in the AVX2 version.
inline int32_t QuantizeOne(float x, double scale, bool* needs_float) {
  const double p = static_cast<double>(x) * scale;
  if (std::isnan(p)) {
    *needs_float = true;
    return 0;
  }
  // Rounding is monotone and the bounds are integers, so a product at or past
  // a bound rounds to at or past it. This also catches +-inf.
  if (p >= static_cast<double>(kMax)) {
    *needs_float = true;
    return kMax;
  }
  if (p <= static_cast<double>(kMin)) {
    *needs_float = true;
    return kMin;
  }
  // Now -2^31 < p < 2^31 - 1: truncation to int64 is exact and p - t is the
  // exact fractional part, in (-1, 1).
  // Written without branches: the direction is a coin flip on real data.
  int64_t t = static_cast<int64_t>(p);
  const double frac = p - static_cast<double>(t);
  const int64_t odd = t & 1;
  t += static_cast<int64_t>(frac > 0.5) | (static_cast<int64_t>(frac == 0.5) & odd);
  t -= static_cast<int64_t>(frac < -0.5) | (static_cast<int64_t>(frac == -0.5) & odd);
  if (t >= kMax) {
    *needs_float = true;
    return kMax;
  }
  if (t <= kMin) {
    *needs_float = true;
    return kMin;
  }
  return static_cast<int32_t>(t);
}

// StoreBig32 / LoadBig32: one int32 in network byte order at unaligned p
// (lib/wire/byte_order.h, the one home of byte order).
inline void StoreBig32(uint8_t* p, int32_t v) {
  wire::internal::StoreBig32(p, static_cast<uint32_t>(v));
}
inline int32_t LoadBig32(const uint8_t* p) {
  return static_cast<int32_t>(wire::internal::LoadBig32(p));
}

}  // namespace

QuantizeOutcome QuantizeScalar(std::span<const float> in, double scale, std::span<int32_t> out) {
  bool needs_float = false;
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {
    out[i] = QuantizeOne(in[i], scale, &needs_float);
  }
  return needs_float ? QuantizeOutcome::kNeedsFloat : QuantizeOutcome::kExact;
}

// Division, not multiplication by a precomputed 1/scale: double(q) / scale is
// one correctly rounded IEEE operation, the spec's "int32 sum / s", so every
// implementation (this one, the AVX2 one, the PS, a worker on another CPU or
// in another language) gets the same bits from the same q and scale by
// construction. 1/scale is itself rounded (1e8 has no exact reciprocal), so
// q * (1/scale) is rounded twice and differs from q / scale in the last bit
// of the double for 13-50% of q at the scales we tried. The final rounding to
// float hides that in practice (an exhaustive search over all 2^31 positive q
// at scales 1e8, 1e6, 1e7, 1e9, 3, 1000 and 12345.678 found no differing
// float), but the scale is any per-job double and "found none" is not a
// guarantee. The division bounded dequantize (about 5 GB/s of float32 with
// AVX2, bench/quantize_bench.cc) and, with it, a worker's receive path, so
// the AVX2 version multiplies by 1/scale wherever that provably gives these
// same bits and divides only near a float rounding boundary
// (quantize_avx2.cc, "Dequantize by reciprocal").
void DequantizeScalar(std::span<const int32_t> in, double scale, std::span<float> out) {
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(static_cast<double>(in[i]) / scale);
  }
}

QuantizeOutcome QuantizeToWireScalar(std::span<const float> in, double scale,
                                     std::span<uint8_t> out) {
  bool needs_float = false;
  const size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {
    StoreBig32(out.data() + 4 * i, QuantizeOne(in[i], scale, &needs_float));
  }
  return needs_float ? QuantizeOutcome::kNeedsFloat : QuantizeOutcome::kExact;
}

void DequantizeFromWireScalar(std::span<const uint8_t> in, double scale, std::span<float> out) {
  const size_t n = out.size();
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<float>(static_cast<double>(LoadBig32(in.data() + 4 * i)) / scale);
  }
}

bool HasAvx2() { return CpuIsaOfThisCpu() >= CpuIsa::kAvx2; }

bool HasAvx512() { return CpuIsaOfThisCpu() >= CpuIsa::kAvx512; }

// The dispatchers below use what MaxCpuIsa() allows (the CPU's, capped by
// ATP_MAX_CPU_ISA): at most CpuIsaOfThisCpu(), so each kernel they call may run.

QuantizeOutcome Quantize(std::span<const float> in, double scale, std::span<int32_t> out) {
  if (MaxCpuIsa() >= CpuIsa::kAvx512) return QuantizeAvx512(in, scale, out);
  if (MaxCpuIsa() >= CpuIsa::kAvx2) return QuantizeAvx2(in, scale, out);
  return QuantizeScalar(in, scale, out);
}

void Dequantize(std::span<const int32_t> in, double scale, std::span<float> out) {
  if (MaxCpuIsa() >= CpuIsa::kAvx512) {
    DequantizeAvx512(in, scale, out);
  } else if (MaxCpuIsa() >= CpuIsa::kAvx2) {
    DequantizeAvx2(in, scale, out);
  } else {
    DequantizeScalar(in, scale, out);
  }
}

QuantizeOutcome QuantizeToWire(std::span<const float> in, double scale, std::span<uint8_t> out) {
  return ChosenQuantizeToWire()(in, scale, out);
}

QuantizeToWireFn ChosenQuantizeToWire() {
  if (MaxCpuIsa() >= CpuIsa::kAvx512) return &QuantizeToWireAvx512;
  if (MaxCpuIsa() >= CpuIsa::kAvx2) return &QuantizeToWireAvx2;
  return &QuantizeToWireScalar;
}

void DequantizeFromWire(std::span<const uint8_t> in, double scale, std::span<float> out) {
  ChosenDequantizeFromWire()(in, scale, out);
}

DequantizeFromWireFn ChosenDequantizeFromWire() {
  if (MaxCpuIsa() >= CpuIsa::kAvx512) return &DequantizeFromWireAvx512;
  if (MaxCpuIsa() >= CpuIsa::kAvx2) return &DequantizeFromWireAvx2;
  return &DequantizeFromWireScalar;
}

}  // namespace atp
