#include "atp/cpu_isa.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace atp {
namespace {

constexpr char kCapVariable[] = "ATP_MAX_CPU_ISA";

CpuIsa DetectCpuIsa() {
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports also checks that the OS saves the YMM (and ZMM
  // and mask) state.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") == 0) return CpuIsa::kScalar;
  if (__builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
      __builtin_cpu_supports("avx512dq") != 0) {
    return CpuIsa::kAvx512;
  }
  return CpuIsa::kAvx2;
#else
  return CpuIsa::kScalar;
#endif
}

}  // namespace

CpuIsa CpuIsaOfThisCpu() {
  static const CpuIsa isa = DetectCpuIsa();
  return isa;
}

CpuIsa MaxCpuIsa() {
  static const CpuIsa isa = [] {
    std::string error;
    const CpuIsa capped = CapCpuIsa(CpuIsaOfThisCpu(), std::getenv(kCapVariable), &error);
    if (!error.empty()) std::fprintf(stderr, "libatp: %s\n", error.c_str());
    return capped;
  }();
  return isa;
}

std::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

std::optional<CpuIsa> ParseCpuIsa(std::string_view name) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return std::nullopt;
}

CpuIsa CapCpuIsa(CpuIsa cpu, const char* cap, std::string* error) {
  if (cap == nullptr) return cpu;
  const std::optional<CpuIsa> parsed = ParseCpuIsa(cap);
  if (!parsed) {
    *error = absl::StrCat(kCapVariable, "=", cap,
                          ": not scalar, avx2 or avx512; ignored (kernels use ", std::string(CpuIsaName(cpu)),
                          ")");
    return cpu;
  }
  return std::min(cpu, *parsed);
}

}  // namespace atp
