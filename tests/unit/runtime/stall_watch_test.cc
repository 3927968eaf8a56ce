// How a worker queue decides it stalled and why (lib/host/stall_watch.h), and
// the structured failure a status carries (atp/failure.h). Fake clock.
#include "lib/host/stall_watch.h"

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "atp/failure.h"
#include "gtest/gtest.h"

namespace atp::host {
namespace {

constexpr TimeDelta kStall = TimeDelta::FromMilliseconds(100);
constexpr TimeDelta kMs = TimeDelta::FromMilliseconds(1);
constexpr TimePoint kT0 = TimePoint::FromNanoseconds(5'000'000'000);

TEST(StallWatchTest, AnIdleQueueNeverStalls) {
  StallWatch watch(kStall);
  watch.OnBusy(kT0);
  EXPECT_FALSE(watch.Check(kT0 + kStall * 10, /*busy=*/false).has_value());
}

TEST(StallWatchTest, NothingFromThePsIsUnreachable) {
  StallWatch watch(kStall);
  watch.OnFrameFromPs(kT0 - kMs);  // before the work: does not count
  watch.OnBusy(kT0);
  EXPECT_FALSE(watch.Check(kT0 + kStall - kMs, true).has_value());
  EXPECT_EQ(watch.deadline(), kT0 + kStall);
  const std::optional<StallWatch::Stall> stall = watch.Check(kT0 + kStall, true);
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->kind, FailureKind::kPsUnreachable);
}

TEST(StallWatchTest, EveryCompletionRestartsTheClock) {
  StallWatch watch(kStall);
  watch.OnBusy(kT0);
  for (int i = 1; i <= 5; ++i) {
    const TimePoint now = kT0 + kStall * i - kMs;
    watch.OnFrameFromPs(now);
    watch.OnProgress(now);
    EXPECT_FALSE(watch.Check(now + kStall - kMs, true).has_value());
  }
}

TEST(StallWatchTest, AStatusSinceTheLastProgressNamesTheWorkers) {
  StallWatch watch(kStall);
  watch.OnBusy(kT0);
  protocol::WorkerSet missing;
  missing.Add(2);
  missing.Add(9);
  watch.OnFrameFromPs(kT0 + kMs * 30);
  watch.OnWaitingFor(kT0 + kMs * 30, /*position=*/17, missing);
  const std::optional<StallWatch::Stall> stall = watch.Check(kT0 + kStall, true);
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->kind, FailureKind::kWaitingForWorkers);
  EXPECT_EQ(stall->workers.ToVector(), (std::vector<int>{2, 9}));
  EXPECT_EQ(stall->position, 17u);
}

TEST(StallWatchTest, AnOldStatusOrFramesWithoutOneAreAPlainStall) {
  StallWatch watch(kStall);
  protocol::WorkerSet missing;
  missing.Add(1);
  watch.OnWaitingFor(kT0 - kMs, 3, missing);  // before the progress: stale
  watch.OnBusy(kT0);
  watch.OnFrameFromPs(kT0 + kMs);
  const std::optional<StallWatch::Stall> stall = watch.Check(kT0 + kStall, true);
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->kind, FailureKind::kStalled);
  EXPECT_TRUE(stall->workers.empty());
}

TEST(StallWatchTest, InfiniteNeverStalls) {
  StallWatch watch(TimeDelta::Infinite());
  watch.OnBusy(kT0);
  EXPECT_FALSE(watch.Check(kT0 + TimeDelta::FromSeconds(1000), true).has_value());
}

TEST(FailureTest, TheFailureTravelsWithTheStatusAndSurvivesARewrite) {
  Failure failure;
  failure.kind = FailureKind::kWaitingForWorkers;
  failure.queue = 3;
  failure.workers = {0, 17, 1023};
  const absl::Status status = WithFailure(absl::AbortedError("stalled"), failure);
  std::optional<Failure> read = FailureOf(status);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->kind, failure.kind);
  EXPECT_EQ(read->queue, 3u);
  EXPECT_EQ(read->workers, failure.workers);
  EXPECT_EQ(FailureKindName(read->kind), "waiting_for_workers");

  // The Worker's refusal after a failure carries it too.
  const absl::Status refused = WithFailure(absl::FailedPreconditionError("unusable"), *read);
  ASSERT_TRUE(FailureOf(refused).has_value());
  EXPECT_EQ(FailureOf(refused)->kind, FailureKind::kWaitingForWorkers);
}

TEST(FailureTest, OtherStatusesCarryNone) {
  EXPECT_FALSE(FailureOf(absl::OkStatus()).has_value());
  EXPECT_FALSE(FailureOf(absl::DeadlineExceededError("the caller's deadline")).has_value());
  Failure failure;
  failure.kind = FailureKind::kPsUnreachable;
  const std::optional<Failure> read = FailureOf(WithFailure(absl::UnavailableError("x"), failure));
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(read->workers.empty());
  EXPECT_EQ(FailureKindName(FailureKind::kPsUnreachable), "ps_unreachable");
  EXPECT_EQ(FailureKindName(FailureKind::kStalled), "stalled");
}

}  // namespace
}  // namespace atp::host
