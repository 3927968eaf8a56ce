// The kernels' instruction set: names, the cap's arithmetic, what this CPU
// has, and that an unset ATP_MAX_CPU_ISA leaves every kernel choice to the CPU.
#include "atp/cpu_isa.h"

#include <cstdlib>
#include <string>

#include "atp/quantize.h"
#include "gtest/gtest.h"
#include "switch_emulator/pipeline/value_kernels.h"

namespace atp {
namespace {

TEST(CpuIsa, NamesParseBack) {
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    EXPECT_EQ(ParseCpuIsa(CpuIsaName(isa)), isa);
  }
  EXPECT_EQ(ParseCpuIsa("AVX2"), std::nullopt) << "case-sensitive";
  EXPECT_EQ(ParseCpuIsa(""), std::nullopt);
  EXPECT_EQ(ParseCpuIsa("avx512f"), std::nullopt);
}

TEST(CpuIsa, TheCapLowersNeverRaises) {
  std::string error;
  EXPECT_EQ(CapCpuIsa(CpuIsa::kAvx512, nullptr, &error), CpuIsa::kAvx512) << "unset";
  EXPECT_EQ(CapCpuIsa(CpuIsa::kAvx512, "avx2", &error), CpuIsa::kAvx2);
  EXPECT_EQ(CapCpuIsa(CpuIsa::kAvx512, "scalar", &error), CpuIsa::kScalar);
  EXPECT_EQ(CapCpuIsa(CpuIsa::kAvx2, "avx512", &error), CpuIsa::kAvx2) << "not past the CPU";
  EXPECT_EQ(CapCpuIsa(CpuIsa::kScalar, "avx2", &error), CpuIsa::kScalar);
  EXPECT_TRUE(error.empty()) << error;
}

TEST(CpuIsa, AnUnknownCapIsIgnoredAndSaysWhy) {
  std::string error;
  EXPECT_EQ(CapCpuIsa(CpuIsa::kAvx2, "sse4", &error), CpuIsa::kAvx2);
  EXPECT_NE(error.find("ATP_MAX_CPU_ISA=sse4"), std::string::npos) << error;
  EXPECT_NE(error.find("scalar, avx2 or avx512"), std::string::npos) << error;
  EXPECT_NE(error.find("avx2"), std::string::npos) << error;
}

TEST(CpuIsa, ThisCpuIsWhatItsFeatureBitsSay) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") != 0;
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") != 0 &&
                      __builtin_cpu_supports("avx512bw") != 0 &&
                      __builtin_cpu_supports("avx512dq") != 0;
  const CpuIsa expected = avx512 ? CpuIsa::kAvx512 : avx2 ? CpuIsa::kAvx2 : CpuIsa::kScalar;
#else
  const CpuIsa expected = CpuIsa::kScalar;
#endif
  EXPECT_EQ(CpuIsaOfThisCpu(), expected);
  EXPECT_EQ(HasAvx2(), expected >= CpuIsa::kAvx2);
  EXPECT_EQ(HasAvx512(), expected >= CpuIsa::kAvx512);
  EXPECT_EQ(switch_emulator::CpuHasAvx2(), expected >= CpuIsa::kAvx2);
  EXPECT_EQ(switch_emulator::CpuHasAvx512(), expected >= CpuIsa::kAvx512);
}

TEST(CpuIsa, UnsetTheKernelsUseTheCpusBest) {
  if (std::getenv("ATP_MAX_CPU_ISA") != nullptr) GTEST_SKIP() << "ATP_MAX_CPU_ISA is set here";
  EXPECT_EQ(MaxCpuIsa(), CpuIsaOfThisCpu());
  const absl::StatusOr<switch_emulator::ValueKernels> kernels =
      switch_emulator::SelectValueKernels(switch_emulator::ValueKernel::kAuto);
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  const switch_emulator::ValueKernel best =
      CpuIsaOfThisCpu() == CpuIsa::kAvx512 ? switch_emulator::ValueKernel::kAvx512
      : CpuIsaOfThisCpu() == CpuIsa::kAvx2 ? switch_emulator::ValueKernel::kAvx2
                                           : switch_emulator::ValueKernel::kScalar;
  EXPECT_EQ(kernels->kind, best);
}

}  // namespace
}  // namespace atp
