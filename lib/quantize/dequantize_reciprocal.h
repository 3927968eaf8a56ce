// lib/quantize/dequantize_reciprocal.h: why and when a dequantizing kernel
// may multiply by 1 / scale instead of dividing, shared by the AVX2
// (quantize_avx2.cc) and AVX-512 (dequantize_avx512.cc) kernels. Private to
// lib/quantize; x86 only (MXCSR).
#ifndef ATP_LIB_QUANTIZE_DEQUANTIZE_RECIPROCAL_H_
#define ATP_LIB_QUANTIZE_DEQUANTIZE_RECIPROCAL_H_

#include <immintrin.h>

#include <cstdint>

namespace atp::quantize_internal {

// Dequantize by reciprocal, exactly. The definition is float(double(q) /
// scale), a correctly rounded division then a rounding to float (quantize.cc),
// and vdivpd is what bounds dequantize. r = double(q) * (1 / scale) is within
// about 2 double ulps of the exact quotient x (two roundings of 2^-53 each),
// and D = double(q) / scale within half an ulp of x. float(r) == float(D)
// whenever no float rounding boundary lies between r and D. In
// round-to-nearest the boundaries are the midpoints between adjacent floats:
// inside the float normal range, exactly the doubles whose 29 mantissa bits
// below float precision are 1 followed by 28 zeros. So a block of lanes takes
// the multiply when every lane is 0, or is a float normal (with margin) whose low
// 29 bits are more than kMidpointMargin ulps from that pattern; otherwise (a
// lane within the margin: about 2 in 10^7 random lanes; denormal or huge
// results) it divides. Bit-identical to the scalar division by construction,
// and tested against it on every edge (DequantizeAvx2Test,
// DequantizeWireTest).
inline constexpr int64_t kMidpointMargin = 64;  // double ulps; the error bound is ~3
inline constexpr int64_t kLow29Mask = (int64_t{1} << 29) - 1;
inline constexpr int64_t kMidpoint = int64_t{1} << 28;
// Biased double exponents of the results the multiply may produce: float
// normals, one binade of margin at each end (2^-125 <= |r| < 2^127).
inline constexpr int64_t kMinExponent = 1023 - 125;
inline constexpr int64_t kMaxExponent = 1023 + 126;

// MxcsrRoundsToNearest: whether this thread's SSE rounding control (MXCSR bits
// 13-14) is round-to-nearest-even.
inline bool MxcsrRoundsToNearest() { return (_mm_getcsr() & 0x6000u) == 0; }

// ReciprocalApplies: the multiply's argument holds for this call: the
// rounding mode is round-to-nearest, and 1 / scale is a normal double (so is
// every scale a job uses in practice).
inline bool ReciprocalApplies(double scale) {
  return MxcsrRoundsToNearest() && scale >= 0x1p-1000 && scale <= 0x1p1000;
}

// ExponentsInRange: every r = q * inverse for a nonzero int32 q has a biased
// exponent in [kMinExponent, kMaxExponent]: 1 <= |q| <= 2^31 and rounding
// is monotone, so inverse <= |r| <= 2^31 * inverse (both exact doubles);
// 2^-124 <= inverse and 2^31 * inverse < 2^126 leave at least a binade of
// room at both ends (scales from about 2^-95 to 2^124; 1e8 included). Zero
// lanes are exact either way (their low bits are far from the midpoint).
inline bool ExponentsInRange(double inverse) {
  return inverse >= 0x1p-124 && inverse * 0x1p31 < 0x1p126;
}

// ExponentCheck: how a kernel checks the exponents of r = q * (1 / scale).
enum class ExponentCheck {
  // Every nonzero int32 q gives a float normal r, with margin (ExponentsInRange):
  // only the midpoints need a look.
  kNone,
  // Per lane (huge or tiny scales).
  kPerLane,
};

}  // namespace atp::quantize_internal

#endif  // ATP_LIB_QUANTIZE_DEQUANTIZE_RECIPROCAL_H_
