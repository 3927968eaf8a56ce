// Tests of the simulator's collectives (sim/collectives): the schedules'
// skipping and the properties of the seed's section 6.1 that the
// skip-topologies scenario reports: on a ring the fraction skipped and the
// speedup both grow linearly with the skipped steps, on halving-doubling both
// grow like 1 - 2^-k, and on a tree they do not match (half the gradient for
// one step in 2 log2 N).
#include <cmath>

#include "gtest/gtest.h"
#include "sim/collectives/collective_run.h"
#include "sim/collectives/schedule.h"

namespace atp::sim {
namespace {

// 1 MiB: large enough that the per-step latency (two link delays), which the
// theory leaves out, stays within the tolerances below.
constexpr uint64_t kTensorBytes = 1024 * 1024;

CollectiveSchedule MustBuild(LogicalTopology topology, int nodes, int skipped) {
  absl::StatusOr<CollectiveSchedule> s = BuildSchedule(topology, nodes, kTensorBytes, skipped);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

double SimulatedSpeedup(LogicalTopology topology, int nodes, int skipped) {
  const LinkConfig link{};
  absl::StatusOr<CollectiveRunResult> full = RunCollective(MustBuild(topology, nodes, 0), link);
  absl::StatusOr<CollectiveRunResult> part =
      RunCollective(MustBuild(topology, nodes, skipped), link);
  EXPECT_TRUE(full.ok() && part.ok());
  EXPECT_TRUE(full->completed && part->completed);
  EXPECT_EQ(full->tail_drops + part->tail_drops, 0u);
  return full->completion_time.ToSeconds() / part->completion_time.ToSeconds();
}

TEST(CollectiveScheduleTest, RefusesWhatCannotBeBuilt) {
  EXPECT_FALSE(BuildSchedule(LogicalTopology::kTree, 12, kTensorBytes, 0).ok());
  EXPECT_FALSE(BuildSchedule(LogicalTopology::kRing, 1, kTensorBytes, 0).ok());
  EXPECT_FALSE(BuildSchedule(LogicalTopology::kRing, 8, kTensorBytes, 8).ok());
  EXPECT_FALSE(BuildSchedule(LogicalTopology::kHalvingDoubling, 8, kTensorBytes, 4).ok());
  EXPECT_TRUE(BuildSchedule(LogicalTopology::kRing, 12, kTensorBytes, 11).ok());
}

TEST(CollectiveScheduleTest, StepCountsAndSkippedFractions) {
  const CollectiveSchedule ring = MustBuild(LogicalTopology::kRing, 16, 4);
  EXPECT_EQ(ring.steps.size(), 2u * 15 - 4);
  EXPECT_DOUBLE_EQ(ring.skipped_fraction, 4.0 / 16);
  const CollectiveSchedule hd = MustBuild(LogicalTopology::kHalvingDoubling, 16, 2);
  EXPECT_EQ(hd.steps.size(), 2u * 4 - 2);
  EXPECT_DOUBLE_EQ(hd.skipped_fraction, 0.75);
  const CollectiveSchedule tree = MustBuild(LogicalTopology::kTree, 16, 1);
  EXPECT_EQ(tree.steps.size(), 2u * 4 - 1);
  EXPECT_DOUBLE_EQ(tree.skipped_fraction, 0.5);
  EXPECT_DOUBLE_EQ(tree.theory_speedup, 8.0 / 7.0);
}

TEST(CollectiveRunTest, RingSpeedupIsLinearInTheSkippedSteps) {
  constexpr int kNodes = 16;
  for (const int k : {1, 4, 8, 15}) {
    const double theory = 2.0 * (kNodes - 1) / (2.0 * (kNodes - 1) - k);
    EXPECT_NEAR(SimulatedSpeedup(LogicalTopology::kRing, kNodes, k) / theory, 1.0, 0.05) << k;
  }
}

TEST(CollectiveRunTest, HalvingDoublingSpeedupFollowsTheFractionSkipped) {
  constexpr int kNodes = 16;
  for (int k = 1; k <= 4; ++k) {
    const CollectiveSchedule s = MustBuild(LogicalTopology::kHalvingDoubling, kNodes, k);
    EXPECT_NEAR(SimulatedSpeedup(LogicalTopology::kHalvingDoubling, kNodes, k) / s.theory_speedup,
                1.0, 0.05)
        << k;
    // Time saved / time of the whole and fraction skipped: the same 1 - 2^-k
    // shape (the saved share is the fraction over 2(1 - 1/N)).
    const double saved = 1.0 - 1.0 / s.theory_speedup;
    EXPECT_NEAR(saved, s.skipped_fraction / (2.0 * (1.0 - 1.0 / kNodes)), 0.01) << k;
  }
}

TEST(CollectiveRunTest, TreeSkipsHalfTheGradientForOneStepOfTime) {
  constexpr int kNodes = 16;  // 4 levels up, 4 down
  const double one = SimulatedSpeedup(LogicalTopology::kTree, kNodes, 1);
  EXPECT_NEAR(one, 8.0 / 7.0, 0.05);
  EXPECT_DOUBLE_EQ(MustBuild(LogicalTopology::kTree, kNodes, 1).skipped_fraction, 0.5);
  // The ring pays about as much time for far less gradient: k = 1 of 15.
  EXPECT_LT(MustBuild(LogicalTopology::kRing, kNodes, 1).skipped_fraction, 0.1);
}

TEST(CollectiveRunTest, SameScheduleSameTime) {
  const CollectiveSchedule s = MustBuild(LogicalTopology::kRing, 8, 3);
  absl::StatusOr<CollectiveRunResult> a = RunCollective(s, LinkConfig{});
  absl::StatusOr<CollectiveRunResult> b = RunCollective(s, LinkConfig{});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->completion_time, b->completion_time);
  EXPECT_EQ(a->frame_deliveries, b->frame_deliveries);
  EXPECT_EQ(a->frame_deliveries, 2 * a->frames_sent);
}

}  // namespace
}  // namespace atp::sim
