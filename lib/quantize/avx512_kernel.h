// lib/quantize/avx512_kernel.h: what the AVX-512 kernels (quantize_avx512.cc,
// dequantize_avx512.cc) share: the intrinsics with GCC 12's false warning
// silenced, the target attribute, and the byte swap of the wire form.
// Private to lib/quantize; x86 only; include it first among the intrinsics.
#ifndef ATP_LIB_QUANTIZE_AVX512_KERNEL_H_
#define ATP_LIB_QUANTIZE_AVX512_KERNEL_H_

#if defined(__x86_64__) || defined(__i386__)
// GCC 12's AVX-512 intrinsics start their results from _mm*_undefined_*(),
// which -Wmaybe-uninitialized reports wherever they are inlined (GCC bug
// 105593, fixed in GCC 13): a false positive in the system header, silenced
// for the kernels' files only (clang has no such warning).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

// Compiled without -mavx512*: each kernel function carries this attribute,
// and the dispatchers in quantize.cc call them only when MaxCpuIsa() allows.
// avx512bw for vpshufb on 512 bits (the byte swap of the wire form).
#define ATP_TARGET_AVX512 __attribute__((target("avx512f,avx512bw")))

namespace atp::quantize_internal {

// SwapBytes32: reverses the bytes of each 32-bit lane (network <-> host
// order; vpshufb works per 128 bits).
ATP_TARGET_AVX512 inline __m512i SwapBytes32(__m512i v) {
  const __m512i swap =
      _mm512_broadcast_i32x4(_mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
  return _mm512_shuffle_epi8(v, swap);
}

}  // namespace atp::quantize_internal
#endif  // x86

#endif  // ATP_LIB_QUANTIZE_AVX512_KERNEL_H_
