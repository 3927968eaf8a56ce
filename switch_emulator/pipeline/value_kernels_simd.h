// switch_emulator/pipeline/value_kernels_simd.h: the AVX2 and AVX-512 value
// kernels as inline functions, for value_kernels.cc (which exports them as
// internal::AddAvx2 and so on) and for the pipeline's datapaths, which inline
// them into code compiled for the same target. Private to the pipeline.
//
// Every function carries its target attribute, so including this header adds
// no instruction-set requirement to anything else; callers must only run them
// where CpuHasAvx2() (CpuHasAvx512()) is true, and can only inline them into
// functions compiled for a superset of that target.
#ifndef ATP_SWITCH_EMULATOR_PIPELINE_VALUE_KERNELS_SIMD_H_
#define ATP_SWITCH_EMULATOR_PIPELINE_VALUE_KERNELS_SIMD_H_

#include <immintrin.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "atp/wire.h"
#include "switch_emulator/pipeline/aggregator.h"
#include "switch_emulator/pipeline/value_kernels.h"

#define ATP_TARGET_AVX2 __attribute__((target("avx2")))
#define ATP_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq")))

namespace atp::switch_emulator::simd {

static_assert(std::endian::native == std::endian::little,
              "the kernels byte-swap unconditionally: little-endian hosts only");

constexpr size_t kValues = wire::kValuesPerFragment;
// AVX2 rows of 8 lanes: 7 full rows cover values 0..55, the 8th holds 56..61
// and the 2 padding lanes.
constexpr size_t kRowLanes = 8;
constexpr size_t kFullRows = kValues / kRowLanes;
constexpr size_t kTailValues = kValues % kRowLanes;
static_assert(kFullRows == 7 && kTailValues == 6);
static_assert((kFullRows + 1) * kRowLanes == kAggregatorLanes);

// --- AVX2 ------------------------------------------------------------------

ATP_TARGET_AVX2 inline __m256i ByteSwapMask() {
  return _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,  //
                          3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
}

// TailMask: the 6 lanes of the last row that hold payload values.
ATP_TARGET_AVX2 inline __m256i TailMask() {
  return _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
}

// LoadWireRow: row `r` of the payload, byte-swapped to host order. The last row
// is a masked load: its two padding lanes read as 0 and touch no memory.
ATP_TARGET_AVX2 inline __m256i LoadWireRow(const uint8_t* wire, size_t r, __m256i swap) {
  const uint8_t* p = wire + r * kRowLanes * sizeof(int32_t);
  __m256i raw = r < kFullRows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                              : _mm256_maskload_epi32(reinterpret_cast<const int*>(p), TailMask());
  return _mm256_shuffle_epi8(raw, swap);
}

// IsBound8: all-ones in the lanes of `v` that hold INT32_MIN or INT32_MAX:
// exactly those make v + 1 (wrapping) INT32_MIN or INT32_MIN + 1, the only
// values below INT32_MIN + 2.
ATP_TARGET_AVX2 inline __m256i IsBound8(__m256i v) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::numeric_limits<int32_t>::min() + 2),
                            _mm256_add_epi32(v, _mm256_set1_epi32(1)));
}

// StickyAdd8: StickySaturatingAdd(lane, value) per lane. The clamp first:
// signed overflow happened where lane and value have the same sign and the
// sum's sign differs; the clamp value then is INT32_MAX for lane >= 0 and
// INT32_MIN for lane < 0 (blendv selects on each lane's sign bit). Then a
// bound in `value`, then a bound in `lane`, override it in that order, so the
// lane's own bound wins.
ATP_TARGET_AVX2 inline __m256i StickyAdd8(__m256i lane, __m256i value) {
  const __m256i sum = _mm256_add_epi32(lane, value);
  const __m256i overflow =
      _mm256_andnot_si256(_mm256_xor_si256(lane, value), _mm256_xor_si256(lane, sum));
  const __m256i clamp =
      _mm256_xor_si256(_mm256_srai_epi32(lane, 31), _mm256_set1_epi32(0x7FFFFFFF));
  __m256i r = _mm256_castps_si256(_mm256_blendv_ps(
      _mm256_castsi256_ps(sum), _mm256_castsi256_ps(clamp), _mm256_castsi256_ps(overflow)));
  r = _mm256_blendv_epi8(r, value, IsBound8(value));
  return _mm256_blendv_epi8(r, lane, IsBound8(lane));
}

// --- AVX-512 ---------------------------------------------------------------

