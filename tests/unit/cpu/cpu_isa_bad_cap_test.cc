// A process started with ATP_MAX_CPU_ISA=avx3 (CMakeLists.txt): the value is
// ignored, once, with a message that names it.
#include <string>

#include "atp/cpu_isa.h"
#include "gtest/gtest.h"

namespace atp {
namespace {

TEST(CpuIsaBadCap, IsIgnoredWithOneMessage) {
  ::testing::internal::CaptureStderr();
  const CpuIsa first = MaxCpuIsa();
  const CpuIsa second = MaxCpuIsa();
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(first, CpuIsaOfThisCpu());
  EXPECT_EQ(second, first);
  EXPECT_NE(said.find("ATP_MAX_CPU_ISA=avx3"), std::string::npos) << said;
  EXPECT_EQ(said.find("ATP_MAX_CPU_ISA", said.find("ATP_MAX_CPU_ISA") + 1), std::string::npos)
      << "said once: " << said;
}

}  // namespace
}  // namespace atp
