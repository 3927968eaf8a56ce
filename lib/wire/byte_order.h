// lib/wire/byte_order.h: big-endian loads and stores on unaligned bytes: the
// one home of byte order for the wire's fields and values, used by the wire
// codec and frame view, quantization (lib/quantize), the switch pipeline and
// host, and the in-process fabric. Not installed.
//
// Every function takes a raw pointer to at least 2 (or 4) readable or writable
// bytes; callers check bounds first. memcpy + bswap compiles to a single
// unaligned load/store plus `bswap`/`movbe` on x86-64.
#ifndef ATP_LIB_WIRE_BYTE_ORDER_H_
#define ATP_LIB_WIRE_BYTE_ORDER_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace atp::wire::internal {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "mixed-endian hosts are not supported");

inline uint16_t HostToBig16(uint16_t v) {
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap16(v);
  return v;
}
inline uint32_t HostToBig32(uint32_t v) {
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap32(v);
  return v;
}

// LoadNative16 / LoadNative32: the bytes as they lie in memory (no swap).
inline uint16_t LoadNative16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint32_t LoadNative32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline uint16_t LoadBig16(const uint8_t* p) { return HostToBig16(LoadNative16(p)); }
inline uint32_t LoadBig32(const uint8_t* p) { return HostToBig32(LoadNative32(p)); }

inline void StoreBig16(uint8_t* p, uint16_t v) {
  v = HostToBig16(v);
  std::memcpy(p, &v, sizeof(v));
}
inline void StoreBig32(uint8_t* p, uint32_t v) {
  v = HostToBig32(v);
  std::memcpy(p, &v, sizeof(v));
}

// SwapBytes32: copies `count` 32-bit values from `in` to `out`, reversing the
// bytes of each: big-endian wire values to host order on a little-endian host,
// and back. `in` and `out` may be the same buffer but must not otherwise
// overlap. On a big-endian host it is a plain copy.
inline void SwapBytes32(const uint8_t* in, uint8_t* out, size_t count) {
  if constexpr (std::endian::native == std::endian::big) {
    std::memcpy(out, in, count * 4);
    return;
  }
  size_t i = 0;
#if defined(__SSE2__)
  // Four values per 16-byte vector, SSE2 only (the x86-64 baseline, so no
  // dispatch): swap the bytes of each 16-bit half, then the two halves.
  for (; i + 4 <= count; i += 4) {
    __m128i v;
    std::memcpy(&v, in + 4 * i, sizeof(v));
    v = _mm_or_si128(_mm_slli_epi16(v, 8), _mm_srli_epi16(v, 8));
    v = _mm_shufflelo_epi16(v, _MM_SHUFFLE(2, 3, 0, 1));
    v = _mm_shufflehi_epi16(v, _MM_SHUFFLE(2, 3, 0, 1));
    std::memcpy(out + 4 * i, &v, sizeof(v));
  }
#endif
  for (; i < count; ++i) StoreBig32(out + 4 * i, LoadNative32(in + 4 * i));
}

}  // namespace atp::wire::internal

#endif  // ATP_LIB_WIRE_BYTE_ORDER_H_
