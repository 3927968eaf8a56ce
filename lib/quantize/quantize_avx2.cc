// AVX2 quantizer, bit-identical to the scalar one in quantize.cc.
//
// Compiled without -mavx2: each function carries __attribute__((target("avx2")))
// so the library still loads and runs on any x86-64; the dispatchers in
// quantize.cc call these only when HasAvx2().
//
// Quantize, 8 floats (two halves of 4) at a time:
//   1. Widen to double (exact) and multiply by scale: the same IEEE multiply
//      as the scalar code.
//   2. min(INT32_MAX, p), with p as the second operand so that a NaN p stays
//      NaN (vminpd returns its second operand when either is NaN). +inf and
//      everything at or above the bound become exactly INT32_MAX.
//   3. Round half-even and convert (see Rounding). Everything that rounds
//      below INT32_MIN, -inf and NaN come out as 0x80000000 == INT32_MIN: the
//      saturated value for the first two, a value to fix for NaN.
//   4. The outcome: an in-range lane is strictly inside (INT32_MIN, INT32_MAX)
//      and every other lane is exactly a bound, so a running min/max of the
//      outputs decides kNeedsFloat (a NaN lane reads as INT32_MIN).
//   5. NaN -> 0: the input is processed in chunks of kChunk floats; a chunk
//      whose minimum output is INT32_MIN (rare: a NaN or a negative overflow,
//      both kNeedsFloat) is scanned again while still in L1, and NaN lanes
//      are set to 0. This keeps the common path free of NaN work: zeroing
//      NaNs up front (compare, and-not per 8 floats) measured 30% slower.
// A tail of 1..7 elements is the last 8 values again, overlapping the block
// before (the same results again, plain loads and stores), or, in a buffer
// shorter than 8, the same code with masked loads and stores (masked-off
// lanes read as 0.0f and are never written).
//
// Where the CPU has AVX-512 the dispatchers use quantize_avx512.cc instead
// (16 lanes, embedded rounding: fewer instructions per fragment); this
// kernel also does its calls shorter than 16 values.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "atp/quantize.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "lib/quantize/dequantize_reciprocal.h"
#define ATP_TARGET_AVX2 __attribute__((target("avx2")))
#endif

namespace atp {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using quantize_internal::ExponentCheck;
using quantize_internal::ExponentsInRange;
using quantize_internal::kLow29Mask;
using quantize_internal::kMaxExponent;
using quantize_internal::kMidpoint;
using quantize_internal::kMidpointMargin;
using quantize_internal::kMinExponent;
using quantize_internal::MxcsrRoundsToNearest;
using quantize_internal::ReciprocalApplies;

constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr size_t kLanes = 8;
// kChunk: floats per NaN-fix unit (step 5); 4 KiB of input, well inside L1.
constexpr size_t kChunk = 1024;
static_assert(kChunk % kLanes == 0, "only the last chunk may have a tail");

// kTailMask + (8 - rem) holds rem all-ones lanes followed by zero lanes.
alignas(64) constexpr int32_t kTailMask[2 * kLanes] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                      0,  0,  0,  0,  0,  0,  0,  0};

ATP_TARGET_AVX2 inline __m256i TailMask(size_t rem) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTailMask + (kLanes - rem)));
}

// How a block rounds the scaled product to an integer, half-even either way.
enum class Rounding {
  // vcvtpd2dq rounds as MXCSR says: used only when MXCSR is round-to-nearest
  // (always, unless the program changed it); one instruction rounds and
  // converts.
  kMxcsrNearest,
  // vroundpd with an explicit round-to-nearest immediate, then a truncating
  // vcvttpd2dq: correct under any MXCSR rounding mode.
  kImmediate,
};

