#include "lib/ps/sums.h"

#include <bit>
#include <cstddef>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "atp/cpu_isa.h"

namespace atp::ps {
namespace {

constexpr size_t kValues = wire::kValuesPerFragment;
constexpr uint32_t kInt32MaxBits = 0x7FFFFFFFu;
constexpr uint32_t kInt32MinBits = 0x80000000u;

}  // namespace

// The loops below have no early exit and reduce into uint32_t (not bool), so
// that the compiler vectorizes them (see CMakeLists.txt).

namespace {

// HasInt32BoundLoop: HasInt32Bound where the CPU has no AVX2 (the AVX2
// version below makes the same test, eight values at a time).
[[gnu::always_inline]] inline bool HasInt32BoundLoop(const wire::Payload& payload) {
  uint32_t bound = 0;
  // value + 0x80000001 wraps to 0 for INT32_MAX and to 1 for INT32_MIN, and
  // lands at 2 or above for every other value: one add, one shift and one
  // compare per value instead of two compares.
  static_assert(kInt32MaxBits + 0x80000001u == 0 && kInt32MinBits + 0x80000001u == 1);
  for (uint32_t value : payload) {
    bound |= 0u - static_cast<uint32_t>(((value + 0x80000001u) >> 1) == 0);  // all ones: no mask
  }
  return bound != 0;
}

#if defined(__x86_64__)
// Eight values per instruction instead of four: the PS checks every integer
// payload it receives, also each whole aggregate the switches send it. The
// 62 values as eight blocks of eight, unrolled, the last overlapping the one
// before (values 54..61; testing a value twice changes nothing): the
// compiler's vectorized HasInt32BoundLoop, a loop and a tail, took 87
// instructions a payload, this 52 with the dispatch.
[[gnu::target("avx2")]] bool HasInt32BoundAvx2(const wire::Payload& payload) {
  static_assert(kValues > 8 && kValues <= 64);
  const __m256i bias = _mm256_set1_epi32(static_cast<int>(0x80000001u));
  const __m256i zero = _mm256_setzero_si256();
  __m256i bound = zero;
#pragma GCC unroll 8
  for (size_t i = 0; i < kValues; i += 8) {
    const size_t at = i + 8 <= kValues ? i : kValues - 8;
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(payload.data() + at));
    // The same test as HasInt32BoundLoop's: (value + 0x80000001) >> 1 == 0.
    const __m256i folded = _mm256_srli_epi32(_mm256_add_epi32(v, bias), 1);
    bound = _mm256_or_si256(bound, _mm256_cmpeq_epi32(folded, zero));
  }
  return !_mm256_testz_si256(bound, bound);
}
#endif

}  // namespace

bool HasInt32Bound(const wire::Payload& payload) {
#if defined(__x86_64__)
  if (MaxCpuIsa() >= CpuIsa::kAvx2) return HasInt32BoundAvx2(payload);
#endif
  return HasInt32BoundLoop(payload);
}

void AssignSums(const wire::Payload& payload, IntSums& sums) {
  for (size_t i = 0; i < kValues; ++i) sums[i] = static_cast<int32_t>(payload[i]);
}

void AddToSums(const wire::Payload& payload, IntSums& sums) {
  for (size_t i = 0; i < kValues; ++i) sums[i] += static_cast<int32_t>(payload[i]);
}

bool SumsFitOpenInt32(const IntSums& sums) {
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  uint32_t outside = 0;
  for (int64_t sum : sums) {
    outside |= static_cast<uint32_t>(sum <= kMin) | static_cast<uint32_t>(sum >= kMax);
  }
  return outside == 0;
}

void StoreInt32Sums(const IntSums& sums, wire::Payload& out) {
  for (size_t i = 0; i < kValues; ++i) {
    out[i] = static_cast<uint32_t>(static_cast<int32_t>(sums[i]));
  }
}

void StoreFloatRow(const wire::Payload& payload, float* row) {
  for (size_t i = 0; i < kValues; ++i) row[i] = std::bit_cast<float>(payload[i]);
}

void SumFloatRowsInOrder(const float* rows, int rows_count, wire::Payload& out) {
  // Start from the first row rather than 0.0 so that a sum of -0.0 stays -0.0.
  std::array<double, kValues> acc;
  for (size_t i = 0; i < kValues; ++i) acc[i] = rows[i];
  for (int w = 1; w < rows_count; ++w) {
    const float* row = rows + static_cast<size_t>(w) * kValues;
    for (size_t i = 0; i < kValues; ++i) acc[i] += row[i];
  }
  for (size_t i = 0; i < kValues; ++i) {
    out[i] = std::bit_cast<uint32_t>(static_cast<float>(acc[i]));
  }
}

void SumFloatRows(const float* rows, std::span<const uint16_t> order, wire::Payload& out) {
  std::array<double, kValues> acc;
  const float* first = rows + static_cast<size_t>(order[0]) * kValues;
  for (size_t i = 0; i < kValues; ++i) acc[i] = first[i];
  for (size_t k = 1; k < order.size(); ++k) {
    const float* row = rows + static_cast<size_t>(order[k]) * kValues;
    for (size_t i = 0; i < kValues; ++i) acc[i] += row[i];
  }
  for (size_t i = 0; i < kValues; ++i) {
    out[i] = std::bit_cast<uint32_t>(static_cast<float>(acc[i]));
  }
}

}  // namespace atp::ps
