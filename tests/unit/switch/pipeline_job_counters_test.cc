// SwitchPipeline::job_counters: each event counted to the job of the frame
// (or of the aggregator) it concerns, and the per-job counts summing to the
// pipeline's counters of the same name.
#include <cstdint>

#include "gtest/gtest.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "tests/unit/switch/pipeline_fixture.h"
#include "tests/unit/switch/switch_test_util.h"

namespace atp::switch_emulator::testing {
namespace {

using wire::AtpHeader;

class PipelineJobCountersTest : public PipelineTest {
 protected:
  const PipelineJobCounters& A() { return pipeline().job_counters(kJobA); }
  const PipelineJobCounters& B() { return pipeline().job_counters(kJobB); }
};

TEST_F(PipelineJobCountersTest, CompletionsAndCollisionsGoToTheirJob) {
  // Job A completes seq 0 on aggregator 5 (fan-in 2).
  TestFrame a0 = Frame(Worker(kJobA, 0, 5, 0, 2), Ramp(1));
  TestFrame a1 = Frame(Worker(kJobA, 0, 5, 1, 2), Ramp(2));
  ASSERT_EQ(SendVerdict(a0), Verdict::kAbsorbed);
  ASSERT_EQ(SendVerdict(a1), Verdict::kToPs);
  // Job B claims the same aggregator (the array is shared), then job A's next
  // seq there collides: the collision is A's, the aggregator B's.
  TestFrame b0 = Frame(Worker(kJobB, 0, 5, 0, 2), Ramp(3));
  ASSERT_EQ(SendVerdict(b0), Verdict::kAbsorbed);
  TestFrame a_next = Frame(Worker(kJobA, 64, 5, 0, 2), Ramp(4));
  ASSERT_EQ(SendVerdict(a_next), Verdict::kToPs);
  TestFrame b1 = Frame(Worker(kJobB, 0, 5, 1, 2), Ramp(5));
  ASSERT_EQ(SendVerdict(b1), Verdict::kToPs);

  EXPECT_EQ(A().completed, 1u);
  EXPECT_EQ(A().collisions, 1u);
  EXPECT_EQ(B().completed, 1u);
  EXPECT_EQ(B().collisions, 0u);
  EXPECT_EQ(pipeline().counters().completed, 2u);
  EXPECT_EQ(pipeline().counters().collisions, 1u);
}

TEST_F(PipelineJobCountersTest, EveryReasonToThePsGoesToItsJob) {
  // A: a resend that adds to a partial aggregate flushes it (fan-in 3).
  TestFrame a0 = Frame(Worker(kJobA, 0, 7, 0, 3), Ramp(1));
  ASSERT_EQ(SendVerdict(a0), Verdict::kAbsorbed);
  AtpHeader resend = Worker(kJobA, 0, 7, 1, 3);
  resend.resend = true;
  TestFrame a1 = Frame(resend, Ramp(2));
  ASSERT_EQ(SendVerdict(a1), Verdict::kToPs);
  // B: float32 data, a resend finding a free aggregator, a level-2 frame
  // (B is aggregated at level 1 only here), and an orphan.
  AtpHeader fp = Worker(kJobB, 0, 9, 0, 2);
  fp.fp = true;
  TestFrame b_fp = Frame(fp, Ramp(0x3F800000));
  ASSERT_EQ(SendVerdict(b_fp), Verdict::kToPs);
  AtpHeader b_resend = Worker(kJobB, 1, 10, 0, 2);
  b_resend.resend = true;
  TestFrame b_r = Frame(b_resend, Ramp(3));
  ASSERT_EQ(SendVerdict(b_r), Verdict::kToPs);
  TestFrame b_rack = Frame(Rack(kJobB, 2, 12, 0, 2), Ramp(4));
  ASSERT_EQ(SendVerdict(b_rack), Verdict::kToPs);
  TestFrame b_orphan = Frame(Worker(kJobB, 3, 11, 0, 2), Ramp(5));
  ASSERT_EQ(SendVerdict(b_orphan, kT0), Verdict::kAbsorbed);
  ASSERT_EQ(pipeline().ScanOrphans(kT0 + kOrphanTimeout * 2, 64), 1u);

  EXPECT_EQ(A().flushed, 1u);
  EXPECT_EQ(A().forwarded_fp + A().resend_to_ps + A().not_aggregated + A().orphaned, 0u);
  EXPECT_EQ(B().forwarded_fp, 1u);
  EXPECT_EQ(B().resend_to_ps, 1u);
  EXPECT_EQ(B().not_aggregated, 1u);
  EXPECT_EQ(B().orphaned, 1u);
  EXPECT_EQ(B().flushed, 0u);

  // The sums over jobs are the pipeline's counters.
  const PipelineCounters& c = pipeline().counters();
  EXPECT_EQ(A().flushed + B().flushed, c.flushed);
  EXPECT_EQ(A().forwarded_fp + B().forwarded_fp, c.forwarded_fp);
  EXPECT_EQ(A().resend_to_ps + B().resend_to_ps, c.resend_to_ps);
  EXPECT_EQ(A().not_aggregated + B().not_aggregated, c.not_aggregated);
  EXPECT_EQ(A().orphaned + B().orphaned, c.orphaned);
}

TEST_F(PipelineJobCountersTest, AJobNotInTheTableCountsNothing) {
  TestFrame other = Frame(Worker(/*job=*/3, 0, 5, 0, 2), Ramp(1));
  ASSERT_EQ(SendVerdict(other), Verdict::kForward);
  const PipelineJobCounters& c = pipeline().job_counters(3);
  EXPECT_EQ(c.completed + c.collisions + c.resend_to_ps + c.flushed + c.forwarded_fp +
                c.not_aggregated + c.orphaned,
            0u);
  EXPECT_EQ(pipeline().counters().not_aggregated, 1u);
}

}  // namespace
}  // namespace atp::switch_emulator::testing