template <Rounding kRounding>
ATP_TARGET_AVX2 inline __m128i QuantizeHalf(__m128 x, __m256d scale) {
  const __m256d max = _mm256_set1_pd(static_cast<double>(kMax));
  const __m256d p = _mm256_mul_pd(_mm256_cvtps_pd(x), scale);
  if constexpr (kRounding == Rounding::kMxcsrNearest) {
    return _mm256_cvtpd_epi32(_mm256_min_pd(max, p));
  } else {
    const __m256d r = _mm256_round_pd(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_cvttpd_epi32(_mm256_min_pd(max, r));
  }
}

// Bounds of the outputs so far: see step 4.
struct MinMax {
  __m256i min;
  __m256i max;
};

template <Rounding kRounding>
ATP_TARGET_AVX2 inline __m256i Quantize8(__m128 lo, __m128 hi, __m256d scale, MinMax* seen) {
  const __m256i q = _mm256_inserti128_si256(
      _mm256_castsi128_si256(QuantizeHalf<kRounding>(lo, scale)), QuantizeHalf<kRounding>(hi, scale),
      1);
  seen->min = _mm256_min_epi32(seen->min, q);
  seen->max = _mm256_max_epi32(seen->max, q);
  return q;
}

// Where the int32 side of a kernel lives: host order (Quantize, Dequantize)
// or network order, as a frame's payload (QuantizeToWire, DequantizeFromWire).
// Big-endian costs one byte shuffle per 8 values, in registers.
enum class IntOrder { kHost, kBig };

// Swap32Control: the vpshufb control reversing the bytes of each 32-bit lane.
ATP_TARGET_AVX2 inline __m256i Swap32Control() {
  return _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7, 6,
                          5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
}

template <IntOrder kOrder>
ATP_TARGET_AVX2 inline __m256i ToOrder(__m256i q) {
  if constexpr (kOrder == IntOrder::kBig) return _mm256_shuffle_epi8(q, Swap32Control());
  return q;
}

// QuantizeChunk: quantizes src[0, n) into dst (n int32 in kOrder), NaN lanes
// left as INT32_MIN. dst is only 4-byte granular memory: for kBig it is the
// frame's payload bytes (unaligned stores and masked stores are both fine).
template <Rounding kRounding, IntOrder kOrder>
ATP_TARGET_AVX2 inline void QuantizeChunk(const float* src, size_t n, __m256d scale, int32_t* dst,
                                          MinMax* seen) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i q =
        Quantize8<kRounding>(_mm_loadu_ps(src + i), _mm_loadu_ps(src + i + 4), scale, seen);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), ToOrder<kOrder>(q));
  }
  if (i < n && n >= kLanes) {
    // The tail as the last 8 values, overlapping the block before: those
    // lanes are quantized again to the same ints (and bounds), and a plain
    // store replaces the masked one (vpmaskmovd stores are slow on AMD).
    // A fragment's 62 values end this way.
    i = n - kLanes;
    const __m256i q =
        Quantize8<kRounding>(_mm_loadu_ps(src + i), _mm_loadu_ps(src + i + 4), scale, seen);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), ToOrder<kOrder>(q));
  } else if (i < n) {
    const __m256i mask = TailMask(n - i);
    const __m256 x = _mm256_maskload_ps(src + i, mask);
    const __m256i q =
        Quantize8<kRounding>(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1), scale, seen);
    _mm256_maskstore_epi32(dst + i, mask, ToOrder<kOrder>(q));
  }
}

// ZeroNanLanes: dst[i] = 0 wherever src[i] is NaN, for i < n (step 5). Zero
// has the same bytes in either order.
ATP_TARGET_AVX2 void ZeroNanLanes(const float* src, size_t n, int32_t* dst) {
  const __m256i zero = _mm256_setzero_si256();
  for (size_t i = 0; i < n; i += kLanes) {
    const __m256i valid = n - i >= kLanes ? _mm256_set1_epi32(-1) : TailMask(n - i);
    const __m256 x = _mm256_maskload_ps(src + i, valid);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    if (!_mm256_testz_si256(nan, nan)) _mm256_maskstore_epi32(dst + i, nan, zero);
  }
}

ATP_TARGET_AVX2 inline bool AnyEqual(__m256i v, int32_t value) {
  const __m256i eq = _mm256_cmpeq_epi32(v, _mm256_set1_epi32(value));
  return !_mm256_testz_si256(eq, eq);
}

