// TimerJitter and its use by WorkerQueueEngine: the retransmission timers of
// a job's workers, restarted by the same parameter packet, fire at different
// times, deterministically per seed, within [rto, rto * (1 + percent/100)).
#include "lib/worker/timer_jitter.h"

#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "lib/worker/worker_queue_engine.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using testing::kT0;
using testing::Ms;

TEST(TimerJitterTest, StretchStaysWithinTheConfiguredFraction) {
  TimerJitter jitter(/*seed=*/1, /*key=*/2, /*percent=*/25);
  std::set<uint32_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const TimeDelta stretched = jitter.Stretch(Ms(4));
    EXPECT_GE(stretched, Ms(4));
    EXPECT_LT(stretched, Ms(5));
    seen.insert(jitter.fraction_millionths());
    jitter.Redraw();
  }
  EXPECT_GT(seen.size(), 900u);  // draws differ
}

TEST(TimerJitterTest, ZeroPercentIsNoJitterAndInfiniteStaysInfinite) {
  TimerJitter none(1, 2, 0);
  EXPECT_EQ(none.Stretch(Ms(4)), Ms(4));
  TimerJitter some(1, 2, 25);
  EXPECT_TRUE(some.Stretch(TimeDelta::Infinite()).IsInfinite());
}

TEST(TimerJitterTest, SameSeedAndKeySameDrawsOtherKeysOrSeedsOthers) {
  TimerJitter a(7, 1, 25), b(7, 1, 25), other_key(7, 2, 25), other_seed(8, 1, 25);
  int key_differs = 0, seed_differs = 0;
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(a.fraction_millionths(), b.fraction_millionths());
    key_differs += a.fraction_millionths() != other_key.fraction_millionths();
    seed_differs += a.fraction_millionths() != other_seed.fraction_millionths();
    a.Redraw();
    b.Redraw();
    other_key.Redraw();
    other_seed.Redraw();
  }
  EXPECT_GT(key_differs, 95);
  EXPECT_GT(seed_differs, 95);
}

// Four workers of one job send at the same instant and get no answer: their
// timers, armed at the same instant with the same RTO, fire at four
// different times, each within the RTO's 25% stretch; and they are redrawn
// at every timeout, so the order changes from round to round.
TEST(TimerJitterTest, WorkersOfOneJobTimeOutAtDifferentTimes) {
  constexpr int kWorkers = 4;
  std::vector<std::unique_ptr<WorkerQueueEngine>> engines;
  std::vector<float> input(62, 1.0f), output(62 * kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    WorkerQueueConfig config = testing::SmallConfig();
    config.shape = protocol::JobShape::Uniform(testing::kJob, 1, kWorkers);
    config.worker_in_rack = w;
    config.rto_jitter_percent = 25;
    config.timer_seed = 42;
    engines.push_back(testing::MakeEngine(config));
    ASSERT_NE(engines.back(), nullptr);
    ASSERT_TRUE(engines.back()
                    ->Enqueue(input, std::span(output).subspan(static_cast<size_t>(w) * 62, 62))
                    .ok());
    ASSERT_EQ(testing::Send(*engines.back(), kT0).size(), 1u);
  }
  std::vector<TimePoint> first_round;
  for (const auto& engine : engines) {
    const TimePoint deadline = engine->NextDeadline();
    EXPECT_GE(deadline, kT0 + Ms(10));  // SmallConfig's initial RTO
    EXPECT_LT(deadline, kT0 + Ms(10) + Ms(10) / 4);
    first_round.push_back(deadline);
  }
  EXPECT_EQ(std::set<TimePoint>(first_round.begin(), first_round.end()).size(), 4u);

  // Every one times out at the same (later) instant and resends: the next
  // deadlines differ again, by stretches drawn afresh (as twice the stretch
  // of a 10 ms RTO and of a 20 ms one, they would be equal without a redraw).
  const TimePoint later = kT0 + Ms(20);
  std::vector<int64_t> offsets_before, offsets_after;
  for (size_t w = 0; w < engines.size(); ++w) {
    ASSERT_EQ(testing::Send(*engines[w], later).size(), 1u);
    offsets_before.push_back((first_round[w] - kT0 - Ms(10)).ToNanoseconds() * 2);
    offsets_after.push_back((engines[w]->NextDeadline() - later - Ms(20)).ToNanoseconds());
    EXPECT_GE(engines[w]->NextDeadline(), later + Ms(20));  // backed off x2
    EXPECT_LT(engines[w]->NextDeadline(), later + Ms(25));
  }
  EXPECT_EQ(std::set<int64_t>(offsets_after.begin(), offsets_after.end()).size(), 4u);
  EXPECT_NE(offsets_before, offsets_after);
}

// A loss declared by parameter packets (which every worker of the job gets
// in the same instant) is not resent in that instant: the resend waits a
// random part of the smoothed RTT, NextDeadline() names when, and it goes
// out then.
TEST(TimerJitterTest, ResendsTriggeredByAParameterPacketWaitARandomSpread) {
  WorkerQueueConfig config = testing::SmallConfig();
  config.rto_jitter_percent = 25;
  auto engine = testing::MakeEngine(config);
  ASSERT_NE(engine, nullptr);
  std::vector<float> input(62 * 8, 1.0f), output(input.size());
  ASSERT_TRUE(engine->Enqueue(input, output).ok());
  const std::vector<wire::AtpMessage> sent = testing::Send(*engine, kT0);
  ASSERT_EQ(sent.size(), 8u);
  // Positions 1..3 answered 100 us later (srtt 100 us), 0 is missing: the
  // third declares it lost.
  const TimePoint t = kT0 + testing::Us(100);
  for (size_t i = 1; i <= 3; ++i) engine->OnParameterPacket(testing::EchoAck(sent[i]), t);
  EXPECT_EQ(engine->stats().loss_events, 1u);
  EXPECT_TRUE(testing::Send(*engine, t).empty());  // held, not sent with the trigger
  const TimePoint release = engine->NextDeadline();
  EXPECT_GT(release, t);
  EXPECT_LT(release, t + testing::Us(50));  // at most half of srtt
  EXPECT_TRUE(testing::Send(*engine, release - TimeDelta::FromNanoseconds(1)).empty());
  const std::vector<wire::AtpMessage> resent = testing::Send(*engine, release);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(testing::PositionOf(resent[0]), 0u);
  EXPECT_TRUE(resent[0].header.resend);
}

}  // namespace
}  // namespace atp::worker
