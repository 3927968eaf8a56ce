// AVX-512 quantizer, bit-identical to the scalar one in quantize.cc.
//
// The same five steps as the AVX2 kernel (quantize_avx2.cc says them in
// full), 16 floats per block instead of 8, and step 3 as one instruction in
// any rounding mode: vcvtpd2dq with embedded round-to-nearest-even ({rn-sae})
// rounds and converts, whatever MXCSR says, so there is one path instead of
// the AVX2 kernel's two. The multiply stays an ordinary IEEE multiply in the
// current mode, as in the scalar code.
//
// Why a kernel for something the AVX2 one does: a worker quantizes every
// fragment it sends, 62 values at a time, and the AVX2 kernel's 8 blocks of
// two 4-double halves were 40% of the instructions of a pushed fragment (203
// of about 500, bench/RESULTS.md "The AVX-512 quantizer"). Here a fragment
// is 4 blocks (the last overlapping the one before): 29.5 -> 14.2 ns on the
// VM of that section; in long buffers memory bounds both kernels more
// (16 Mi values: 16.5 -> 12.3 ms).
//
// Where the scale is a float and a block's products are small (|x * s| <
// 2^22: gradients at the default scale), the block goes in single precision
// instead (QuantizeSmall16 below says why that is exact): 64 Ki values 13.8
// -> 9.0 us (bench/RESULTS.md, "Single precision where it is exact, and the
// replay copy around the cache").
// FragmentQuantizer (fragment_quantizer.h) runs whole fragments that way.
//
// Compiled without -mavx512* (avx512_kernel.h). Shorter than one block, the
// AVX2 kernel does it.
#include <algorithm>
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "atp/quantize.h"
#include "lib/quantize/fragment_quantizer.h"

#if defined(__x86_64__) || defined(__i386__)
#include "lib/quantize/avx512_kernel.h"
#endif

