// AVX-512 dequantizer, bit-identical to the scalar one in quantize.cc.
//
// Why a third kernel: a worker dequantizes every parameter packet it
// receives, 62 values at a time, and the AVX2 kernel's 8-lane blocks (with
// the reciprocal check of dequantize_reciprocal.h done in two 4-lane halves)
// were about a quarter of the instructions the worker spends per packet
// (bench/RESULTS.md, "Dequantize in 16 lanes"). Here a block is 16 lanes and
// the check is one test per 8 doubles, so a fragment is 4 blocks (the last
// overlapping) instead of 8. The quantizer has its own (quantize_avx512.cc).
// The worker's whole-fragment kernel (KeepAndDequantizeFragmentAvx512, for
// FragmentDequantizer) also takes single precision where that is exact
// (DequantizeSmall16) and keeps the wire bytes for replays.
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
#include <cstring>
#include <span>

#include "atp/quantize.h"
#include "lib/quantize/fragment_dequantizer.h"

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

// Dequantize in single precision, exactly, where the ints are small and the
// scale is a float (the default 1e8 is): 16 lanes per vector and no
// conversions between widths: 9 vector instructions per 16 lanes against the
// double-precision path's 14. The definition is f = float(double(q) / s).
//
// 1. One rounding suffices. Let |q| <= 2^24 (an exact float) and s a float,
//    x = q / s. If x is not a float midpoint, its distance to the nearest
//    midpoint m = M * 2^e (M a 25-bit odd integer) is |q - m * s| / s, and
//    m * s = M * S * 2^(e + f) (s = S * 2^f, S a 24-bit integer): a nonzero
//    multiple of min(1, 2^(e + f)), so relative to x at least 2^-49. The
//    double division moves x by at most 2^-53 relative: never onto or across
//    a midpoint. If x is a midpoint, the double division is exact. Either
//    way f = RN_float(x), the correctly rounded single-precision quotient.
// 2. RN_float(q / s) with FMAs (Markstein's theorem: if y = RN(1 / s) and
//    q1 is a faithful approximation of x, then RN(q1 + (q - s * q1) * y) =
//    RN(x), the remainder being exact): q0 = RN(q * y) is within about 2
//    ulps of x; one correction q1 = RN(q0 + RN(q - s * q0) * y) is within
//    half an ulp plus 2^-45 relative, so faithful; a second correction is
//    RN(x).
// Preconditions (FragmentDequantizer's constructor and this kernel's
// caller): s a float in [2^-24, 2^64], so every step is far from overflow
// and from denormals; y = RN(1 / s) exactly; the thread rounds to nearest
// (the products and sums above are RN). Tested exhaustively at the default
// scale (every |q| <= 2^24) and on every 61st of them at others
// (FragmentDequantizerTest).
struct FloatQuotient {
  __m512 scale;       // s
  __m512 reciprocal;  // RN(1 / s)
};

// DequantizeSmall16: dst[0, 16) from q by the single-precision argument
// when every lane has |q| <= 2^24; false (nothing written) otherwise.
ATP_TARGET_AVX512 inline bool DequantizeSmall16(__m512i q, const FloatQuotient& fq, float* dst) {
  // |q| <= 2^24 as one unsigned compare: q + 2^24 <= 2^25.
  const __mmask16 small = _mm512_cmple_epu32_mask(_mm512_add_epi32(q, _mm512_set1_epi32(1 << 24)),
                                                  _mm512_set1_epi32(1 << 25));
  if (small != 0xFFFF) return false;
  const __m512 a = _mm512_cvtepi32_ps(q);  // exact
  const __m512 q0 = _mm512_mul_ps(a, fq.reciprocal);
  const __m512 q1 = _mm512_fmadd_ps(_mm512_fnmadd_ps(fq.scale, q0, a), fq.reciprocal, q0);
  const __m512 q2 = _mm512_fmadd_ps(_mm512_fnmadd_ps(fq.scale, q1, a), fq.reciprocal, q1);
  _mm512_storeu_ps(dst, q2);
  return true;
}

