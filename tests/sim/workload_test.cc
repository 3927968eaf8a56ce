// Tests of the workload generator and the exactness oracle (sim/workload.h).
#include "sim/workload.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace atp::sim {
namespace {

WorkloadConfig Small(size_t values) {
  WorkloadConfig config;
  config.values = values;
  config.seed = 5;
  return config;
}

TEST(WorkloadTest, InputsAreDeterministicAndDifferPerWorkerAndIteration) {
  const WorkloadConfig config = Small(1000);
  std::vector<float> a(1000), b(1000), c(1000), d(1000);
  FillInput(config, 1, 0, 4, 0, a);
  FillInput(config, 1, 0, 4, 0, b);
  FillInput(config, 1, 1, 4, 0, c);
  FillInput(config, 1, 0, 4, 1, d);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  for (float x : a) EXPECT_LT(std::fabs(x), 2.0f + 1e-6f);  // amplitude 8 / 4
}

TEST(WorkloadTest, IntegerPathIsTheDequantizedExactSumOfQuantizedInputs) {
  const WorkloadConfig config = Small(130);  // 3 fragments, the last partial
  const int workers = 3;
  const ExpectedResult expected = ExpectedResult::Compute(config, 2, workers, 0);
  EXPECT_EQ(expected.fragments(ExpectedResult::Path::kInteger), 3u);
  // Independent computation, value by value.
  std::vector<std::vector<float>> inputs(workers, std::vector<float>(130));
  for (int w = 0; w < workers; ++w) FillInput(config, 2, w, workers, 0, inputs[w]);
  std::vector<float> output(130);
  for (size_t i = 0; i < 130; ++i) {
    int64_t sum = 0;
    for (int w = 0; w < workers; ++w) sum += std::llrint(double{inputs[w][i]} * config.scale);
    output[i] = static_cast<float>(static_cast<double>(sum) / config.scale);
  }
  std::string why;
  EXPECT_TRUE(expected.Check(output, &why)) << why;
  // One ulp off anywhere is not exact.
  output[77] = std::nextafter(output[77], 100.0f);
  EXPECT_FALSE(expected.Check(output, &why));
  EXPECT_NE(why.find("value 77"), std::string::npos) << why;
}

TEST(WorkloadTest, WorkerOrderOfAddDoesNotMatter) {
  WorkloadConfig config = Small(620);
  config.overflow_every = 3;
  const int workers = 4;
  const ExpectedResult in_order = ExpectedResult::Compute(config, 1, workers, 2);
  ExpectedResult shuffled(config, workers);
  std::vector<float> input(620);
  for (int w : {2, 0, 3, 1}) {
    FillInput(config, 1, w, workers, 2, input);
    shuffled.Add(w, input);
  }
  shuffled.Finish();
  // Build an output from `in_order`'s paths and check it against both.
  std::vector<std::vector<float>> inputs(workers, std::vector<float>(620));
  for (int w = 0; w < workers; ++w) FillInput(config, 1, w, workers, 2, inputs[w]);
  std::vector<float> output(620);
  for (size_t i = 0; i < 620; ++i) {
    const bool overflow = (i / 62) % 3 == 2;
    double dsum = 0;
    int64_t isum = 0;
    for (int w = 0; w < workers; ++w) {
      dsum += inputs[w][i];
      isum += std::llrint(double{inputs[w][i]} * config.scale);
    }
    output[i] = overflow ? static_cast<float>(dsum)
                         : static_cast<float>(static_cast<double>(isum) / config.scale);
  }
  std::string why;
  EXPECT_TRUE(in_order.Check(output, &why)) << why;
  EXPECT_TRUE(shuffled.Check(output, &why)) << why;
}

TEST(WorkloadTest, OverflowFragmentsMustTakeTheFloatPath) {
  WorkloadConfig config = Small(62 * 4);
  config.overflow_every = 2;  // fragments 1 and 3
  const ExpectedResult expected = ExpectedResult::Compute(config, 1, 2, 0);
  EXPECT_EQ(expected.fragments(ExpectedResult::Path::kFloat), 2u);
  EXPECT_EQ(expected.fragments(ExpectedResult::Path::kInteger), 2u);
  // A saturated integer answer for an overflow fragment is wrong.
  std::vector<float> a(62 * 4), b(62 * 4);
  FillInput(config, 1, 0, 2, 0, a);
  FillInput(config, 1, 1, 2, 0, b);
  std::vector<float> output(62 * 4);
  for (size_t i = 0; i < output.size(); ++i) {
    output[i] = static_cast<float>(double{a[i]} + double{b[i]});
    if ((i / 62) % 2 == 0) {
      output[i] = static_cast<float>(
          static_cast<double>(std::llrint(double{a[i]} * 1e8) + std::llrint(double{b[i]} * 1e8)) /
          1e8);
    }
  }
  std::string why;
  EXPECT_TRUE(expected.Check(output, &why)) << why;
  output[62] = static_cast<float>(2147483647.0 / 1e8);
  EXPECT_FALSE(expected.Check(output, &why));
}

TEST(WorkloadTest, LargeInputsNeverClaimTheIntegerPathWhenASumCanSaturate) {
  WorkloadConfig config = Small(62);
  config.amplitude = 15.0;  // two workers of ~+-15: partials may exceed int32
  const int workers = 2;
  const ExpectedResult expected = ExpectedResult::Compute(config, 1, workers, 0);
  // Not every fragment can be decided ahead: the oracle never claims integer
  // when a partial sum could saturate.
  EXPECT_EQ(expected.fragments(ExpectedResult::Path::kInteger), 0u);
}

}  // namespace
}  // namespace atp::sim