namespace atp {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
constexpr size_t kLanes = 16;
// kChunk: floats per NaN-fix unit (step 5), as in the AVX2 kernel.
constexpr size_t kChunk = 1024;
static_assert(kChunk % kLanes == 0, "only the last chunk may have a tail");

enum class IntOrder { kHost, kBig };

// Quantize8: steps 1-3 for 8 floats: widen, multiply, clamp above (a NaN
// product stays NaN: vminpd returns its second operand), round half-even and
// convert (below INT32_MIN, -inf and NaN come out as INT32_MIN).
ATP_TARGET_AVX512 inline __m256i Quantize8(__m256 x, __m512d scale) {
  const __m512d p = _mm512_mul_pd(_mm512_cvtps_pd(x), scale);
  const __m512d clamped = _mm512_min_pd(_mm512_set1_pd(static_cast<double>(kMax)), p);
  return _mm512_cvt_roundpd_epi32(clamped, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

template <IntOrder kOrder>
ATP_TARGET_AVX512 inline __m512i ToOrder(__m512i q) {
  if constexpr (kOrder == IntOrder::kBig) return quantize_internal::SwapBytes32(q);
  return q;
}

// Small products in single precision, exactly, when the scale is a float
// (the default 1e8 is): 16 lanes per vector and no conversions between
// widths: 7 vector instructions per 16 lanes against steps 1-4's 11. The
// definition is q = round_half_even(double(x) * s).
//
// A float x and a float s have at most 24 significant bits each, so the
// double product is exact: q = round_half_even(t) with t = x * s. Round t
// to a float "to odd": toward zero, then, if that was inexact, set the
// lowest significand bit (the neighbour with an odd significand). Rounding
// a round-to-odd result to nearest in a precision at least 2 bits coarser
// gives the same as rounding t itself (the round-to-odd theorem; Boldo and
// Melquiond, 2008). Where |t| < 2^22 a float has at least 2 bits below the
// units, so q = round_half_even(RO(t)): one conversion. The remainder
// x * s - RZ(t) is exact as an FMA unless it underflows, which needs |t|
// far below 1 (x subnormal or tiny), where RO(t) and t both round to 0.
// Any other block (a lane with |RZ(t)| >= 2^22, an infinity or a NaN) takes
// steps 1-3; a small block cannot saturate, so the bounds (step 4) need no
// update. The embedded rounding ({rz-sae}, {rn-sae}) makes it independent
// of MXCSR, as the definition is.
//
// QuantizeSmall16: q = the 16 ints of x when every lane qualifies; false
// otherwise (q unchanged).
ATP_TARGET_AVX512 inline bool QuantizeSmall16(__m512 x, __m512 scale, __m512i* q) {
  constexpr int kTowardZero = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  const __m512 toward_zero = _mm512_mul_round_ps(x, scale, kTowardZero);
  const __mmask16 small =
      _mm512_cmp_ps_mask(_mm512_abs_ps(toward_zero), _mm512_set1_ps(0x1p22f), _CMP_LT_OQ);
  if (small != 0xFFFF) return false;
  const __m512 remainder = _mm512_fmsub_round_ps(x, scale, toward_zero, kNearest);  // exact
  const __mmask16 inexact = _mm512_cmp_ps_mask(remainder, _mm512_setzero_ps(), _CMP_NEQ_OQ);
  const __m512 to_odd = _mm512_castsi512_ps(
      _mm512_mask_or_epi32(_mm512_castps_si512(toward_zero), inexact,
                           _mm512_castps_si512(toward_zero), _mm512_set1_epi32(1)));
  *q = _mm512_cvt_roundps_epi32(to_odd, kNearest);
  return true;
}

// ScalePath: whether a kernel tries QuantizeSmall16 first.
enum class ScalePath { kDoubleOnly, kSmallFirst };

// Quantize16: src[0, 16) into dst (kOrder), the running bounds updated
// (step 4); with kSmallFirst by QuantizeSmall16 where it applies
// (small_scale: the scale, a float).
template <IntOrder kOrder, ScalePath kPath>
ATP_TARGET_AVX512 inline void Quantize16(const float* src, __m512d scale, __m512 small_scale,
                                         int32_t* dst, __m512i* min_seen, __m512i* max_seen) {
  if constexpr (kPath == ScalePath::kSmallFirst) {
    if (__m512i q; QuantizeSmall16(_mm512_loadu_ps(src), small_scale, &q)) {
      _mm512_storeu_si512(dst, ToOrder<kOrder>(q));
      return;
    }
  }
  const __m256i lo = Quantize8(_mm256_loadu_ps(src), scale);
  const __m256i hi = Quantize8(_mm256_loadu_ps(src + 8), scale);
  const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  *min_seen = _mm512_min_epi32(*min_seen, q);
  *max_seen = _mm512_max_epi32(*max_seen, q);
  _mm512_storeu_si512(dst, ToOrder<kOrder>(q));
}

// QuantizeChunk: src[0, n) into dst, n >= 16; the tail is the last 16 values
// again, overlapping the block before (the same ints and bounds again).
template <IntOrder kOrder, ScalePath kPath>
ATP_TARGET_AVX512 inline void QuantizeChunk(const float* src, size_t n, __m512d scale,
                                            __m512 small_scale, int32_t* dst, __m512i* min_seen,
                                            __m512i* max_seen) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Quantize16<kOrder, kPath>(src + i, scale, small_scale, dst + i, min_seen, max_seen);
  }
  if (i < n) {
    Quantize16<kOrder, kPath>(src + n - kLanes, scale, small_scale, dst + n - kLanes, min_seen,
                              max_seen);
  }
}

// ZeroNanLanes: dst[i] = 0 wherever src[i] is NaN, for i < n (step 5). Zero
// has the same bytes in either order.
ATP_TARGET_AVX512 void ZeroNanLanes(const float* src, size_t n, int32_t* dst) {
  for (size_t i = 0; i < n; i += kLanes) {
    const __mmask16 valid =
        n - i >= kLanes ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(valid, src + i);
    const __mmask16 nan = _mm512_mask_cmp_ps_mask(valid, x, x, _CMP_UNORD_Q);
    if (nan != 0) _mm512_mask_storeu_epi32(dst + i, nan, _mm512_setzero_si512());
  }
}

template <IntOrder kOrder, ScalePath kPath>
ATP_TARGET_AVX512 QuantizeOutcome QuantizeLoopWith(std::span<const float> in, double scale,
                                                   int32_t* out) {
  const size_t n = in.size();
  const __m512d scale8 = _mm512_set1_pd(scale);
  const __m512 small_scale = kPath == ScalePath::kSmallFirst
                                 ? _mm512_set1_ps(static_cast<float>(scale))
                                 : _mm512_setzero_ps();
  __m512i max_seen = _mm512_setzero_si512();
  bool needs_float = false;
  for (size_t start = 0; start < n; start += kChunk) {
    // A chunk shorter than a block (only the last can be) overlaps the one
    // before: the same values again.
    const size_t len = std::min(kChunk, n - start);
    const size_t from = len >= kLanes ? start : n - kLanes;
    __m512i min_seen = _mm512_setzero_si512();
    QuantizeChunk<kOrder, kPath>(in.data() + from, start + len - from, scale8, small_scale,
                                 out + from, &min_seen, &max_seen);
    if (_mm512_cmpeq_epi32_mask(min_seen, _mm512_set1_epi32(kMin)) != 0) {
      needs_float = true;
      ZeroNanLanes(in.data() + from, start + len - from, out + from);
    }
  }
  needs_float = needs_float || _mm512_cmpeq_epi32_mask(max_seen, _mm512_set1_epi32(kMax)) != 0;
  return needs_float ? QuantizeOutcome::kNeedsFloat : QuantizeOutcome::kExact;
}

// QuantizeLoop: with the single-precision path where the scale is a
// (normal) float.
template <IntOrder kOrder>
ATP_TARGET_AVX512 QuantizeOutcome QuantizeLoop(std::span<const float> in, double scale,
                                               int32_t* out) {
  // Range first: converting a double beyond the float range is undefined.
  if (scale >= 0x1p-126 && scale <= FLT_MAX && double{static_cast<float>(scale)} == scale) {
    return QuantizeLoopWith<kOrder, ScalePath::kSmallFirst>(in, scale, out);
  }
  return QuantizeLoopWith<kOrder, ScalePath::kDoubleOnly>(in, scale, out);
}

}  // namespace