// Rows of 16 lanes: 3 full rows cover values 0..47, the 4th holds 48..61 and
// the 2 padding lanes.
constexpr size_t kRow512Lanes = 16;
constexpr size_t kFullRows512 = kValues / kRow512Lanes;
constexpr __mmask16 kTailMask512 = (1u << (kValues % kRow512Lanes)) - 1;
static_assert(kFullRows512 == 3 && kTailMask512 == 0x3FFF);
static_assert((kFullRows512 + 1) * kRow512Lanes == kAggregatorLanes);

// (GCC 12's plain _mm512_broadcast_i32x4, _mm512_srai_epi32, _mm512_min_epu32
// and _mm512_abs_epi32 trip -Wuninitialized inside the intrinsics header;
// their all-lanes maskz forms are the same instructions.)
constexpr __mmask16 kAllLanes = 0xFFFF;

ATP_TARGET_AVX512 inline __m512i ByteSwapMask512() {
  return _mm512_maskz_broadcast_i32x4(
      kAllLanes, _mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
}

// LoadWireRow512: row `r` of the payload in host order; the last row is a
// zero-masked load that touches only its 14 values.
ATP_TARGET_AVX512 inline __m512i LoadWireRow512(const uint8_t* wire, size_t r, __m512i swap) {
  const uint8_t* p = wire + r * kRow512Lanes * sizeof(int32_t);
  __m512i raw =
      r < kFullRows512 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(kTailMask512, p);
  return _mm512_shuffle_epi8(raw, swap);
}

// IsBound16: the lanes of `v` that hold INT32_MIN or INT32_MAX (see IsBound8).
ATP_TARGET_AVX512 inline __mmask16 IsBound16(__m512i v) {
  return _mm512_cmplt_epi32_mask(_mm512_add_epi32(v, _mm512_set1_epi32(1)),
                                 _mm512_set1_epi32(std::numeric_limits<int32_t>::min() + 2));
}

// StickyAdd16: as StickyAdd8. One ternary-logic op finds the overflow sign
// bits (~(a ^ b) & (a ^ sum): truth table 0x42 over lane, value, sum), and on
// overflow the clamp is (sum >> 31) ^ INT32_MIN, since the wrapped sum has the
// sign opposite to the true one. Bounds in `value`, then in `lane`, override.
ATP_TARGET_AVX512 inline __m512i StickyAdd16(__m512i lane, __m512i value) {
  const __m512i sum = _mm512_add_epi32(lane, value);
  const __mmask16 overflow =
      _mm512_movepi32_mask(_mm512_ternarylogic_epi32(lane, value, sum, 0x42));
  __m512i r = _mm512_mask_xor_epi32(sum, overflow, _mm512_maskz_srai_epi32(kAllLanes, sum, 31),
                                    _mm512_set1_epi32(std::numeric_limits<int32_t>::min()));
  r = _mm512_mask_mov_epi32(r, IsBound16(value), value);
  return _mm512_mask_mov_epi32(r, IsBound16(lane), lane);
}

// The vector adds run in two passes. The first adds with wrapping and notes,
// on the side, whether any operand, aggregator lane or payload value, has a
// magnitude of 2^30 or more: 3 vector operations per row (two absolute values
// and one OR into the running note) where the sticky add itself costs 11 to
// 13. Below that magnitude two operands can neither be a bound nor overflow
// (|lane + value| < 2^31), so the wrapped sum is the sticky sum. The answer is
// almost always no: at the default scale of 1e8, 2^30 is a gradient sum of
// 10.7, half the range. When it is yes, the fix-up pass recovers each lane's
// old value as sum - value (wrapping arithmetic loses nothing) and applies the
// sticky add row by row, exact for every lane. (An exact first pass, overflow
// and bounds tested per lane, costs 6 operations per row: 1 ns more per packet
// in the pipeline, bench/results/switch_pipeline.md.)
//
// kLargeMagnitude: the bits of |x| (unsigned; |INT32_MIN| is 2^31) that make x
// large: bit 30 or 31.
constexpr uint32_t kLargeMagnitude = 0xC0000000u;
static_assert(uint64_t{1} << 30 == (uint64_t{1} << 32) - kLargeMagnitude);

ATP_TARGET_AVX2 inline __attribute__((noinline, cold)) void StickyFixupAvx2(int32_t* lanes,
                                                                            const uint8_t* wire) {
  const __m256i swap = ByteSwapMask();
  auto* acc = reinterpret_cast<__m256i*>(lanes);
  for (size_t r = 0; r <= kFullRows; ++r) {
    const __m256i value = LoadWireRow(wire, r, swap);
    const __m256i lane = _mm256_sub_epi32(_mm256_load_si256(acc + r), value);
    _mm256_store_si256(acc + r, StickyAdd8(lane, value));
  }
}

ATP_TARGET_AVX512 inline __attribute__((noinline, cold)) void StickyFixupAvx512(
    int32_t* lanes, const uint8_t* wire) {
  const __m512i swap = ByteSwapMask512();
  for (size_t r = 0; r <= kFullRows512; ++r) {
    int32_t* row = lanes + r * kRow512Lanes;
    const __m512i value = LoadWireRow512(wire, r, swap);
    const __m512i lane = _mm512_sub_epi32(_mm512_load_si512(row), value);
    _mm512_store_si512(row, StickyAdd16(lane, value));
  }
}

// --- The kernels: value_kernels.h's LoadFn, AddFn and StoreFn contracts -----

// The AVX2 kernels: 7 full rows (unrolled: no loop counter, no per-row branch)
// and the masked tail row.
ATP_TARGET_AVX2 inline void LoadAvx2(int32_t* lanes, const uint8_t* wire) {
  const __m256i swap = ByteSwapMask();
  auto* out = reinterpret_cast<__m256i*>(lanes);
#pragma GCC unroll 8
  for (size_t r = 0; r <= kFullRows; ++r) _mm256_store_si256(out + r, LoadWireRow(wire, r, swap));
}

ATP_TARGET_AVX2 inline void AddAvx2(int32_t* lanes, const uint8_t* wire) {
  const __m256i swap = ByteSwapMask();
  auto* acc = reinterpret_cast<__m256i*>(lanes);
  __m256i magnitudes = _mm256_setzero_si256();  // OR of every |lane| and |value|
#pragma GCC unroll 8
  for (size_t r = 0; r <= kFullRows; ++r) {
    const __m256i lane = _mm256_load_si256(acc + r);
    const __m256i value = LoadWireRow(wire, r, swap);
    _mm256_store_si256(acc + r, _mm256_add_epi32(lane, value));
    magnitudes = _mm256_or_si256(magnitudes,
                                 _mm256_or_si256(_mm256_abs_epi32(lane), _mm256_abs_epi32(value)));
  }
  const __m256i large = _mm256_set1_epi32(static_cast<int32_t>(kLargeMagnitude));
  if (!_mm256_testz_si256(magnitudes, large)) [[unlikely]] {
    StickyFixupAvx2(lanes, wire);
  }
}

ATP_TARGET_AVX2 inline void StoreAvx2(uint8_t* wire, const int32_t* lanes) {
  const __m256i swap = ByteSwapMask();
  const auto* in = reinterpret_cast<const __m256i*>(lanes);
#pragma GCC unroll 8
  for (size_t r = 0; r < kFullRows; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(wire + r * kRowLanes * sizeof(int32_t)),
                        _mm256_shuffle_epi8(_mm256_load_si256(in + r), swap));
  }
  _mm256_maskstore_epi32(reinterpret_cast<int*>(wire + kFullRows * kRowLanes * sizeof(int32_t)),
                         TailMask(), _mm256_shuffle_epi8(_mm256_load_si256(in + kFullRows), swap));
}

