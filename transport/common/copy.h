// transport/common/copy.h: copying frames and messages on the datapath.
// Private to transport/.
//
// A fixed-size std::memcpy of a few hundred bytes compiles (at the baseline
// x86-64 target) to `rep movsq`, which is slow to start and slower still when
// the destination is not 8-byte aligned, as a frame is (its payload, not its
// first byte, is what the pools align). 16-byte unaligned moves cost the same
// whatever the alignment.
#ifndef ATP_TRANSPORT_COMMON_COPY_H_
#define ATP_TRANSPORT_COMMON_COPY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace atp::transport::internal {

// CopyBytes: copies N bytes (N >= 16); the ranges must not overlap.
template <size_t N>
inline void CopyBytes(uint8_t* dst, const uint8_t* src) {
  static_assert(N >= 16);
#if defined(__SSE2__)
  // Unrolled: the loop's count is a constant, and at -O2 GCC keeps the
  // counter, compare and branch, as many instructions again as the moves.
  size_t i = 0;
#pragma GCC unroll 32
  for (; i + 16 <= N; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  }
  if constexpr (N % 16 != 0) {
    // The last 16 bytes, overlapping what was already copied.
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + N - 16),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + N - 16)));
  }
#else
  std::memcpy(dst, src, N);
#endif
}

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_COMMON_COPY_H_
