// Recovering a queue after a PS restart (docs/protocol.md "Failures, runs and
// restarts"): the plan the joins give (lib/ps/recovery_plan.h: which
// positions every worker has, which must be replayed and by whom) and the
// engine's side of it (RebuildQueue with positions done everywhere,
// OnReplay taking a replayed packet bit for bit).
#include <cstdint>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "lib/protocol/join_message.h"
#include "lib/ps/ps_engine.h"
#include "lib/ps/recovery_plan.h"
#include "lib/ps/run_tracker.h"
#include "tests/unit/ps/ps_test_util.h"

namespace atp::ps {
namespace {

using protocol::JobShape;
using protocol::JoinBody;
using testing::Fill;
using testing::RecordingSink;
using testing::Worker;

// Join: a join at `lowest` whose worker also has the results of `extra`
// (positions after lowest).
JoinBody Join(uint64_t lowest, std::initializer_list<uint64_t> extra = {}) {
  JoinBody join;
  join.lowest_unacked = lowest;
  join.acked_end = lowest;
  for (uint64_t p : extra) {
    const uint64_t i = p - lowest - 1;
    join.acked_after_lowest[i / 32] |= 1u << (i % 32);
    join.acked_end = std::max(join.acked_end, p + 1);
  }
  return join;
}

RebuildDecision Decide(std::vector<JoinBody> joins) {
  RebuildDecision decision;
  decision.lowest = joins[0].lowest_unacked;
  for (const JoinBody& j : joins) {
    decision.lowest = std::min(decision.lowest, j.lowest_unacked);
    decision.highest = std::max(decision.highest, j.lowest_unacked);
  }
  decision.joins = std::move(joins);
  return decision;
}

// The tracker's decisions: a fresh PS (kFreshPs), the same run again
// (kResync), a new run (kNewRun), a worker restarted alone (none).
TEST(RunTrackerTest, DecidesOnceEveryWorkerJoinedByWhatItSynchronizedBefore) {
  RunTracker tracker(/*workers=*/2, /*served_queues=*/1);
  EXPECT_FALSE(tracker.OnJoin(0, 0, /*incarnation=*/11, Join(5)).has_value());
  EXPECT_FALSE(tracker.Unsynchronized(0));  // nothing decided yet: nothing held
  std::optional<RebuildDecision> d = tracker.OnJoin(0, 1, 12, Join(7));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kFreshPs);
  EXPECT_EQ(d->lowest, 5u);
  EXPECT_FALSE(tracker.Unsynchronized(0));
  // The same run joins again (asked after a stall): re-planned, forward only.
  EXPECT_FALSE(tracker.OnJoin(0, 1, 12, Join(9)).has_value());
  d = tracker.OnJoin(0, 0, 11, Join(8));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kResync);
  EXPECT_EQ(d->lowest, 8u);
  EXPECT_FALSE(tracker.Unsynchronized(0));
  // Worker 1 restarted alone: no decision, and the queue stays
  // unsynchronized (worker 1 is of another run) while it lasts.
  EXPECT_FALSE(tracker.OnJoin(0, 1, 22, Join(0)).has_value());
  EXPECT_TRUE(tracker.Unsynchronized(0));
  EXPECT_FALSE(tracker.OnJoin(0, 0, 11, Join(8)).has_value());
  EXPECT_TRUE(tracker.Unsynchronized(0));
  // A new run: every incarnation new.
  EXPECT_FALSE(tracker.OnJoin(0, 0, 21, Join(0)).has_value());
  EXPECT_TRUE(tracker.Unsynchronized(0));
  d = tracker.OnJoin(0, 1, 22, Join(0));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kNewRun);
  EXPECT_FALSE(tracker.Unsynchronized(0));
}