// AddOutAvx2: the add that completes an aggregator, straight into the packet:
// wire[i] = StickySaturatingAdd(lanes[i], wire[i]) in wire byte order, i < 62;
// lanes stay as they were (the aggregator is released next). Returns false,
// having written nothing, when an operand's magnitude is 2^30 or more: the
// caller then adds and stores (AddAvx2, StoreAvx2), which is exact.
ATP_TARGET_AVX2 inline bool AddOutAvx2(const int32_t* lanes, uint8_t* wire) {
  const __m256i swap = ByteSwapMask();
  const auto* acc = reinterpret_cast<const __m256i*>(lanes);
  __m256i sums[kFullRows + 1];
  __m256i magnitudes = _mm256_setzero_si256();
#pragma GCC unroll 8
  for (size_t r = 0; r <= kFullRows; ++r) {
    const __m256i lane = _mm256_load_si256(acc + r);
    const __m256i value = LoadWireRow(wire, r, swap);
    sums[r] = _mm256_add_epi32(lane, value);
    magnitudes = _mm256_or_si256(magnitudes,
                                 _mm256_or_si256(_mm256_abs_epi32(lane), _mm256_abs_epi32(value)));
  }
  if (!_mm256_testz_si256(magnitudes, _mm256_set1_epi32(static_cast<int32_t>(kLargeMagnitude))))
      [[unlikely]] {
    return false;
  }
#pragma GCC unroll 8
  for (size_t r = 0; r < kFullRows; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(wire + r * kRowLanes * sizeof(int32_t)),
                        _mm256_shuffle_epi8(sums[r], swap));
  }
  _mm256_maskstore_epi32(reinterpret_cast<int*>(wire + kFullRows * kRowLanes * sizeof(int32_t)),
                         TailMask(), _mm256_shuffle_epi8(sums[kFullRows], swap));
  return true;
}

