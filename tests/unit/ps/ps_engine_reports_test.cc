// The PS's reports on stalled work (docs/protocol.md "Failures, runs and
// restarts"): CollectWaiting names the workers the oldest long-incomplete
// fragment of each queue waits for, and orphan releases are summed into an
// AbandonReport naming the workers that never contributed. Fake clock.
#include <cstdint>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ps/ps_engine.h"
#include "tests/unit/ps/ps_test_util.h"

namespace atp::ps {
namespace {

using protocol::JobShape;
using testing::Fill;
using testing::FpWorker;
using testing::FloatFill;
using testing::Level2;
using testing::RecordingSink;
using testing::Worker;

constexpr TimeDelta kTimeout = TimeDelta::FromMilliseconds(10);
constexpr TimeDelta kReport = TimeDelta::FromMilliseconds(4);
constexpr TimePoint kT0 = TimePoint::FromNanoseconds(1'000'000'000);

class PsReportsTest : public ::testing::Test {
 protected:
  // Two racks of three workers; slots 8.
  void SetUp() override {
    shape_ = JobShape::Uniform(7, 2, 3);
    PsConfig config = testing::ConfigFor({shape_}, /*slots=*/8);
    config.orphan_timeout = kTimeout;
    config.orphan_scan_per_message = 0;
    engine_.emplace(testing::MakeEngine(config));
  }
  void Deliver(const wire::AtpMessage& message, TimePoint now) {
    engine_->OnGradient(message, now, sink_);
  }
  std::vector<WaitingReport> Waiting(TimePoint now) {
    std::vector<WaitingReport> out;
    engine_->CollectWaiting(now, kReport, out);
    return out;
  }

  JobShape shape_;
  std::optional<PsEngine> engine_;
  RecordingSink sink_;
};

TEST_F(PsReportsTest, NamesTheWorkersTheOldestIncompleteFragmentWaitsFor) {
  // Queue 0 position 0: rack 0 complete (via a switch), rack 1 worker 0 only.
  Deliver(Level2(shape_, wire::MakeSeq(0, 0), 0b01, Fill(1)), kT0);
  Deliver(Worker(shape_, wire::MakeSeq(0, 0), 1, 0, Fill(1)), kT0);
  // Queue 0 position 1, younger: only worker 0 of rack 0.
  Deliver(Worker(shape_, wire::MakeSeq(0, 1), 0, 0, Fill(1)), kT0 + kReport / 2);

  EXPECT_TRUE(Waiting(kT0 + kReport / 2).empty()) << "not incomplete for long enough";
  const std::vector<WaitingReport> reports = Waiting(kT0 + kReport);
  ASSERT_EQ(reports.size(), 1u) << "one report per job and queue: the oldest fragment";
  EXPECT_EQ(reports[0].job, 7);
  EXPECT_EQ(reports[0].queue, 0u);
  EXPECT_EQ(reports[0].position, 0u);
  // Rack 1 is workers 3, 4, 5 in rack-major order; worker 3 contributed.
  EXPECT_EQ(reports[0].missing.ToVector(), (std::vector<int>{4, 5}));
  EXPECT_EQ(reports[0].fan_in0, 3);
  EXPECT_EQ(reports[0].fan_in1, 2);
}

TEST_F(PsReportsTest, ReportsEachQueueAndNothingOnceComplete) {
  Deliver(Worker(shape_, wire::MakeSeq(0, 0), 0, 0, Fill(1)), kT0);
  Deliver(Worker(shape_, wire::MakeSeq(3, 0), 1, 2, Fill(1)), kT0);
  std::vector<WaitingReport> reports = Waiting(kT0 + kReport);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].queue, 0u);
  EXPECT_EQ(reports[0].missing.ToVector(), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(reports[1].queue, 3u);
  EXPECT_EQ(reports[1].missing.ToVector(), (std::vector<int>{0, 1, 2, 3, 4}));

  // Queue 3's fragment completes: only queue 0 is reported.
  Deliver(Level2(shape_, wire::MakeSeq(3, 0), 0b01, Fill(1)), kT0 + kReport);
  Deliver(Worker(shape_, wire::MakeSeq(3, 0), 1, 0, Fill(1)), kT0 + kReport);
  Deliver(Worker(shape_, wire::MakeSeq(3, 0), 1, 1, Fill(1)), kT0 + kReport);
  reports = Waiting(kT0 + kReport * 2);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].queue, 0u);
}

TEST_F(PsReportsTest, OnTheFloatPathTheMissingAreThoseWithoutAFloatRow) {
  Deliver(FpWorker(shape_, wire::MakeSeq(1, 2), 1, 1, FloatFill(2.0f)), kT0);
  const std::vector<WaitingReport> reports = Waiting(kT0 + kReport);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].queue, 1u);
  EXPECT_EQ(reports[0].position, 2u);
  EXPECT_EQ(reports[0].missing.ToVector(), (std::vector<int>{0, 1, 2, 3, 5}));
}

TEST_F(PsReportsTest, OrphanReleasesAreSummedPerJobNamingWhoNeverContributed) {
  Deliver(Worker(shape_, wire::MakeSeq(0, 0), 0, 0, Fill(1)), kT0);
  Deliver(Worker(shape_, wire::MakeSeq(0, 0), 0, 1, Fill(1)), kT0);
  Deliver(Worker(shape_, wire::MakeSeq(2, 5), 0, 0, Fill(1)), kT0);
  Deliver(Level2(shape_, wire::MakeSeq(2, 5), 0b10, Fill(1)), kT0);
  std::vector<AbandonReport> abandoned;
  engine_->TakeAbandoned(abandoned);
  EXPECT_TRUE(abandoned.empty()) << "nothing released yet";

  ASSERT_EQ(engine_->ScanOrphans(kT0 + kTimeout * 2, engine_->total_slots()), 2u);
  engine_->TakeAbandoned(abandoned);
  ASSERT_EQ(abandoned.size(), 1u);
  EXPECT_EQ(abandoned[0].job, 7);
  EXPECT_EQ(abandoned[0].fragments, 2u);
  EXPECT_EQ(abandoned[0].first_queue, 0u);
  EXPECT_EQ(abandoned[0].first_position, 0u);
  // Queue 0 waited for 2..5, queue 2 for 1 and 2: the union.
  EXPECT_EQ(abandoned[0].never_contributed.ToVector(), (std::vector<int>{1, 2, 3, 4, 5}));

  abandoned.clear();
  engine_->TakeAbandoned(abandoned);
  EXPECT_TRUE(abandoned.empty()) << "taken once";
  EXPECT_TRUE(Waiting(kT0 + kTimeout * 3).empty()) << "released state is not waiting";
}

}  // namespace
}  // namespace atp::ps
