#include "switch_emulator/pipeline/value_kernels.h"

#include <cstring>
#include <limits>

#include "absl/status/status.h"
#include "atp/cpu_isa.h"
#include "atp/wire.h"
#include "lib/wire/byte_order.h"
#include "switch_emulator/pipeline/aggregator.h"
#include "switch_emulator/pipeline/value_kernels_simd.h"

namespace atp::switch_emulator {
namespace {

constexpr size_t kValues = wire::kValuesPerFragment;

int32_t LoadBigEndianInt32(const uint8_t* p) {
  return static_cast<int32_t>(wire::internal::LoadBig32(p));
}

void StoreBigEndianInt32(uint8_t* p, int32_t value) {
  wire::internal::StoreBig32(p, static_cast<uint32_t>(value));
}

}  // namespace

namespace internal {

void LoadScalar(int32_t* lanes, const uint8_t* wire) {
  for (size_t i = 0; i < kValues; ++i) lanes[i] = LoadBigEndianInt32(wire + 4 * i);
  for (size_t i = kValues; i < kAggregatorLanes; ++i) lanes[i] = 0;
}

void AddScalar(int32_t* lanes, const uint8_t* wire) {
  for (size_t i = 0; i < kValues; ++i) {
    lanes[i] = StickySaturatingAdd(lanes[i], LoadBigEndianInt32(wire + 4 * i));
  }
}

void StoreScalar(uint8_t* wire, const int32_t* lanes) {
  for (size_t i = 0; i < kValues; ++i) StoreBigEndianInt32(wire + 4 * i, lanes[i]);
}

// The vector kernels live in value_kernels_simd.h, inline, so that the
// pipeline's datapaths can inline them too.
ATP_TARGET_AVX2 void LoadAvx2(int32_t* lanes, const uint8_t* wire) { simd::LoadAvx2(lanes, wire); }
ATP_TARGET_AVX2 void AddAvx2(int32_t* lanes, const uint8_t* wire) { simd::AddAvx2(lanes, wire); }
ATP_TARGET_AVX2 void StoreAvx2(uint8_t* wire, const int32_t* lanes) {
  simd::StoreAvx2(wire, lanes);
}
ATP_TARGET_AVX512 void LoadAvx512(int32_t* lanes, const uint8_t* wire) {
  simd::LoadAvx512(lanes, wire);
}
ATP_TARGET_AVX512 void AddAvx512(int32_t* lanes, const uint8_t* wire) {
  simd::AddAvx512(lanes, wire);
}
ATP_TARGET_AVX512 void StoreAvx512(uint8_t* wire, const int32_t* lanes) {
  simd::StoreAvx512(wire, lanes);
}

}  // namespace internal

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

bool CpuHasAvx2() { return CpuIsaOfThisCpu() >= CpuIsa::kAvx2; }

bool CpuHasAvx512() { return CpuIsaOfThisCpu() >= CpuIsa::kAvx512; }

absl::StatusOr<ValueKernels> SelectValueKernels(ValueKernel requested) {
  if (requested == ValueKernel::kAuto) {
    // The best the CPU has, as ATP_MAX_CPU_ISA allows.
    requested = MaxCpuIsa() >= CpuIsa::kAvx512 ? ValueKernel::kAvx512
                : MaxCpuIsa() >= CpuIsa::kAvx2 ? ValueKernel::kAvx2
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
