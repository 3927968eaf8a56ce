#include "switch_emulator/pipeline/value_kernels.h"

#include <immintrin.h>

#include <bit>
#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "atp/wire.h"
#include "switch_emulator/pipeline/aggregator.h"

namespace atp::switch_emulator {
namespace {

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

int32_t LoadBigEndianInt32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return static_cast<int32_t>(__builtin_bswap32(v));
}

void StoreBigEndianInt32(uint8_t* p, int32_t value) {
  uint32_t v = __builtin_bswap32(static_cast<uint32_t>(value));
  std::memcpy(p, &v, sizeof(v));
}

// --- AVX2 ------------------------------------------------------------------

#define ATP_AVX2 __attribute__((target("avx2")))

ATP_AVX2 inline __m256i ByteSwapMask() {
  return _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12,  //
                          3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
}

// TailMask: the 6 lanes of the last row that hold payload values.
ATP_AVX2 inline __m256i TailMask() { return _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0); }

// LoadWireRow: row `r` of the payload, byte-swapped to host order. The last row
// is a masked load: its two padding lanes read as 0 and touch no memory.
ATP_AVX2 inline __m256i LoadWireRow(const uint8_t* wire, size_t r, __m256i swap) {
  const uint8_t* p = wire + r * kRowLanes * sizeof(int32_t);
  __m256i raw = r < kFullRows ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                              : _mm256_maskload_epi32(reinterpret_cast<const int*>(p), TailMask());
  return _mm256_shuffle_epi8(raw, swap);
}

// SaturatingAdd8: a + b per lane, clamped to int32. Signed overflow happened
// where a and b have the same sign and the sum's sign differs; the clamp value
// then is INT32_MAX for a >= 0 and INT32_MIN for a < 0.
ATP_AVX2 inline __m256i SaturatingAdd8(__m256i a, __m256i b) {
  __m256i sum = _mm256_add_epi32(a, b);
  __m256i overflow = _mm256_andnot_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(a, sum));
  __m256i clamp = _mm256_xor_si256(_mm256_srai_epi32(a, 31), _mm256_set1_epi32(0x7FFFFFFF));
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(sum), _mm256_castsi256_ps(clamp),
                                              _mm256_castsi256_ps(overflow)));
}

// --- AVX-512 ---------------------------------------------------------------

#define ATP_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq")))

// Rows of 16 lanes: 3 full rows cover values 0..47, the 4th holds 48..61 and
// the 2 padding lanes.
constexpr size_t kRow512Lanes = 16;
constexpr size_t kFullRows512 = kValues / kRow512Lanes;
constexpr __mmask16 kTailMask512 = (1u << (kValues % kRow512Lanes)) - 1;
static_assert(kFullRows512 == 3 && kTailMask512 == 0x3FFF);
static_assert((kFullRows512 + 1) * kRow512Lanes == kAggregatorLanes);

// (GCC 12's plain _mm512_broadcast_i32x4 and _mm512_srai_epi32 trip
// -Wuninitialized inside the intrinsics header; their all-lanes maskz forms are
// the same instructions.)
constexpr __mmask16 kAllLanes = 0xFFFF;

ATP_AVX512 inline __m512i ByteSwapMask512() {
  return _mm512_maskz_broadcast_i32x4(
      kAllLanes, _mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12));
}

// LoadWireRow512: row `r` of the payload in host order; the last row is a
// zero-masked load that touches only its 14 values.
ATP_AVX512 inline __m512i LoadWireRow512(const uint8_t* wire, size_t r, __m512i swap) {
  const uint8_t* p = wire + r * kRow512Lanes * sizeof(int32_t);
  __m512i raw =
      r < kFullRows512 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(kTailMask512, p);
  return _mm512_shuffle_epi8(raw, swap);
}

// SaturatingAdd16: as SaturatingAdd8. One ternary-logic op finds the overflow
// sign bits (~(a ^ b) & (a ^ sum): truth table 0x42 over a, b, sum), and on
// overflow the clamp is (sum >> 31) ^ INT32_MIN, since the wrapped sum has the
// sign opposite to the true one.
ATP_AVX512 inline __m512i SaturatingAdd16(__m512i a, __m512i b) {
  __m512i sum = _mm512_add_epi32(a, b);
  __mmask16 overflow = _mm512_movepi32_mask(_mm512_ternarylogic_epi32(a, b, sum, 0x42));
  return _mm512_mask_xor_epi32(sum, overflow, _mm512_maskz_srai_epi32(kAllLanes, sum, 31),
                               _mm512_set1_epi32(std::numeric_limits<int32_t>::min()));
}

}  // namespace

