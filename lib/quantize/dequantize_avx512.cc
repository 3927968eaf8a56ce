// AVX-512 dequantizer, bit-identical to the scalar one in quantize.cc.
//
// Why a third kernel: a worker dequantizes every parameter packet it
// receives, 62 values at a time, and the AVX2 kernel's 8-lane blocks (with
// the reciprocal check of dequantize_reciprocal.h done in two 4-lane halves)
// were about a quarter of the instructions the worker spends per packet
// (bench/RESULTS.md, "Dequantize in 16 lanes"). Here a block is 16 lanes and
// the check is one test per 8 doubles, so a fragment is 4 blocks (the last
// overlapping) instead of 8. The quantizer has its own (quantize_avx512.cc).
//
// Measured only on the Ice Lake-class Xeon VM these sessions run on. On
// Skylake-SP and Cascade Lake, 512-bit floating-point multiplies lower the
// core's clock for a while after them, which may cost the rest of the
// thread's work more than the 16 lanes save: ATP_MAX_CPU_ISA=avx2
// (atp/cpu_isa.h) keeps a process off this kernel.
//
// Compiled without -mavx512* (avx512_kernel.h). The integer side is 4-byte
// granular memory (a frame's payload for the wire form): every access is an
// unaligned load.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

#include "atp/quantize.h"

#if defined(__x86_64__) || defined(__i386__)
#include "lib/quantize/avx512_kernel.h"
#include "lib/quantize/dequantize_reciprocal.h"
#endif

namespace atp {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// The reciprocal argument's constants and conditions (dequantize_reciprocal.h).
namespace reciprocal = quantize_internal;

constexpr size_t kLanes = 16;

enum class IntOrder { kHost, kBig };

using reciprocal::ExponentCheck;

template <IntOrder kOrder>
ATP_TARGET_AVX512 inline __m512i Load16(const int32_t* src) {
  const __m512i q = _mm512_loadu_si512(src);
  if constexpr (kOrder == IntOrder::kBig) return quantize_internal::SwapBytes32(q);
  return q;
}

// Unsafe: the lanes of r whose float(r) may differ from the division's
// (dequantize_reciprocal.h): within the margin of a float midpoint, or (with
// kPerLane) outside the float normal range and not zero.
template <ExponentCheck kCheck>
ATP_TARGET_AVX512 inline __mmask8 Unsafe(__m512d r) {
  const __m512i bits = _mm512_castpd_si512(r);
  // Near: the low 29 bits of bits + margin - midpoint are below 2 * margin,
  // a power of two, so all of them at or above it are zero: one test.
  static_assert(std::has_single_bit(static_cast<uint64_t>(2 * reciprocal::kMidpointMargin)));
  const __mmask8 near = _mm512_testn_epi64_mask(
      _mm512_add_epi64(bits,
                       _mm512_set1_epi64(reciprocal::kMidpointMargin - reciprocal::kMidpoint)),
      _mm512_set1_epi64(reciprocal::kLow29Mask & ~(2 * reciprocal::kMidpointMargin - 1)));
  if constexpr (kCheck == ExponentCheck::kNone) {
    return near;
  } else {
    const __m512i exponent =
        _mm512_and_si512(_mm512_srli_epi64(bits, 52), _mm512_set1_epi64(0x7FF));
    const __mmask8 out_of_range =
        _mm512_cmplt_epi64_mask(exponent, _mm512_set1_epi64(reciprocal::kMinExponent)) |
        _mm512_cmpgt_epi64_mask(exponent, _mm512_set1_epi64(reciprocal::kMaxExponent));
    const __mmask8 nonzero = _mm512_test_epi64_mask(bits, bits);
    return static_cast<__mmask8>((near | out_of_range) & nonzero);
  }
}

// Dequantize16: dst[0, 16) from q, by multiply where every lane is safe,
// else (rare) by division, which is the definition.
template <ExponentCheck kCheck>
ATP_TARGET_AVX512 inline void Dequantize16(__m512i q, __m512d scale, const __m512d* inverse,
                                           float* dst) {
  const __m256i q_lo = _mm512_castsi512_si256(q);
  const __m256i q_hi = _mm512_extracti64x4_epi64(q, 1);
  if (inverse != nullptr) {
    const __m512d lo = _mm512_mul_pd(_mm512_cvtepi32_pd(q_lo), *inverse);
    const __m512d hi = _mm512_mul_pd(_mm512_cvtepi32_pd(q_hi), *inverse);
    if ((Unsafe<kCheck>(lo) | Unsafe<kCheck>(hi)) == 0) {
      _mm256_storeu_ps(dst, _mm512_cvtpd_ps(lo));
      _mm256_storeu_ps(dst + 8, _mm512_cvtpd_ps(hi));
      return;
    }
  }
  _mm256_storeu_ps(dst, _mm512_cvtpd_ps(_mm512_div_pd(_mm512_cvtepi32_pd(q_lo), scale)));
  _mm256_storeu_ps(dst + 8, _mm512_cvtpd_ps(_mm512_div_pd(_mm512_cvtepi32_pd(q_hi), scale)));
}

template <IntOrder kOrder, ExponentCheck kCheck>
ATP_TARGET_AVX512 void DequantizeLoopWith(const int32_t* src, size_t n, __m512d scale,
                                          const __m512d* inverse, float* dst) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Dequantize16<kCheck>(Load16<kOrder>(src + i), scale, inverse, dst + i);
  }
  // The tail as the last 16 values, overlapping the block before (the same
  // floats again): a fragment's 62 values end this way. The dispatcher only
  // calls with n >= 16.
  if (i < n) {
    Dequantize16<kCheck>(Load16<kOrder>(src + n - kLanes), scale, inverse, dst + n - kLanes);
  }
}