ATP_TARGET_AVX512 inline void LoadAvx512(int32_t* lanes, const uint8_t* wire) {
  const __m512i swap = ByteSwapMask512();
#pragma GCC unroll 4
  for (size_t r = 0; r <= kFullRows512; ++r) {
    _mm512_store_si512(lanes + r * kRow512Lanes, LoadWireRow512(wire, r, swap));
  }
}

ATP_TARGET_AVX512 inline void AddAvx512(int32_t* lanes, const uint8_t* wire) {
  const __m512i swap = ByteSwapMask512();
  __m512i magnitudes = _mm512_setzero_si512();  // OR of every |lane| and |value|
#pragma GCC unroll 4
  for (size_t r = 0; r <= kFullRows512; ++r) {
    int32_t* row = lanes + r * kRow512Lanes;
    const __m512i lane = _mm512_load_si512(row);
    const __m512i value = LoadWireRow512(wire, r, swap);
    _mm512_store_si512(row, _mm512_add_epi32(lane, value));
    // magnitudes | |lane| | |value|: truth table 0xFE.
    magnitudes = _mm512_ternarylogic_epi32(magnitudes, _mm512_maskz_abs_epi32(kAllLanes, lane),
                                           _mm512_maskz_abs_epi32(kAllLanes, value), 0xFE);
  }
  const __m512i large = _mm512_set1_epi32(static_cast<int32_t>(kLargeMagnitude));
  if (_mm512_test_epi32_mask(magnitudes, large) != 0) [[unlikely]] {
    StickyFixupAvx512(lanes, wire);
  }
}

ATP_TARGET_AVX512 inline void StoreAvx512(uint8_t* wire, const int32_t* lanes) {
  const __m512i swap = ByteSwapMask512();
#pragma GCC unroll 4
  for (size_t r = 0; r < kFullRows512; ++r) {
    _mm512_storeu_si512(wire + r * kRow512Lanes * sizeof(int32_t),
                        _mm512_shuffle_epi8(_mm512_load_si512(lanes + r * kRow512Lanes), swap));
  }
  _mm512_mask_storeu_epi32(
      wire + kFullRows512 * kRow512Lanes * sizeof(int32_t), kTailMask512,
      _mm512_shuffle_epi8(_mm512_load_si512(lanes + kFullRows512 * kRow512Lanes), swap));
}

// AddOutAvx512: AddOutAvx2 in rows of 16.
ATP_TARGET_AVX512 inline bool AddOutAvx512(const int32_t* lanes, uint8_t* wire) {
  const __m512i swap = ByteSwapMask512();
  __m512i sums[kFullRows512 + 1];
  __m512i magnitudes = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (size_t r = 0; r <= kFullRows512; ++r) {
    const __m512i lane = _mm512_load_si512(lanes + r * kRow512Lanes);
    const __m512i value = LoadWireRow512(wire, r, swap);
    sums[r] = _mm512_add_epi32(lane, value);
    magnitudes = _mm512_ternarylogic_epi32(magnitudes, _mm512_maskz_abs_epi32(kAllLanes, lane),
                                           _mm512_maskz_abs_epi32(kAllLanes, value), 0xFE);
  }
  if (_mm512_test_epi32_mask(
          magnitudes, _mm512_set1_epi32(static_cast<int32_t>(kLargeMagnitude))) != 0) [[unlikely]] {
    return false;
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < kFullRows512; ++r) {
    _mm512_storeu_si512(wire + r * kRow512Lanes * sizeof(int32_t),
                        _mm512_shuffle_epi8(sums[r], swap));
  }
  _mm512_mask_storeu_epi32(wire + kFullRows512 * kRow512Lanes * sizeof(int32_t), kTailMask512,
                           _mm512_shuffle_epi8(sums[kFullRows512], swap));
  return true;
}

}  // namespace atp::switch_emulator::simd

#endif  // ATP_SWITCH_EMULATOR_PIPELINE_VALUE_KERNELS_SIMD_H_