TEST(RunTrackerTest, AJoinOlderThanItsLifetimeDecidesNothing) {
  RunTracker tracker(/*workers=*/2, /*served_queues=*/1);
  const TimePoint t0 = TimePoint::FromNanoseconds(1'000'000);
  const TimePoint late = t0 + RunTracker::kJoinLifetime + TimeDelta::FromNanoseconds(1);
  EXPECT_FALSE(tracker.OnJoin(0, 0, /*incarnation=*/11, Join(0), t0).has_value());
  EXPECT_FALSE(tracker.OnJoin(0, 1, 12, Join(0), late).has_value()) << "worker 0's join is stale";
  // Worker 0 answers the next join request: both recent, decided.
  const std::optional<RebuildDecision> d = tracker.OnJoin(0, 0, 11, Join(0), late);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kFreshPs);
}

// The redo (lib/ps/run_tracker.cc): the worker restarted alone and died,
// the new run's decision that took its join, and what may undo it. Times are
// 100 ms apart, all within kJoinLifetime of each other unless said.
class RunTrackerRedoTest : public ::testing::Test {
 protected:
  // Next: the time of the next join.
  TimePoint Next() { return t_ += TimeDelta::FromMilliseconds(100); }
  std::optional<RebuildDecision> OnJoin(int worker, uint64_t incarnation,
                                        const JoinBody& join = Join(0)) {
    return tracker_.OnJoin(0, worker, incarnation, join, Next());
  }
  // Decide: OnJoin's decision's mode, or nullopt when it decided nothing.
  std::optional<RebuildMode> Decide(int worker, uint64_t incarnation,
                                    const JoinBody& join = Join(0)) {
    const std::optional<RebuildDecision> d = OnJoin(worker, incarnation, join);
    if (!d.has_value()) return std::nullopt;
    return d->mode;
  }
  // Synchronized: the last decision was made with `incarnations` (by worker).
  bool Synchronized(std::vector<uint64_t> incarnations) const {
    for (size_t w = 0; w < incarnations.size(); ++w) {
      if (!tracker_.SynchronizedWith(0, static_cast<int>(w), incarnations[w])) return false;
    }
    return !tracker_.Unsynchronized(0);
  }
  // DecideTheNewRunWithADeadWorker: run 1 (11, 12) decided at 40; worker 0
  // restarted alone as 13 and died; a new run's worker 1 (22) joins while
  // 13's join is young: the new run is decided with 13 (kNewRun).
  void DecideTheNewRunWithADeadWorker() {
    ASSERT_FALSE(OnJoin(0, 11, Join(40)).has_value());
    ASSERT_TRUE(OnJoin(1, 12, Join(40)).has_value());
    ASSERT_FALSE(OnJoin(0, 13).has_value());
    ASSERT_TRUE(tracker_.Unsynchronized(0));  // held back: a lone restart
    ASSERT_EQ(Decide(1, 22), RebuildMode::kNewRun);
    ASSERT_TRUE(Synchronized({13, 22}));
  }

  RunTracker tracker_{/*workers=*/2, /*served_queues=*/1};
  TimePoint t_ = TimePoint::FromNanoseconds(1'000'000);
};

TEST_F(RunTrackerRedoTest, ANewRunDecidedWithADeadLoneRestartIsRedoneWithItsOwnWorker) {
  DecideTheNewRunWithADeadWorker();
  // The new run's worker 0 (21) joins: held back (a lone restart by the
  // rules) ...
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  // ... until worker 1 answers the PS's join request: nothing moved, 21 was
  // never seen before: decided again as a new run with the living workers.
  const std::optional<RebuildDecision> d = OnJoin(1, 22);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kNewRun);
  EXPECT_EQ(d->lowest, 0u);
  EXPECT_EQ(d->joins.size(), 2u);
  EXPECT_TRUE(Synchronized({21, 22}));
  // The run goes on: the next round of joins is a kResync.
  EXPECT_FALSE(OnJoin(0, 21, Join(3)).has_value());
  EXPECT_EQ(Decide(1, 22, Join(3)), RebuildMode::kResync);
}