template <IntOrder kOrder>
ATP_TARGET_AVX512 void DequantizeLoop(const int32_t* src, size_t n, double scale, float* dst) {
  const __m512d scale8 = _mm512_set1_pd(scale);
  const double inverse = 1.0 / scale;
  const __m512d inverse8 = _mm512_set1_pd(inverse);
  const bool by_multiply = reciprocal::ReciprocalApplies(scale);
  if (by_multiply && reciprocal::ExponentsInRange(inverse)) {
    return DequantizeLoopWith<kOrder, ExponentCheck::kNone>(src, n, scale8, &inverse8, dst);
  }
  DequantizeLoopWith<kOrder, ExponentCheck::kPerLane>(src, n, scale8,
                                                      by_multiply ? &inverse8 : nullptr, dst);
}

}  // namespace

// Shorter than one block: the AVX2 kernel (masked tail) does it.
ATP_TARGET_AVX512 void DequantizeAvx512(std::span<const int32_t> in, double scale,
                                        std::span<float> out) {
  if (in.size() < kLanes) return DequantizeAvx2(in, scale, out);
  DequantizeLoop<IntOrder::kHost>(in.data(), in.size(), scale, out.data());
}

ATP_TARGET_AVX512 void DequantizeFromWireAvx512(std::span<const uint8_t> in, double scale,
                                                std::span<float> out) {
  if (out.size() < kLanes) return DequantizeFromWireAvx2(in, scale, out);
  DequantizeLoop<IntOrder::kBig>(reinterpret_cast<const int32_t*>(in.data()), out.size(), scale,
                                 out.data());
}

#else  // not x86: HasAvx512() is false and these are never called.

void DequantizeAvx512(std::span<const int32_t> in, double scale, std::span<float> out) {
  DequantizeScalar(in, scale, out);
}

void DequantizeFromWireAvx512(std::span<const uint8_t> in, double scale, std::span<float> out) {
  DequantizeFromWireScalar(in, scale, out);
}

#endif

}  // namespace atp