namespace quantize_internal {

// A whole fragment: four blocks (values 0, 16, 32, then 46..61 overlapping
// the third) by the single-precision path when every one qualifies, else
// the general loop.
ATP_TARGET_AVX512 QuantizeOutcome QuantizeFragmentToWireAvx512(const float* in, double scale,
                                                               float float_scale, uint8_t* out) {
  static_assert(FragmentQuantizer::kValues == 62);
  if (float_scale != 0) {
    const __m512 s = _mm512_set1_ps(float_scale);
    __m512i q0;
    __m512i q1;
    __m512i q2;
    __m512i q3;
    // All four evaluated (no short circuit): one branch for the fragment.
    const bool small0 = QuantizeSmall16(_mm512_loadu_ps(in), s, &q0);
    const bool small1 = QuantizeSmall16(_mm512_loadu_ps(in + 16), s, &q1);
    const bool small2 = QuantizeSmall16(_mm512_loadu_ps(in + 32), s, &q2);
    const bool small3 = QuantizeSmall16(_mm512_loadu_ps(in + 46), s, &q3);
    if (small0 && small1 && small2 && small3) {
      _mm512_storeu_si512(out, SwapBytes32(q0));
      _mm512_storeu_si512(out + 64, SwapBytes32(q1));
      _mm512_storeu_si512(out + 128, SwapBytes32(q2));
      _mm512_storeu_si512(out + 184, SwapBytes32(q3));
      return QuantizeOutcome::kExact;
    }
  }
  return QuantizeLoop<IntOrder::kBig>({in, FragmentQuantizer::kValues}, scale,
                                      reinterpret_cast<int32_t*>(out));
}

}  // namespace quantize_internal

ATP_TARGET_AVX512 QuantizeOutcome QuantizeAvx512(std::span<const float> in, double scale,
                                                 std::span<int32_t> out) {
  if (in.size() < kLanes) return QuantizeAvx2(in, scale, out);
  return QuantizeLoop<IntOrder::kHost>(in, scale, out.data());
}

// The payload bytes are reached through int32_t pointers only for the
// intrinsics' signatures: every access is an unaligned vector store.
ATP_TARGET_AVX512 QuantizeOutcome QuantizeToWireAvx512(std::span<const float> in, double scale,
                                                       std::span<uint8_t> out) {
  if (in.size() < kLanes) return QuantizeToWireAvx2(in, scale, out);
  return QuantizeLoop<IntOrder::kBig>(in, scale, reinterpret_cast<int32_t*>(out.data()));
}

#else  // not x86: HasAvx512() is false and these are never called.

namespace quantize_internal {
QuantizeOutcome QuantizeFragmentToWireAvx512(const float* in, double scale, float, uint8_t* out) {
  return QuantizeToWireScalar({in, FragmentQuantizer::kValues}, scale,
                              {out, FragmentQuantizer::kBytes});
}
}  // namespace quantize_internal

QuantizeOutcome QuantizeAvx512(std::span<const float> in, double scale, std::span<int32_t> out) {
  return QuantizeScalar(in, scale, out);
}

QuantizeOutcome QuantizeToWireAvx512(std::span<const float> in, double scale,
                                     std::span<uint8_t> out) {
  return QuantizeToWireScalar(in, scale, out);
}

#endif

}  // namespace atp