TEST_F(RunTrackerRedoTest, TheRedoTakesTheSynchronizedWorkersAnswersFromTheHoldOnly) {
  DecideTheNewRunWithADeadWorker();
  // The PS asks before worker 0's own join came: worker 1 answers alone
  // (13, the dead one, never answers): nothing.
  EXPECT_FALSE(OnJoin(1, 22).has_value());
  // Worker 0's join completes a set, but worker 1's answer came before the
  // queue was held back (its run could have moved after it): nothing yet.
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  // The next join request's answers: the redo.
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_EQ(Decide(1, 22), RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({21, 22}));
}

TEST_F(RunTrackerRedoTest, AnAnswerAtZeroFromBeforeTheRunMovedRedoesNothing) {
  // Run 1 (11, 12) decided at 0; worker 1 answers a join request at 0, then
  // run 1 does its work (no join says so). Run 2's worker 0 joins: the set
  // {21, 12} mixes, all at 0, but 12's answer came before the hold: no new
  // run with run 1's worker (its scale would be checked against 21's).
  ASSERT_FALSE(OnJoin(0, 11).has_value());
  ASSERT_TRUE(OnJoin(1, 12).has_value());
  EXPECT_FALSE(OnJoin(1, 12).has_value());
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_TRUE(tracker_.SynchronizedWith(0, 1, 12));
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  // Run 2's worker 1, then worker 0's answer to the PS's request: a new run.
  EXPECT_FALSE(OnJoin(1, 22).has_value());
  EXPECT_EQ(Decide(0, 21), RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({21, 22}));
}

TEST_F(RunTrackerRedoTest, ANewRunWhoseWorkerJoinsBeforeTheOthersNeedsNoRedo) {
  ASSERT_FALSE(OnJoin(0, 11, Join(40)).has_value());
  ASSERT_TRUE(OnJoin(1, 12, Join(40)).has_value());
  ASSERT_FALSE(OnJoin(0, 13).has_value());  // restarted alone, dies
  // The new run's worker 0 joins first: it replaces 13, and worker 1's join
  // decides the new run with the living workers.
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_EQ(Decide(1, 22), RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({21, 22}));
}

// ScaledJoin: a join at 0 of a run that uses `scale`.
JoinBody ScaledJoin(double scale) {
  JoinBody join = Join(0);
  join.scale = scale;
  return join;
}

