// Handle and OpState: an operation finishes when its last piece does, once;
// waits honour deadlines; callbacks run exactly once, after the waiters see
// the result.
#include "atp/handle.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "lib/host/op_state.h"

namespace atp {
namespace {

using internal::HandleAccess;
using internal::OpState;

TEST(HandleTest, FinishesWhenTheLastPieceIsDone) {
  auto state = std::make_shared<OpState>(1, 3);
  Handle h = HandleAccess::Make(state);
  EXPECT_TRUE(h.valid());
  EXPECT_EQ(h.id(), 1u);
  state->PieceDone();
  state->PieceDone();
  EXPECT_FALSE(h.Poll());
  EXPECT_TRUE(absl::IsUnavailable(h.status()));
  state->PieceDone();
  EXPECT_TRUE(h.Poll());
  EXPECT_TRUE(h.status().ok());
  EXPECT_TRUE(h.Wait(absl::ZeroDuration()).ok());
}

TEST(HandleTest, WaitPastTheDeadlineReportsDeadlineExceededAndTheOperationGoesOn) {
  auto state = std::make_shared<OpState>(1, 1);
  Handle h = HandleAccess::Make(state);
  EXPECT_TRUE(absl::IsDeadlineExceeded(h.Wait(absl::Milliseconds(1))));
  EXPECT_TRUE(absl::IsDeadlineExceeded(h.WaitUntil(absl::InfinitePast())));
  state->PieceDone();
  EXPECT_TRUE(h.Wait(absl::Milliseconds(1)).ok());
}

TEST(HandleTest, WaitWakesWhenAnotherThreadFinishes) {
  auto state = std::make_shared<OpState>(1, 1);
  Handle h = HandleAccess::Make(state);
  std::thread finisher([state] { state->PieceDone(); });
  EXPECT_TRUE(h.Wait(absl::Seconds(30)).ok());
  finisher.join();
}

TEST(HandleTest, FirstFinishWinsLaterPiecesDoNotChangeTheStatus) {
  auto state = std::make_shared<OpState>(1, 2);
  EXPECT_TRUE(state->Finish(absl::CancelledError("stop")));
  EXPECT_FALSE(state->Finish(absl::OkStatus()));
  state->PieceDone();
  state->PieceDone();
  EXPECT_TRUE(absl::IsCancelled(HandleAccess::Make(state).status()));
}

TEST(HandleTest, AFailedPieceFailsTheOperationOnlyOnceEveryPieceHasStopped) {
  // One queue failed its piece while the others still run theirs: they may
  // still read the input and write the output, so the caller must not be
  // told (and free them) before the last piece stopped.
  auto state = std::make_shared<OpState>(1, 3);
  Handle h = HandleAccess::Make(state);
  state->PieceFailed(absl::AbortedError("queue 0 failed"));
  EXPECT_FALSE(h.Poll());
  EXPECT_EQ(h.Wait(absl::ZeroDuration()).code(), absl::StatusCode::kDeadlineExceeded);
  state->PieceDone();  // a piece that got through before its queue saw the failure
  EXPECT_FALSE(h.Poll());
  state->PieceFailed(absl::CancelledError("queue 2 failed later"));
  ASSERT_TRUE(h.Poll());
  const absl::Status status = h.Wait(absl::ZeroDuration());
  EXPECT_TRUE(absl::IsAborted(status)) << status;  // the first failure
  EXPECT_EQ(status.message(), "queue 0 failed");
}

TEST(HandleTest, OnePieceFailingIsTheOperationFailing) {
  auto state = std::make_shared<OpState>(1, 1);
  state->PieceFailed(absl::InvalidArgumentError("bad piece"));
  EXPECT_TRUE(absl::IsInvalidArgument(HandleAccess::Make(state).status()));
}

TEST(HandleTest, OnFinishRunsOnceEitherLaterOrAtOnce) {
  std::atomic<int> calls{0};
  auto later = std::make_shared<OpState>(1, 1);
  later->OnFinish([&](const absl::Status& s) {
    EXPECT_TRUE(s.ok());
    ++calls;
  });
  EXPECT_EQ(calls.load(), 0);
  later->PieceDone();
  EXPECT_EQ(calls.load(), 1);

  auto already = std::make_shared<OpState>(2, 0);
  already->Finish(absl::AbortedError("x"));
  already->OnFinish([&](const absl::Status& s) {
    EXPECT_TRUE(absl::IsAborted(s));
    ++calls;
  });
  EXPECT_EQ(calls.load(), 2);
}

TEST(HandleTest, SeveralCallbacksRunInOrderOnce) {
  std::vector<int> order;
  auto state = std::make_shared<OpState>(1, 1);
  state->OnFinish([&](const absl::Status&) { order.push_back(1); });
  HandleAccess::Make(state).OnDone([&](const absl::Status&) { order.push_back(2); });
  state->PieceDone();
  state->Finish(absl::CancelledError("late"));  // already finished: runs nothing
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(HandleTest, FinishedCounterCountsEachOperationOnce) {
  auto counter = std::make_shared<std::atomic<uint64_t>>(0);
  auto a = std::make_shared<OpState>(1, 1, counter);
  auto b = std::make_shared<OpState>(2, 1, counter);
  a->PieceDone();
  a->Finish(absl::OkStatus());
  b->Finish(absl::CancelledError("x"));
  EXPECT_EQ(counter->load(), 2u);
}

TEST(HandleTest, InvalidHandleIsDoneWithFailedPrecondition) {
  Handle h;
  EXPECT_FALSE(h.valid());
  EXPECT_TRUE(h.Poll());
  EXPECT_EQ(h.id(), 0u);
  EXPECT_TRUE(absl::IsFailedPrecondition(h.Wait(absl::Seconds(1))));
}

TEST(HandleTest, WaitAllReportsDeadlineThenFirstError) {
  auto done = std::make_shared<OpState>(1, 0);
  done->Finish(absl::OkStatus());
  auto failed = std::make_shared<OpState>(2, 0);
  failed->Finish(absl::InternalError("boom"));
  auto running = std::make_shared<OpState>(3, 1);
  std::vector<Handle> all = {HandleAccess::Make(done), HandleAccess::Make(failed)};
  EXPECT_TRUE(absl::IsInternal(WaitAll(all, absl::Now() + absl::Seconds(1))));
  all.push_back(HandleAccess::Make(running));
  EXPECT_TRUE(absl::IsDeadlineExceeded(WaitAll(all, absl::Now() + absl::Milliseconds(1))));
  std::vector<Handle> ok = {HandleAccess::Make(done)};
  EXPECT_TRUE(WaitAll(ok, absl::Now()).ok());
}

}  // namespace
}  // namespace atp
