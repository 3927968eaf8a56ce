// Tests of SkipReduce's plan (atp/skip_reduce.h) against the literal
// reference in ring_reference.h, and of random mode's statistics.
#include "atp/skip_reduce.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/collectives/ring_reference.h"

namespace atp {
namespace {

using ring_reference::SimulateRing;

SkipPlan MustPlan(const SkipOptions& options, int ranks) {
  absl::StatusOr<SkipPlan> plan = SkipPlan::Create(options, ranks);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

SkipOptions Static(int k, int g = 0) {
  return SkipOptions{.mode = SkipMode::kStatic, .reduce_scatter_steps = k, .all_gather_steps = g};
}

TEST(SkipOptionsTest, RefusesStepsOutsideTheRing) {
  EXPECT_TRUE(Static(3).Validate(4).ok());
  EXPECT_EQ(Static(4).Validate(4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Static(-1).Validate(4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Static(0, 4).Validate(4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Static(0).Validate(0).code(), absl::StatusCode::kInvalidArgument);
  SkipOptions none{.reduce_scatter_steps = 1};
  const absl::Status status = none.Validate(4);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("SkipOptions.mode"), std::string_view::npos) << status;
}

TEST(SkipOptionsTest, RefusesEnumValuesOutsideTheirEnum) {
  SkipOptions mode = Static(1);
  mode.mode = static_cast<SkipMode>(9);  // ran as static before
  EXPECT_NE(mode.Validate(4).message().find("SkipOptions.mode: 9 is not a SkipMode"),
            std::string_view::npos)
      << mode.Validate(4);
  SkipOptions divisor = Static(1);
  divisor.divisor = static_cast<SkipDivisor>(5);  // ran as kAllRanks before
  EXPECT_NE(divisor.Validate(4).message().find("SkipOptions.divisor: 5 is not a SkipDivisor"),
            std::string_view::npos)
      << divisor.Validate(4);
}

TEST(SliceRangeTest, SlicesTileTheTensor) {
  for (const size_t count : {0u, 1u, 7u, 8u, 1001u}) {
    for (int n = 1; n <= 8; ++n) {
      size_t next = 0;
      for (int j = 0; j < n; ++j) {
        const ElementRange r = SliceRange(count, n, j);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.size, count / n + 1);
        next += r.size;
      }
      EXPECT_EQ(next, count);
    }
  }
}

// Every closed form of the plan agrees with running the algorithm on sets,
// for every ring size 1..8, every k and g, and every shift.
TEST(SkipPlanTest, MatchesTheLiteralRingForEverySizeStepAndShift) {
  for (int n = 1; n <= 8; ++n) {
    for (int k = 0; k < n; ++k) {
      for (int g = 0; g < n; ++g) {
        for (int shift = 0; shift < n; ++shift) {
          const ring_reference::RingOutcome outcome = SimulateRing(n, k, g, shift);
          // A random plan whose shift is `shift`: search the iteration.
          SkipOptions options = Static(k, g);
          if (shift != 0) {
            options.mode = SkipMode::kRandom;
            while (RandomShift(options.seed, options.iteration, options.tensor, n) != shift) {
              ++options.iteration;
            }
          }
          const SkipPlan plan = MustPlan(options, n);
          ASSERT_EQ(plan.shift(), shift);
          EXPECT_EQ(plan.Contributors(), n - k);
          EXPECT_EQ(plan.steps_run(), 2 * (n - 1) - k - g);
          for (int r = 0; r < n; ++r) {
            for (int j = 0; j < n; ++j) {
              const std::set<int>& held = outcome.contributors[r][j];
              SCOPED_TRACE(::testing::Message() << "n=" << n << " k=" << k << " g=" << g
                                              << " shift=" << shift << " rank=" << r
                                              << " slice=" << j);
              ASSERT_EQ(plan.SliceArrives(j, r), !held.empty());
              if (held.empty()) continue;
              for (int c = 0; c < n; ++c) {
                EXPECT_EQ(plan.ContributionIncluded(j, c), held.count(c) == 1);
              }
            }
          }
        }
      }
    }
  }
}

TEST(SkipPlanTest, StaticSkipsTheSameContiguousRanksEveryIteration) {
  // Static, N = 4, k = 1: slice j lacks exactly rank j (the seed's figure 5).
  for (uint64_t iteration = 0; iteration < 5; ++iteration) {
    SkipOptions options = Static(1);
    options.iteration = iteration;
    const SkipPlan plan = MustPlan(options, 4);
    for (int j = 0; j < 4; ++j) {
      for (int c = 0; c < 4; ++c) EXPECT_EQ(plan.ContributionIncluded(j, c), c != j);
    }
  }
}

TEST(SkipPlanTest, SliceDroppedLeavesOutKWholeSlicesThatMoveWithTheShift) {
  for (int n = 1; n <= 8; ++n) {
    for (int k = 0; k < n; ++k) {
      std::set<std::vector<bool>> patterns;
      for (uint64_t iteration = 0; iteration < 64; ++iteration) {
        SkipOptions options{.mode = SkipMode::kRandom, .reduce_scatter_steps = k};
        options.iteration = iteration;
        const SkipPlan plan = MustPlan(options, n);
        std::vector<bool> dropped;
        for (int j = 0; j < n; ++j) dropped.push_back(plan.SliceDropped(j));
        EXPECT_EQ(std::count(dropped.begin(), dropped.end(), true), k);
        patterns.insert(dropped);
      }
      // Every rotation of the k dropped slices shows up (none when k = 0).
      EXPECT_EQ(patterns.size(), k == 0 ? 1u : static_cast<size_t>(n)) << n << " " << k;
    }
  }
}

TEST(SkipPlanTest, DivisorsAndTheoreticalSpeedup) {
  SkipOptions options = Static(2);
  EXPECT_EQ(MustPlan(options, 8).AverageDivisor(), 8);
  options.divisor = SkipDivisor::kContributors;
  EXPECT_EQ(MustPlan(options, 8).AverageDivisor(), 6);
  EXPECT_DOUBLE_EQ(MustPlan(options, 8).TheoreticalSpeedup(), 14.0 / 12.0);
  EXPECT_DOUBLE_EQ(MustPlan(options, 8).SkippedFraction(), 0.25);
  EXPECT_DOUBLE_EQ(MustPlan(SkipOptions{}, 1).TheoreticalSpeedup(), 1.0);
}

TEST(RandomShiftTest, SameInputsSameShiftAndItVariesWithTheIteration) {
  std::set<int> seen;
  for (uint64_t iteration = 0; iteration < 64; ++iteration) {
    const int shift = RandomShift(7, iteration, 0, 8);
    EXPECT_EQ(shift, RandomShift(7, iteration, 0, 8));
    seen.insert(shift);
  }
  EXPECT_EQ(seen.size(), 8u);  // all eight shifts within 64 iterations
  // And with the tensor: buckets of one iteration do not all skip alike.
  std::set<int> per_tensor;
  for (uint64_t tensor = 0; tensor < 64; ++tensor) per_tensor.insert(RandomShift(7, 3, tensor, 8));
  EXPECT_GT(per_tensor.size(), 1u);
}

// Uniformity over many iterations, with a fixed seed (so the test is
// deterministic) and a stated bound: the shift's chi-square statistic over
// 80,000 iterations, 7 degrees of freedom, stays below 24.32 (the 0.1%
// critical value); and every (slice, rank) pair is skipped in k/N of the
// iterations within 0.01 (about 6.5 standard deviations at N = 8, k = 2).
TEST(RandomShiftTest, UniformOverManyIterations) {
  constexpr int kRanks = 8;
  constexpr int kIterations = 80'000;
  constexpr int kSteps = 2;
  std::vector<int> shifts(kRanks, 0);
  std::vector<std::vector<int>> skipped(kRanks, std::vector<int>(kRanks, 0));
  for (int it = 0; it < kIterations; ++it) {
    SkipOptions options{.mode = SkipMode::kRandom, .reduce_scatter_steps = kSteps};
    options.seed = 20251201;
    options.iteration = static_cast<uint64_t>(it);
    const SkipPlan plan = MustPlan(options, kRanks);
    ++shifts[plan.shift()];
    for (int j = 0; j < kRanks; ++j) {
      for (int c = 0; c < kRanks; ++c) skipped[j][c] += plan.ContributionIncluded(j, c) ? 0 : 1;
    }
  }
  const double expected = static_cast<double>(kIterations) / kRanks;
  double chi_square = 0.0;
  for (const int count : shifts) chi_square += (count - expected) * (count - expected) / expected;
  EXPECT_LT(chi_square, 24.32);
  for (int j = 0; j < kRanks; ++j) {
    for (int c = 0; c < kRanks; ++c) {
      const double fraction = static_cast<double>(skipped[j][c]) / kIterations;
      EXPECT_NEAR(fraction, static_cast<double>(kSteps) / kRanks, 0.01) << j << "," << c;
    }
  }
}

TEST(SkipStepsForRateTest, RoundsAndKeepsOneContribution) {
  EXPECT_EQ(SkipStepsForRate(0.0, 8), 0);
  EXPECT_EQ(SkipStepsForRate(0.25, 8), 2);
  EXPECT_EQ(SkipStepsForRate(0.5, 8), 4);
  EXPECT_EQ(SkipStepsForRate(1.0, 8), 7);
  EXPECT_EQ(SkipStepsForRate(0.5, 1), 0);
}

TEST(SkipPolicyTest, SelectiveProtectsTensorsAndHonoursWarmUpAndRates) {
  SkipPolicy policy;
  policy.mode = SkipMode::kRandom;
  policy.rate = 0.5;
  policy.seed = 9;
  policy.warmup_iterations = 10;
  policy.protected_tensors = {0, 5};
  policy.tensor_rates = {{3, 0.25}};
  ASSERT_TRUE(policy.Validate().ok());
  EXPECT_EQ(policy.ForTensor(1, 9, 8).mode, SkipMode::kNone);  // warm-up
  EXPECT_EQ(policy.ForTensor(0, 10, 8).mode, SkipMode::kNone);  // protected
  EXPECT_EQ(policy.ForTensor(5, 99, 8).mode, SkipMode::kNone);
  const SkipOptions one = policy.ForTensor(1, 10, 8);
  EXPECT_EQ(one.mode, SkipMode::kRandom);
  EXPECT_EQ(one.reduce_scatter_steps, 4);
  EXPECT_EQ(one.seed, 9u);
  EXPECT_EQ(one.iteration, 10u);
  EXPECT_EQ(one.tensor, 1u);
  EXPECT_EQ(policy.ForTensor(3, 10, 8).reduce_scatter_steps, 2);
  EXPECT_TRUE(policy.ForTensor(1, 10, 8).Validate(8).ok());

  policy.rate = 1.5;
  EXPECT_EQ(policy.Validate().code(), absl::StatusCode::kInvalidArgument);
  SkipPolicy none;
  none.rate = 0.5;
  EXPECT_EQ(none.Validate().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace atp
