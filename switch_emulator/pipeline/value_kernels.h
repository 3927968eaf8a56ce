// switch_emulator/pipeline/value_kernels.h: the switch's arithmetic on one
// fragment: big-endian wire payload <-> host-order aggregator values, and the
// sticky saturating int32 add (ATP-SPEC section 4, "value[62] int32
// saturating").
//
// Sticky, because a bound means "overflowed" (docs/protocol.md, atp/quantize.h):
// workers never send INT32_MAX or INT32_MIN on the integer path, so a bound in
// a sum can only come from a saturation, and the PS must see it to switch the
// fragment to the float path. A plain clamp would let INT32_MAX + (-100) come
// back as INT32_MAX - 100, an exact-looking but wrong result. So:
//   - a lane at a bound keeps that bound, whatever is added to it (even the
//     opposite bound: the first bound wins);
//   - otherwise a contribution value at a bound (a partial sum that saturated
//     upstream) sets the lane to that bound;
//   - otherwise the lane becomes lane + value, clamped to [INT32_MIN, INT32_MAX].
// The result is therefore at a bound iff some input was, or the true sum left
// the open range (INT32_MIN, INT32_MAX): whatever the order of the adds.
//
// Every kernel exists as a portable scalar version (the reference the tests
// compare against), an AVX2 version and an AVX-512 version; SelectValueKernels
// picks one at run time, so the library needs no -march flag.
//
//   absl::StatusOr<ValueKernels> k = SelectValueKernels(ValueKernel::kAuto);
//   k->add(values.lanes, frame_payload);   // values += payload, saturating
#ifndef ATP_SWITCH_EMULATOR_PIPELINE_VALUE_KERNELS_H_
#define ATP_SWITCH_EMULATOR_PIPELINE_VALUE_KERNELS_H_

#include <cstdint>
#include <limits>
#include <string_view>

#include "absl/status/statusor.h"

namespace atp::switch_emulator {

// ValueKernel: which implementation to run.
enum class ValueKernel : uint8_t {
  kAuto,    // the fastest this CPU supports
  kScalar,  // portable C++
  kAvx2,    // AVX2 intrinsics; fails SelectValueKernels on a CPU without AVX2
  kAvx512,  // AVX-512 F/BW/DQ intrinsics (4 rows of 16 lanes, masked tail)
};

std::string_view ValueKernelName(ValueKernel kernel);

// The kernels' contract. `lanes` is an AggregatorValues row: 64 int32, 32-byte
// aligned, lanes 62..63 zero (and kept zero). `wire` points at the 248 payload
// bytes of a frame (62 big-endian int32, any alignment); kernels never read or
// write a byte outside those 248.
//
// LoadFn:  lanes[i] = wire[i] (byte-swapped), i < 62; lanes 62..63 set to 0.
// AddFn:   lanes[i] = StickySaturatingAdd(lanes[i], wire[i]), i < 62.
// StoreFn: wire[i] = lanes[i] (byte-swapped), i < 62.
using LoadFn = void (*)(int32_t* lanes, const uint8_t* wire);
using AddFn = void (*)(int32_t* lanes, const uint8_t* wire);
using StoreFn = void (*)(uint8_t* wire, const int32_t* lanes);

struct ValueKernels {
  ValueKernel kind = ValueKernel::kScalar;
  LoadFn load = nullptr;
  AddFn add = nullptr;
  StoreFn store = nullptr;
};

// SelectValueKernels: the kernels for `requested` (kAuto resolves to the best
// the CPU supports, capped by ATP_MAX_CPU_ISA: atp/cpu_isa.h).
// FailedPrecondition if the CPU lacks what `requested` needs.
absl::StatusOr<ValueKernels> SelectValueKernels(ValueKernel requested);

// CpuHasAvx2 / CpuHasAvx512: whether those kernels can run here
// (CpuIsaOfThisCpu; ATP_MAX_CPU_ISA does not change it).
bool CpuHasAvx2();
bool CpuHasAvx512();

// IsBound: whether `v` is INT32_MIN or INT32_MAX, the values that mean
// "this sum overflowed".
constexpr bool IsBound(int32_t v) {
  return v == std::numeric_limits<int32_t>::min() || v == std::numeric_limits<int32_t>::max();
}

// StickySaturatingAdd: the aggregator's add, the reference every kernel must
// match bit for bit: `lane` if it is a bound; else `value` if it is a bound;
// else lane + value clamped to the int32 range. In particular
// StickySaturatingAdd(INT32_MAX, INT32_MIN) == INT32_MAX and
// StickySaturatingAdd(INT32_MIN, INT32_MAX) == INT32_MIN.
constexpr int32_t StickySaturatingAdd(int32_t lane, int32_t value) {
  if (IsBound(lane)) return lane;
  if (IsBound(value)) return value;
  int32_t sum = 0;
  if (__builtin_add_overflow(lane, value, &sum)) {
    return lane < 0 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max();
  }
  return sum;
}

namespace internal {
// The implementations, for tests and benchmarks. The Avx2 (Avx512) ones must
// only be called when CpuHasAvx2() (CpuHasAvx512()).
void LoadScalar(int32_t* lanes, const uint8_t* wire);
void AddScalar(int32_t* lanes, const uint8_t* wire);
void StoreScalar(uint8_t* wire, const int32_t* lanes);
void LoadAvx2(int32_t* lanes, const uint8_t* wire);
void AddAvx2(int32_t* lanes, const uint8_t* wire);
void StoreAvx2(uint8_t* wire, const int32_t* lanes);
void LoadAvx512(int32_t* lanes, const uint8_t* wire);
void AddAvx512(int32_t* lanes, const uint8_t* wire);
void StoreAvx512(uint8_t* wire, const int32_t* lanes);
}  // namespace internal

}  // namespace atp::switch_emulator

#endif  // ATP_SWITCH_EMULATOR_PIPELINE_VALUE_KERNELS_H_