TEST_F(RunTrackerRedoTest, ADeadWorkersLastJoinBesideTheNextRunWithAnotherScaleRedoesNothing) {
  // Run 1 (11, 12) decided at 0 (a fresh PS), scale 1; the next run (21, 22) uses 2. Its
  // worker 1 joins first, then 11's last join (sent as it shut down): a
  // stayer and a newcomer at 0, but a redo would check 22's scale against
  // 11's and fail the new run. Held back instead until the new run's joins.
  ASSERT_FALSE(OnJoin(0, 11, ScaledJoin(1)).has_value());
  ASSERT_EQ(Decide(1, 12, ScaledJoin(1)), RebuildMode::kFreshPs);
  EXPECT_FALSE(OnJoin(1, 22, ScaledJoin(2)).has_value());
  EXPECT_FALSE(OnJoin(0, 11, ScaledJoin(1)).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  // 21's join, and 22's answer to the PS's next request: all new, a new run.
  EXPECT_FALSE(OnJoin(0, 21, ScaledJoin(2)).has_value());
  EXPECT_EQ(Decide(1, 22, ScaledJoin(2)), RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({21, 22}));
}

TEST_F(RunTrackerRedoTest, ADeadWorkersLastJoinBesideTheNextRunIsRedoneAwayWhenItsWorkerJoins) {
  // As above with one scale: redone with 11 (nothing completes without its
  // gradients), and again with 21 once it joins and 22 answers.
  ASSERT_FALSE(OnJoin(0, 11).has_value());
  ASSERT_EQ(Decide(1, 12), RebuildMode::kFreshPs);
  EXPECT_FALSE(OnJoin(1, 22).has_value());
  EXPECT_EQ(Decide(0, 11), RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({11, 22}));
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  EXPECT_EQ(Decide(1, 22), RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({21, 22}));
}

TEST_F(RunTrackerRedoTest, ARunThatMovedIsNotRedone) {
  DecideTheNewRunWithADeadWorker();
  // Worker 1 got a result since (a position completed before worker 0's
  // join came): worker 0 joining now is a worker restarted alone.
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_FALSE(OnJoin(1, 22, Join(1)).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  // Also with a result out of order only, and with the newcomer's.
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_FALSE(OnJoin(1, 22, Join(0, {2})).has_value());
  EXPECT_FALSE(OnJoin(0, 21, Join(0, {1})).has_value());
  EXPECT_FALSE(OnJoin(1, 22).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  EXPECT_TRUE(tracker_.SynchronizedWith(0, 0, 13));
}

TEST_F(RunTrackerRedoTest, ALateJoinOfAnOlderRunIsNeverLetIntoARedo) {
  DecideTheNewRunWithADeadWorker();
  // Run 1's worker 0 (11), at 0 (its first join, delayed), or where it
  // stood: it was seen before the decision. With worker 1's answer, no redo.
  EXPECT_FALSE(OnJoin(0, 11).has_value());
  EXPECT_FALSE(OnJoin(1, 22).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  EXPECT_FALSE(OnJoin(0, 11, Join(40)).has_value());
  EXPECT_FALSE(OnJoin(1, 22).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  // Run 1's worker 1 (12), late, beside the new run's worker 0: all new, but
  // no new run with a process the decision replaced.
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_FALSE(OnJoin(1, 12).has_value());
  EXPECT_TRUE(tracker_.SynchronizedWith(0, 1, 22));
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  // The living workers answer the next join request: the redo.
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_EQ(Decide(1, 22), RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({21, 22}));
}

TEST_F(RunTrackerRedoTest, TheDeadWorkersLateJoinAfterTheRedoIsNeverLetBackIn) {
  DecideTheNewRunWithADeadWorker();
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  ASSERT_TRUE(OnJoin(1, 22).has_value());  // the redo
  ASSERT_TRUE(Synchronized({21, 22}));
  // 13's join, late (the run has not moved): it was part of a decision.
  EXPECT_FALSE(OnJoin(0, 13).has_value());
  EXPECT_FALSE(OnJoin(1, 22).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  // Worker 0 answers the next join request: the run it serves, kResync.
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_EQ(Decide(1, 22), RebuildMode::kResync);
  EXPECT_TRUE(Synchronized({21, 22}));
}

TEST_F(RunTrackerRedoTest, TheDeadWorkersLateJoinBeforeTheRedoDoesNotBarTheNewRun) {
  DecideTheNewRunWithADeadWorker();
  // Worker 0 of the new run joins, then 13's join arrives late (it was
  // decided with: a kResync with worker 1's answer, nothing moved) ...
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  EXPECT_FALSE(OnJoin(0, 13).has_value());
  std::optional<RebuildDecision> d = OnJoin(1, 22);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kResync);
  // ... and 21's kOpBegin, then its join with worker 1's answer: 21 was seen
  // only after the new run's decision, so the redo is made.
  EXPECT_TRUE(tracker_.OnOtherIncarnation(0, 0, 21));
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  d = OnJoin(1, 22);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({21, 22}));
}

TEST_F(RunTrackerRedoTest, AFreshPsDecisionWithADeadWorkerIsRedoneAsANewRun) {
  // A restarted PS: worker 0's lone restart (13) joins and dies; a new run's
  // worker 1 decides with it (kFreshPs); the new run's worker 0 and worker
  // 1's answer make the redo, a new run (the PS holds nothing of it).
  EXPECT_FALSE(OnJoin(0, 13).has_value());
  std::optional<RebuildDecision> d = OnJoin(1, 22);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kFreshPs);
  EXPECT_FALSE(OnJoin(0, 21).has_value());
  d = OnJoin(1, 22);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kNewRun);
  EXPECT_TRUE(Synchronized({21, 22}));
}

TEST_F(RunTrackerRedoTest, AnIncarnationSeenOnlyByItsOpBeginBeforeTheDecisionIsBarred) {
  // A fresh PS sees worker 0 as 13 by a kOpBegin only (its join lost), then
  // decides with 14 and 22. 13's join later is older than that decision.
  EXPECT_FALSE(tracker_.OnOtherIncarnation(0, 0, 13));
  EXPECT_FALSE(tracker_.Unsynchronized(0));
  EXPECT_FALSE(OnJoin(0, 14).has_value());
  ASSERT_TRUE(OnJoin(1, 22).has_value());
  EXPECT_FALSE(OnJoin(0, 13).has_value());
  EXPECT_FALSE(OnJoin(1, 22).has_value());
  EXPECT_TRUE(tracker_.Unsynchronized(0));
  EXPECT_TRUE(tracker_.SynchronizedWith(0, 0, 14));
}

TEST(RunTrackerRedoThreeWorkersTest, EveryNewcomerJoinsBeforeTheRedo) {
  // Workers 0 and 2 restarted alone (13, 33) and died; the new run's worker 1
  // (22) decided with them. The redo waits for both newcomers.
  RunTracker tracker(/*workers=*/3, /*served_queues=*/1);
  TimePoint t = TimePoint::FromNanoseconds(1'000'000);
  const TimeDelta step = TimeDelta::FromMilliseconds(100);
  ASSERT_FALSE(tracker.OnJoin(0, 0, 11, Join(40), t += step).has_value());
  ASSERT_FALSE(tracker.OnJoin(0, 1, 12, Join(40), t += step).has_value());
  ASSERT_TRUE(tracker.OnJoin(0, 2, 32, Join(40), t += step).has_value());
  ASSERT_FALSE(tracker.OnJoin(0, 0, 13, Join(0), t += step).has_value());
  ASSERT_FALSE(tracker.OnJoin(0, 2, 33, Join(0), t += step).has_value());
  std::optional<RebuildDecision> d = tracker.OnJoin(0, 1, 22, Join(0), t += step);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->mode, RebuildMode::kNewRun);
  EXPECT_FALSE(tracker.OnJoin(0, 0, 21, Join(0), t += step).has_value());
  EXPECT_FALSE(tracker.OnJoin(0, 1, 22, Join(0), t += step).has_value());
  d = tracker.OnJoin(0, 2, 23, Join(0), t += step);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->mode, RebuildMode::kNewRun);
  for (int w = 0; w < 3; ++w) {
    EXPECT_TRUE(tracker.SynchronizedWith(0, w, static_cast<uint64_t>(21 + w))) << w;
  }
  EXPECT_FALSE(tracker.Unsynchronized(0));
}

