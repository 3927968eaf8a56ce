// A process started with ATP_MAX_CPU_ISA=scalar (CMakeLists.txt): kernels
// that choose for themselves stay scalar, kernels asked for by name still
// run where the CPU has them, and results stay bit-identical.
#include <array>
#include <cstring>
#include <vector>

#include "atp/cpu_isa.h"
#include "atp/quantize.h"
#include "gtest/gtest.h"
#include "switch_emulator/pipeline/value_kernels.h"

namespace atp {
namespace {

TEST(CpuIsaCapped, EveryKernelChoiceIsScalar) {
  EXPECT_EQ(MaxCpuIsa(), CpuIsa::kScalar);
  const absl::StatusOr<switch_emulator::ValueKernels> automatic =
      switch_emulator::SelectValueKernels(switch_emulator::ValueKernel::kAuto);
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_EQ(automatic->kind, switch_emulator::ValueKernel::kScalar);
}

TEST(CpuIsaCapped, TheCpuStillSaysWhatItHas) {
  EXPECT_EQ(HasAvx2(), CpuIsaOfThisCpu() >= CpuIsa::kAvx2);
  if (!switch_emulator::CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  const absl::StatusOr<switch_emulator::ValueKernels> named =
      switch_emulator::SelectValueKernels(switch_emulator::ValueKernel::kAvx2);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->kind, switch_emulator::ValueKernel::kAvx2) << "a named kernel is not capped";
}

TEST(CpuIsaCapped, TheDispatchersGiveTheScalarResults) {
  std::vector<float> in(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.37f - 150.0f;
  std::vector<uint8_t> wire(4 * in.size());
  std::vector<uint8_t> wire_scalar(4 * in.size());
  EXPECT_EQ(QuantizeToWire(in, kDefaultScale, wire),
            QuantizeToWireScalar(in, kDefaultScale, wire_scalar));
  EXPECT_EQ(wire, wire_scalar);
  std::vector<float> out(in.size());
  std::vector<float> out_scalar(in.size());
  DequantizeFromWire(wire, kDefaultScale, out);
  DequantizeFromWireScalar(wire, kDefaultScale, out_scalar);
  EXPECT_EQ(std::memcmp(out.data(), out_scalar.data(), 4 * out.size()), 0);
}

}  // namespace
}  // namespace atp