template <Rounding kRounding, IntOrder kOrder>
ATP_TARGET_AVX2 QuantizeOutcome QuantizeLoop(std::span<const float> in, double scale,
                                             int32_t* out) {
  const size_t n = in.size();
  const __m256d scale4 = _mm256_set1_pd(scale);
  __m256i max_seen = _mm256_setzero_si256();
  bool needs_float = false;
  for (size_t start = 0; start < n; start += kChunk) {
    const size_t len = std::min(kChunk, n - start);
    MinMax seen = {_mm256_setzero_si256(), max_seen};
    QuantizeChunk<kRounding, kOrder>(in.data() + start, len, scale4, out + start, &seen);
    max_seen = seen.max;
    if (AnyEqual(seen.min, kMin)) {
      needs_float = true;
      ZeroNanLanes(in.data() + start, len, out + start);
    }
  }
  needs_float = needs_float || AnyEqual(max_seen, kMax);
  return needs_float ? QuantizeOutcome::kNeedsFloat : QuantizeOutcome::kExact;
}

// Dequantize by reciprocal, exactly: the argument and its constants are in
// dequantize_reciprocal.h, shared with the AVX-512 kernel.

// NearMidpoint: per 64-bit lane, all-ones where the low 29 bits of r are
// within kMidpointMargin ulps of the midpoint pattern (kMidpoint -
// kMidpointMargin <= low29 < kMidpoint + kMidpointMargin): adding
// kMidpointMargin - kMidpoint modulo 2^29 maps exactly that interval onto
// [0, 2 * kMidpointMargin), and everything else above it. Zero is not near.
ATP_TARGET_AVX2 inline __m256i NearMidpoint(__m256i bits) {
  const __m256i from_midpoint =
      _mm256_and_si256(_mm256_add_epi64(bits, _mm256_set1_epi64x(kMidpointMargin - kMidpoint)),
                       _mm256_set1_epi64x(kLow29Mask));
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(2 * kMidpointMargin), from_midpoint);
}

// ReciprocalIsUnsafe: per 64-bit lane, all-ones unless float(r) is certainly
// float(x) for r = q * (1 / scale).
template <ExponentCheck kCheck>
ATP_TARGET_AVX2 inline __m256i ReciprocalIsUnsafe(__m256d r) {
  const __m256i bits = _mm256_castpd_si256(r);
  if constexpr (kCheck == ExponentCheck::kNone) {
    return NearMidpoint(bits);
  } else {
    const __m256i exponent =
        _mm256_and_si256(_mm256_srli_epi64(bits, 52), _mm256_set1_epi64x(0x7FF));
    const __m256i out_of_range =
        _mm256_or_si256(_mm256_cmpgt_epi64(_mm256_set1_epi64x(kMinExponent), exponent),
                        _mm256_cmpgt_epi64(exponent, _mm256_set1_epi64x(kMaxExponent)));
    const __m256i zero = _mm256_cmpeq_epi64(bits, _mm256_setzero_si256());
    return _mm256_andnot_si256(zero, _mm256_or_si256(NearMidpoint(bits), out_of_range));
  }
}

// Dequantize8ByReciprocal: the 8 results by multiply when every lane is safe
// (returns true), else false and *out untouched.
template <ExponentCheck kCheck>
ATP_TARGET_AVX2 inline bool Dequantize8ByReciprocal(__m256i q, __m256d inverse, __m256* out) {
  const __m256d lo = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(q)), inverse);
  const __m256d hi = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(q, 1)), inverse);
  const __m256i unsafe =
      _mm256_or_si256(ReciprocalIsUnsafe<kCheck>(lo), ReciprocalIsUnsafe<kCheck>(hi));
  if (!_mm256_testz_si256(unsafe, unsafe)) return false;
  *out = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
  return true;
}

ATP_TARGET_AVX2 inline __m256 Dequantize8(__m256i q, __m256d scale) {
  // Division for the reason given at DequantizeScalar.
  const __m128 lo =
      _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(q)), scale));
  const __m128 hi =
      _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(q, 1)), scale));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

template <IntOrder kOrder>
ATP_TARGET_AVX2 QuantizeOutcome QuantizeInOrder(std::span<const float> in, double scale,
                                                int32_t* out) {
  if (MxcsrRoundsToNearest()) return QuantizeLoop<Rounding::kMxcsrNearest, kOrder>(in, scale, out);
  return QuantizeLoop<Rounding::kImmediate, kOrder>(in, scale, out);
}

// Dequantize8Exact: by multiply where that is exact (inverse given, see
// above), else by division.
template <ExponentCheck kCheck>
ATP_TARGET_AVX2 inline __m256 Dequantize8Exact(__m256i q, __m256d scale, const __m256d* inverse) {
  __m256 out;
  if (inverse != nullptr && Dequantize8ByReciprocal<kCheck>(q, *inverse, &out)) return out;
  return Dequantize8(q, scale);
}