TEST(RecoveryPlanTest, AsksTheWorkerFurthestAheadForWhatOnlySomeHave) {
  // Worker 1 has 10..12 in order and 15; worker 2 has 11 and 15 out of order.
  const RecoveryPlan plan =
      PlanRecovery(Decide({Join(10), Join(13, {15}), Join(10, {11, 15})}), /*slots=*/8);
  EXPECT_TRUE(plan.acked_by_all.empty());
  EXPECT_EQ(plan.replays,
            (std::vector<ReplayRange>{{10, 13, /*worker=*/1}, {15, 16, /*worker=*/1}}));
}

TEST(RecoveryPlanTest, PositionsEveryWorkerHasNeedNothing) {
  // Everyone waits for 10; everyone has 11 and 12; worker 0 alone has 13.
  const RecoveryPlan plan = PlanRecovery(
      Decide({Join(10, {11, 12, 13}), Join(10, {11, 12}), Join(10, {11, 12})}), /*slots=*/8);
  EXPECT_EQ(plan.acked_by_all, (std::vector<uint64_t>{11, 12}));
  EXPECT_EQ(plan.replays, (std::vector<ReplayRange>{{13, 14, /*worker=*/0}}));
}

TEST(RecoveryPlanTest, NothingToDoWhenTheWorkersAgree) {
  const RecoveryPlan plan = PlanRecovery(Decide({Join(40), Join(40), Join(40)}), /*slots=*/8);
  EXPECT_TRUE(plan.acked_by_all.empty());
  EXPECT_TRUE(plan.replays.empty());
}