namespace internal {

void LoadScalar(int32_t* lanes, const uint8_t* wire) {
  for (size_t i = 0; i < kValues; ++i) lanes[i] = LoadBigEndianInt32(wire + 4 * i);
  for (size_t i = kValues; i < kAggregatorLanes; ++i) lanes[i] = 0;
}

void AddScalar(int32_t* lanes, const uint8_t* wire) {
  for (size_t i = 0; i < kValues; ++i) {
    lanes[i] = SaturatingAdd(lanes[i], LoadBigEndianInt32(wire + 4 * i));
  }
}

void StoreScalar(uint8_t* wire, const int32_t* lanes) {
  for (size_t i = 0; i < kValues; ++i) StoreBigEndianInt32(wire + 4 * i, lanes[i]);
}

// The AVX2 kernels: 7 full rows (unrolled: no loop counter, no per-row branch)
// and the masked tail row.
ATP_AVX2 void LoadAvx2(int32_t* lanes, const uint8_t* wire) {
  const __m256i swap = ByteSwapMask();
  auto* out = reinterpret_cast<__m256i*>(lanes);
#pragma GCC unroll 8
  for (size_t r = 0; r <= kFullRows; ++r) _mm256_store_si256(out + r, LoadWireRow(wire, r, swap));
}

ATP_AVX2 void AddAvx2(int32_t* lanes, const uint8_t* wire) {
  const __m256i swap = ByteSwapMask();
  auto* acc = reinterpret_cast<__m256i*>(lanes);
#pragma GCC unroll 8
  for (size_t r = 0; r <= kFullRows; ++r) {
    __m256i a = _mm256_load_si256(acc + r);
    _mm256_store_si256(acc + r, SaturatingAdd8(a, LoadWireRow(wire, r, swap)));
  }
}

ATP_AVX2 void StoreAvx2(uint8_t* wire, const int32_t* lanes) {
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

ATP_AVX512 void LoadAvx512(int32_t* lanes, const uint8_t* wire) {
  const __m512i swap = ByteSwapMask512();
#pragma GCC unroll 4
  for (size_t r = 0; r <= kFullRows512; ++r) {
    _mm512_store_si512(lanes + r * kRow512Lanes, LoadWireRow512(wire, r, swap));
  }
}

ATP_AVX512 void AddAvx512(int32_t* lanes, const uint8_t* wire) {
  const __m512i swap = ByteSwapMask512();
#pragma GCC unroll 4
  for (size_t r = 0; r <= kFullRows512; ++r) {
    int32_t* row = lanes + r * kRow512Lanes;
    _mm512_store_si512(row, SaturatingAdd16(_mm512_load_si512(row), LoadWireRow512(wire, r, swap)));
  }
}

ATP_AVX512 void StoreAvx512(uint8_t* wire, const int32_t* lanes) {
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

}  // namespace internal

#undef ATP_AVX512
#undef ATP_AVX2

std::string_view ValueKernelName(ValueKernel kernel) {
  switch (kernel) {
    case ValueKernel::kAuto:
      return "auto";
    case ValueKernel::kScalar:
      return "scalar";
    case ValueKernel::kAvx2:
      return "avx2";
    case ValueKernel::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq");
  return has;
}

absl::StatusOr<ValueKernels> SelectValueKernels(ValueKernel requested) {
  if (requested == ValueKernel::kAuto) {
    requested = CpuHasAvx512() ? ValueKernel::kAvx512
                : CpuHasAvx2() ? ValueKernel::kAvx2
                               : ValueKernel::kScalar;
  }
  switch (requested) {
    case ValueKernel::kScalar:
      return ValueKernels{ValueKernel::kScalar, &internal::LoadScalar, &internal::AddScalar,
                          &internal::StoreScalar};
    case ValueKernel::kAvx2:
      if (!CpuHasAvx2()) {
        return absl::FailedPreconditionError("ValueKernel::kAvx2: this CPU has no AVX2");
      }
      return ValueKernels{ValueKernel::kAvx2, &internal::LoadAvx2, &internal::AddAvx2,
                          &internal::StoreAvx2};
    case ValueKernel::kAvx512:
      if (!CpuHasAvx512()) {
        return absl::FailedPreconditionError(
            "ValueKernel::kAvx512: this CPU lacks AVX-512 F, BW or DQ");
      }
      return ValueKernels{ValueKernel::kAvx512, &internal::LoadAvx512, &internal::AddAvx512,
                          &internal::StoreAvx512};
    case ValueKernel::kAuto:
      break;
  }
  return absl::InvalidArgumentError("ValueKernel: unknown value");
}

}  // namespace atp::switch_emulator