// DequantizeLoopWith: src holds n int32 in kOrder (4-byte granular memory).
template <IntOrder kOrder, ExponentCheck kCheck>
ATP_TARGET_AVX2 void DequantizeLoopWith(const int32_t* src, size_t n, __m256d scale4,
                                        const __m256d* inverse, float* dst) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm256_storeu_ps(dst + i, Dequantize8Exact<kCheck>(ToOrder<kOrder>(q), scale4, inverse));
  }
  if (i < n && n >= kLanes) {
    // The tail as the last 8 values, overlapping the block before (the same
    // floats again), with plain loads and stores: masked stores are slow on
    // AMD. A fragment's 62 values end this way.
    i = n - kLanes;
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm256_storeu_ps(dst + i, Dequantize8Exact<kCheck>(ToOrder<kOrder>(q), scale4, inverse));
  } else if (i < n) {
    // Masked-off lanes read as 0, which the multiply handles exactly.
    const __m256i mask = TailMask(n - i);
    const __m256i q = ToOrder<kOrder>(_mm256_maskload_epi32(src + i, mask));
    _mm256_maskstore_ps(dst + i, mask, Dequantize8Exact<kCheck>(q, scale4, inverse));
  }
}

// DequantizeLoop: src holds n int32 in kOrder (4-byte granular memory).
template <IntOrder kOrder>
ATP_TARGET_AVX2 void DequantizeLoop(const int32_t* src, size_t n, double scale, float* dst) {
  const __m256d scale4 = _mm256_set1_pd(scale);
  const bool reciprocal = ReciprocalApplies(scale);
  const double inverse = 1.0 / scale;
  const __m256d inverse4 = _mm256_set1_pd(inverse);
  if (reciprocal && ExponentsInRange(inverse)) {
    return DequantizeLoopWith<kOrder, ExponentCheck::kNone>(src, n, scale4, &inverse4, dst);
  }
  DequantizeLoopWith<kOrder, ExponentCheck::kPerLane>(src, n, scale4,
                                                     reciprocal ? &inverse4 : nullptr, dst);
}

}  // namespace

QuantizeOutcome QuantizeAvx2(std::span<const float> in, double scale, std::span<int32_t> out) {
  return QuantizeInOrder<IntOrder::kHost>(in, scale, out.data());
}

ATP_TARGET_AVX2 void DequantizeAvx2(std::span<const int32_t> in, double scale,
                                    std::span<float> out) {
  DequantizeLoop<IntOrder::kHost>(in.data(), in.size(), scale, out.data());
}

// The wire forms reach the payload bytes through int32_t pointers only for
// the intrinsics' signatures: every access is an unaligned vector load or
// store (vmovdqu, vpmaskmovd), which have no alignment or aliasing demands
// beyond the compiler's may_alias vector types.
QuantizeOutcome QuantizeToWireAvx2(std::span<const float> in, double scale,
                                   std::span<uint8_t> out) {
  return QuantizeInOrder<IntOrder::kBig>(in, scale, reinterpret_cast<int32_t*>(out.data()));
}

ATP_TARGET_AVX2 void DequantizeFromWireAvx2(std::span<const uint8_t> in, double scale,
                                            std::span<float> out) {
  DequantizeLoop<IntOrder::kBig>(reinterpret_cast<const int32_t*>(in.data()), out.size(), scale,
                                 out.data());
}

#else  // not x86: HasAvx2() is false and these are never called.

QuantizeOutcome QuantizeAvx2(std::span<const float> in, double scale, std::span<int32_t> out) {
  return QuantizeScalar(in, scale, out);
}

void DequantizeAvx2(std::span<const int32_t> in, double scale, std::span<float> out) {
  DequantizeScalar(in, scale, out);
}

QuantizeOutcome QuantizeToWireAvx2(std::span<const float> in, double scale,
                                   std::span<uint8_t> out) {
  return QuantizeToWireScalar(in, scale, out);
}

void DequantizeFromWireAvx2(std::span<const uint8_t> in, double scale, std::span<float> out) {
  DequantizeFromWireScalar(in, scale, out);
}

#endif

}  // namespace atp