TEST(RecoveryPlanTest, ResultsBeyondWhatAJoinDescribesAreAskedOfAnyWorker) {
  // Worker 0 has results up to 1999 that its join's bits cannot name (they
  // reach lowest + kJoinAckedBits); worker 1 has none.
  JoinBody far = Join(0);
  far.acked_end = 2000;
  const RecoveryPlan plan = PlanRecovery(Decide({far, Join(0)}), /*slots=*/4096);
  EXPECT_TRUE(plan.acked_by_all.empty());
  EXPECT_EQ(plan.replays,
            (std::vector<ReplayRange>{{protocol::kJoinAckedBits + 1, 2000, /*worker=*/-1}}));
}

class PsReplayTest : public ::testing::Test {
 protected:
  // One rack of three workers; slots 8.
  void SetUp() override {
    shape_ = JobShape::Uniform(7, 1, 3);
    engine_.emplace(testing::MakeEngine(testing::ConfigFor({shape_}, /*slots=*/8)));
  }
  // Result: a parameter packet as the dead PS sent it for queue 0 `position`.
  wire::AtpMessage Result(uint32_t position) const {
    wire::AtpMessage m;
    m.header.job = shape_.job;
    m.header.seq = wire::MakeSeq(0, position);
    m.header.ack = true;
    m.header.edge = true;
    m.header.fan_in0 = 3;
    m.header.fan_in1 = 1;
    m.header.bitmap0 = 0b111;
    m.header.bitmap1 = 0x0BEE;  // the new index
    m.header.collision = true;
    m.header.ecn = true;
    m.header.aggregator = 4242;
    for (size_t i = 0; i < m.payload.size(); ++i) {
      m.payload[i] = 0xDEAD0000u + static_cast<uint32_t>(i);
    }
    return m;
  }

  JobShape shape_;
  std::optional<PsEngine> engine_;
  RecordingSink sink_;
};

TEST_F(PsReplayTest, AReplayedResultCompletesItsSlotBitForBit) {
  // A restarted PS rebuilt from position 20; everyone has 22.
  const std::vector<uint64_t> done = {22};
  EXPECT_GT(engine_->RebuildQueue(7, 0, 20, RebuildMode::kFreshPs, done), 0u);
  EXPECT_TRUE(engine_->WaitsFor(7, 0, 20));
  EXPECT_TRUE(engine_->WaitsFor(7, 0, 21));
  EXPECT_FALSE(engine_->WaitsFor(7, 0, 22));
  EXPECT_TRUE(engine_->WaitsFor(7, 0, 30)) << "22's slot waits for its next generation";

  // Worker 2 lacks 21 and resends it; 0 and 1 have it and never will.
  engine_->OnGradient(Worker(shape_, wire::MakeSeq(0, 21), 0, 2, Fill(5)), testing::kNow, sink_);
  EXPECT_EQ(engine_->live_slots(), 1u);
  const wire::AtpMessage replayed = Result(21);
  EXPECT_TRUE(engine_->OnReplay(replayed, sink_));
  std::vector<wire::AtpMessage> sent = sink_.TakeAll();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].header, replayed.header) << "what the dead PS sent, field for field";
  EXPECT_EQ(sent[0].payload, replayed.payload);
  EXPECT_EQ(engine_->live_slots(), 0u) << "worker 2's partial state gave way";
  EXPECT_TRUE(engine_->WaitsFor(7, 0, 29));
  EXPECT_EQ(engine_->counters().replays_applied, 1u);
  EXPECT_EQ(engine_->counters().completed, 0u) << "not computed here";

  // Worker 2 lost even that: its resend gets the same packet again.
  wire::AtpMessage resend = Worker(shape_, wire::MakeSeq(0, 21), 0, 2, Fill(5));
  resend.header.resend = true;
  engine_->OnGradient(resend, testing::kNow, sink_);
  sent = sink_.TakeAll();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].payload, replayed.payload);
}

