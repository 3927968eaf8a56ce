// Completions by path (PsCounters::switch_completed, fp_completed, and the
// rest summed at the PS): what the "is it aggregating?" line and
// atp_ps_completed_total{path=} report.
#include <cstdint>
#include <limits>
#include <optional>

#include "gtest/gtest.h"
#include "lib/ps/ps_engine.h"
#include "tests/unit/ps/ps_test_util.h"

namespace atp::ps {
namespace {

using protocol::JobShape;
using testing::Fill;
using testing::FloatFill;
using testing::FpWorker;
using testing::Level1;
using testing::Level2;
using testing::RecordingSink;
using testing::Worker;

class PsPathTest : public ::testing::Test {
 protected:
  // Two racks of two workers, 8 slots.
  PsPathTest() : engine_(testing::MakeEngine(testing::ConfigFor({shape_}, 8))) {}
  void Deliver(const wire::AtpMessage& message) { engine_.OnGradient(message, testing::kNow, sink_); }
  const PsCounters& counters() const { return engine_.counters(); }
  uint64_t SummedAtPs() const {
    return counters().completed - counters().fp_completed - counters().switch_completed;
  }

  JobShape shape_ = JobShape::Uniform(5, 2, 2);
  PsEngine engine_;
  RecordingSink sink_;
};

TEST_F(PsPathTest, WholeFromSwitchesCountsAsSwitch) {
  Deliver(Level2(shape_, 0, 0b11, Fill(4)));  // edge 1, every rack: one contribution
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(counters().completed, 1u);
  EXPECT_EQ(counters().switch_completed, 1u);
  EXPECT_EQ(SummedAtPs(), 0u);
  EXPECT_EQ(counters().fp_completed, 0u);
}

TEST_F(PsPathTest, PartialArrivalsCountAsPs) {
  // seq 0: two whole racks, each edge 1 (a level-1 switch per rack, no level 2).
  Deliver(Level2(shape_, 0, 0b01, Fill(1)));
  Deliver(Level2(shape_, 0, 0b10, Fill(1)));
  // seq 1: every worker on its own (no switch aggregated).
  for (int r = 0; r < 2; ++r) {
    for (int w = 0; w < 2; ++w) Deliver(Worker(shape_, 1, r, w, Fill(1)));
  }
  // seq 2: a rack summed by its switch plus the other rack's workers.
  Deliver(Level1(shape_, 2, 0, 0b11, Fill(2)));
  Deliver(Worker(shape_, 2, 1, 0, Fill(1)));
  Deliver(Worker(shape_, 2, 1, 1, Fill(1)));
  ASSERT_EQ(sink_.sent.size(), 3u);
  EXPECT_EQ(counters().completed, 3u);
  EXPECT_EQ(counters().switch_completed, 0u);
  EXPECT_EQ(SummedAtPs(), 3u);
}

TEST_F(PsPathTest, FloatPathCountsAsFloat) {
  Deliver(Worker(shape_, 0, 0, 0, Fill(1)));
  for (int r = 0; r < 2; ++r) {
    for (int w = 0; w < 2; ++w) Deliver(FpWorker(shape_, 0, r, w, FloatFill(0.5f)));
  }
  ASSERT_FALSE(sink_.sent.empty());
  EXPECT_TRUE(sink_.sent.back().header.fp);
  EXPECT_EQ(counters().completed, 1u);
  EXPECT_EQ(counters().fp_completed, 1u);
  EXPECT_EQ(counters().switch_completed, 0u);
  EXPECT_EQ(SummedAtPs(), 0u);
}

TEST_F(PsPathTest, SaturatedSwitchResultCountsAsFloat) {
  // A whole result that saturated in a switch goes float: not a switch completion.
  wire::Payload saturated = Fill(1);
  saturated[0] = static_cast<uint32_t>(std::numeric_limits<int32_t>::max());
  Deliver(Level2(shape_, 0, 0b11, saturated));
  for (int r = 0; r < 2; ++r) {
    for (int w = 0; w < 2; ++w) Deliver(FpWorker(shape_, 0, r, w, FloatFill(1.0f)));
  }
  EXPECT_EQ(counters().completed, 1u);
  EXPECT_EQ(counters().fp_completed, 1u);
  EXPECT_EQ(counters().switch_completed, 0u);
}

}  // namespace
}  // namespace atp::ps
