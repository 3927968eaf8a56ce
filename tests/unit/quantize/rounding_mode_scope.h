// tests/unit/quantize/rounding_mode_scope.h: the quantize tests' way to run
// code under another floating-point rounding mode.
#ifndef ATP_TESTS_UNIT_QUANTIZE_ROUNDING_MODE_SCOPE_H_
#define ATP_TESTS_UNIT_QUANTIZE_ROUNDING_MODE_SCOPE_H_

#include <cfenv>

#include "gtest/gtest.h"

namespace atp::testing_support {

// RoundingModeScope: sets the FP rounding mode, restores the old one on exit
// (also when an ASSERT returns early).
class RoundingModeScope {
 public:
  explicit RoundingModeScope(int mode) : saved_(std::fegetround()) {
    EXPECT_EQ(std::fesetround(mode), 0);
  }
  ~RoundingModeScope() { std::fesetround(saved_); }
  RoundingModeScope(const RoundingModeScope&) = delete;
  RoundingModeScope& operator=(const RoundingModeScope&) = delete;

 private:
  int saved_;
};

}  // namespace atp::testing_support

#endif  // ATP_TESTS_UNIT_QUANTIZE_ROUNDING_MODE_SCOPE_H_