TEST_F(PsReplayTest, ANewRunForgetsAPacketOfTheVeryPositionItWaitsFor) {
  // Position 3 completed (a run shorter than the window); position 4 has
  // one contribution.
  for (int w = 0; w < 3; ++w) {
    engine_->OnGradient(Worker(shape_, wire::MakeSeq(0, 3), 0, w, Fill(1)), testing::kNow, sink_);
  }
  engine_->OnGradient(Worker(shape_, wire::MakeSeq(0, 4), 0, 0, Fill(1)), testing::kNow, sink_);
  ASSERT_EQ(sink_.TakeAll().size(), 1u);
  // The same run from 0 again (kResync): both kept; a resend of 3 gets its
  // stored packet.
  EXPECT_EQ(engine_->RebuildQueue(7, 0, 0, RebuildMode::kResync), 0u);
  EXPECT_FALSE(engine_->WaitsFor(7, 0, 3));
  EXPECT_EQ(engine_->live_slots(), 1u);
  // A new run from 0: 3's packet and 4's partial sum are the old run's.
  EXPECT_EQ(engine_->RebuildQueue(7, 0, 0, RebuildMode::kNewRun), 2u);
  EXPECT_TRUE(engine_->WaitsFor(7, 0, 3));
  EXPECT_EQ(engine_->live_slots(), 0u);
  wire::AtpMessage resend = Worker(shape_, wire::MakeSeq(0, 3), 0, 1, Fill(5));
  resend.header.resend = true;
  engine_->OnGradient(resend, testing::kNow, sink_);
  EXPECT_TRUE(sink_.TakeAll().empty()) << "answered with the old run's packet";
}

TEST_F(PsReplayTest, ReplaysOfPositionsTheSlotDoesNotWaitForChangeNothing) {
  ASSERT_GT(engine_->RebuildQueue(7, 0, 20, RebuildMode::kFreshPs), 0u);
  EXPECT_TRUE(engine_->OnReplay(Result(21), sink_));
  EXPECT_FALSE(engine_->OnReplay(Result(21), sink_)) << "a second copy";
  EXPECT_FALSE(engine_->OnReplay(Result(37), sink_)) << "two generations ahead";
  EXPECT_FALSE(engine_->OnReplay(Result(13), sink_)) << "behind";
  wire::AtpMessage overflow_request = Result(20);
  overflow_request.header.resend = true;
  overflow_request.header.fp = false;
  EXPECT_FALSE(engine_->OnReplay(overflow_request, sink_)) << "not a result";
  wire::AtpMessage other_job = Result(20);
  other_job.header.job = 8;
  EXPECT_FALSE(engine_->OnReplay(other_job, sink_));
  EXPECT_EQ(engine_->counters().replays_applied, 1u);
  EXPECT_EQ(engine_->counters().replays_ignored, 5u);
  EXPECT_EQ(sink_.TakeAll().size(), 1u);
  EXPECT_TRUE(engine_->WaitsFor(7, 0, 20));
}

}  // namespace
}  // namespace atp::ps
