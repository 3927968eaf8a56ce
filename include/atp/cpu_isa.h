// atp/cpu_isa.h: the widest x86 vector instruction set libatp's kernels use
// (quantize and dequantize, the switch pipeline's value kernels): the CPU's,
// capped by the environment variable ATP_MAX_CPU_ISA, as oneDNN's
// DNNL_MAX_CPU_ISA caps its kernels.
//
//   ATP_MAX_CPU_ISA=avx2 ./train.py     # no 512-bit kernels in this process
//
// Why a cap: on Skylake-SP and Cascade Lake, 512-bit floating-point work
// lowers the core's clock for a while after it, which can cost the rest of a
// training step more than the quantize kernels gain; where that shows, cap the
// process at avx2. Values: scalar, avx2, avx512 (case-sensitive); a cap above
// what the CPU has changes nothing; an unknown value is ignored with one
// message on stderr. Read once, at the first kernel choice.
#ifndef ATP_CPU_ISA_H_
#define ATP_CPU_ISA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace atp {

// Ordered: each one includes the ones before it.
enum class CpuIsa : uint8_t {
  kScalar = 0,
  kAvx2 = 1,
  kAvx512 = 2,  // AVX-512 F, BW and DQ (Skylake-SP and later), with AVX2
};

// CpuIsaOfThisCpu: the widest this CPU and OS support (asked once, then
// cached): what may be called.
CpuIsa CpuIsaOfThisCpu();

// MaxCpuIsa: what kernels that choose for themselves use: CpuIsaOfThisCpu()
// capped by ATP_MAX_CPU_ISA (read once, then cached).
CpuIsa MaxCpuIsa();

std::string_view CpuIsaName(CpuIsa isa);
// ParseCpuIsa: "scalar", "avx2" or "avx512"; nullopt for anything else.
std::optional<CpuIsa> ParseCpuIsa(std::string_view name);

// CapCpuIsa: what MaxCpuIsa computes from the CPU's ISA and the variable's
// value (null: unset). An unknown value leaves `cpu` and says why in *error.
CpuIsa CapCpuIsa(CpuIsa cpu, const char* cap, std::string* error);

}  // namespace atp

#endif  // ATP_CPU_ISA_H_