// KeepAndDequantize62: a whole fragment in four blocks (values 0, 16, 32,
// then 46..61 overlapping the third), each block's wire bytes stored to
// `keep` from the load that converts them, as whole non-temporal lines:
// bytes 0..191 as the first three blocks, then 192..247 and 8 zeros (the
// fourth block moved down by its 8 bytes of overlap). A block goes the
// single-precision way when `small` allows and its ints are small, else the
// double-precision one.
template <ExponentCheck kCheck>
ATP_TARGET_AVX512 inline void KeepAndDequantize62(const uint8_t* payload, __m512d scale,
                                                  const __m512d* inverse,
                                                  const FloatQuotient* small, float* out,
                                                  uint8_t* keep) {
  static_assert(FragmentDequantizer::kValues == 62);
  // Unrolled: the blocks' dependency chains (five roundings deep on the
  // single-precision path) overlap instead of running one after another.
#pragma GCC unroll 4
  for (const size_t first : {size_t{0}, size_t{16}, size_t{32}, size_t{46}}) {
    const __m512i wire = _mm512_loadu_si512(payload + first * sizeof(int32_t));
    if (first < 46) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(keep + first * sizeof(int32_t)), wire);
    } else {
      // Lanes 2..15 (values 48..61) to lanes 0..13, zeros in 14 and 15.
      _mm512_stream_si512(reinterpret_cast<__m512i*>(keep + 192),
                          _mm512_alignr_epi32(_mm512_setzero_si512(), wire, 2));
    }
    const __m512i q = quantize_internal::SwapBytes32(wire);
    if (small != nullptr && DequantizeSmall16(q, *small, out + first)) continue;
    Dequantize16<kCheck>(q, scale, inverse, out + first);
  }
}

}  // namespace

namespace quantize_internal {

ATP_TARGET_AVX512 void KeepAndDequantizeFragmentAvx512(
    const uint8_t* payload, const FragmentDequantizer::Constants& constants, float* out,
    uint8_t* keep) {
  const __m512d scale8 = _mm512_set1_pd(constants.scale);
  const __m512d inverse8 = _mm512_set1_pd(constants.inverse);
  const bool nearest = reciprocal::MxcsrRoundsToNearest();
  const bool by_multiply = constants.by_multiply && nearest;
  const FloatQuotient small{.scale = _mm512_set1_ps(constants.float_scale),
                            .reciprocal = _mm512_set1_ps(constants.float_reciprocal)};
  const FloatQuotient* const small_ok = constants.float_quotient && nearest ? &small : nullptr;
  if (by_multiply && constants.exponents_in_range) {
    return KeepAndDequantize62<ExponentCheck::kNone>(payload, scale8, &inverse8, small_ok, out,
                                                     keep);
  }
  KeepAndDequantize62<ExponentCheck::kPerLane>(payload, scale8, by_multiply ? &inverse8 : nullptr,
                                               small_ok, out, keep);
}

}  // namespace quantize_internal

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

namespace quantize_internal {
void KeepAndDequantizeFragmentAvx512(const uint8_t* payload,
                                     const FragmentDequantizer::Constants& constants, float* out,
                                     uint8_t* keep) {
  DequantizeFromWireScalar({payload, FragmentDequantizer::kBytes}, constants.scale,
                           {out, FragmentDequantizer::kValues});
  std::memcpy(keep, payload, FragmentDequantizer::kBytes);
  std::memset(keep + FragmentDequantizer::kBytes, 0,
              FragmentDequantizer::kKeptBytes - FragmentDequantizer::kBytes);
}
}  // namespace quantize_internal

void DequantizeAvx512(std::span<const int32_t> in, double scale, std::span<float> out) {
  DequantizeScalar(in, scale, out);
}

void DequantizeFromWireAvx512(std::span<const uint8_t> in, double scale, std::span<float> out) {
  DequantizeFromWireScalar(in, scale, out);
}

#endif

}  // namespace atp
