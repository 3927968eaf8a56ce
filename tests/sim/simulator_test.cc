// Tests of the simulator's clock and event queue (sim/simulator.h).
#include "sim/simulator.h"

#include <cstdint>
#include <memory>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace atp::sim {
namespace {

TimePoint Ns(int64_t ns) { return TimePoint::FromNanoseconds(ns); }

// Recorder: appends (its id, now) to a shared log each time it acts.
class Recorder : public Actor {
 public:
  Recorder(int id, std::vector<std::pair<int, int64_t>>* log) : id_(id), log_(log) {}
  void Act(TimePoint now) override { log_->push_back({id_, now.ToNanoseconds()}); }

 private:
  int id_;
  std::vector<std::pair<int, int64_t>>* log_;
};

TEST(SimulatorTest, EventsRunInTimeOrderAndTheClockFollows) {
  Simulator sim;
  std::vector<std::pair<int, int64_t>> log;
  Recorder a(1, &log), b(2, &log), c(3, &log);
  sim.Schedule(&a, Ns(300));
  sim.Schedule(&b, Ns(100));
  sim.Schedule(&c, Ns(200));
  EXPECT_EQ(sim.RunUntilIdle(), 3u);
  EXPECT_EQ(log, (std::vector<std::pair<int, int64_t>>{{2, 100}, {3, 200}, {1, 300}}));
  EXPECT_EQ(sim.Now(), Ns(300));
}

TEST(SimulatorTest, SameTimeEventsRunInScheduleOrder) {
  Simulator sim;
  std::vector<std::pair<int, int64_t>> log;
  std::vector<std::unique_ptr<Recorder>> actors;
  for (int i = 0; i < 50; ++i) actors.push_back(std::make_unique<Recorder>(i, &log));
  // Schedule in a scrambled order; ties must come out in that same order.
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) order.push_back((i * 17) % 50);
  for (int i : order) sim.Schedule(actors[static_cast<size_t>(i)].get(), Ns(42));
  sim.RunUntilIdle();
  ASSERT_EQ(log.size(), 50u);
  for (size_t i = 0; i < 50; ++i) EXPECT_EQ(log[i].first, order[i]);
}

TEST(SimulatorTest, EarlierScheduleReplacesLaterOneAndLaterOneIsIgnored) {
  Simulator sim;
  std::vector<std::pair<int, int64_t>> log;
  Recorder a(1, &log);
  sim.Schedule(&a, Ns(500));
  sim.Schedule(&a, Ns(100));  // earlier: replaces
  sim.Schedule(&a, Ns(900));  // later than pending: ignored
  EXPECT_EQ(a.scheduled_time(), Ns(100));
  sim.RunUntilIdle();
  EXPECT_EQ(log, (std::vector<std::pair<int, int64_t>>{{1, 100}}));
  EXPECT_EQ(a.scheduled_time(), TimePoint::Infinite());
}

TEST(SimulatorTest, UnscheduleCancelsAndForgetsTheActor) {
  Simulator sim;
  std::vector<std::pair<int, int64_t>> log;
  auto a = std::make_unique<Recorder>(1, &log);
  Recorder b(2, &log);
  sim.Schedule(a.get(), Ns(100));
  sim.Schedule(a.get(), Ns(50));
  sim.Schedule(&b, Ns(70));
  sim.Unschedule(a.get());
  a.reset();  // safe: no queue entry names it any more
  sim.RunUntilIdle();
  EXPECT_EQ(log, (std::vector<std::pair<int, int64_t>>{{2, 70}}));
}

TEST(SimulatorTest, RunUntilStopsAtDeadlineAndAdvancesClock) {
  Simulator sim;
  std::vector<std::pair<int, int64_t>> log;
  Recorder a(1, &log), b(2, &log);
  sim.Schedule(&a, Ns(100));
  sim.Schedule(&b, Ns(1000));
  EXPECT_EQ(sim.RunUntil(Ns(500)), 1u);
  EXPECT_EQ(sim.Now(), Ns(500));
  EXPECT_EQ(sim.NextEventTime(), Ns(1000));
  EXPECT_EQ(sim.RunUntil(Ns(1000)), 1u);  // an event exactly at the deadline runs
  EXPECT_EQ(log.size(), 2u);
}

TEST(SimulatorTest, PastTimesRunNowAndInfiniteSchedulesNothing) {
  Simulator sim;
  std::vector<std::pair<int, int64_t>> log;
  Recorder a(1, &log), b(2, &log);
  sim.RunUntil(Ns(1000));
  sim.Schedule(&a, Ns(10));
  sim.Schedule(&b, TimePoint::Infinite());
  sim.RunUntilIdle();
  EXPECT_EQ(log, (std::vector<std::pair<int, int64_t>>{{1, 1000}}));
}

// Rescheduler: acts `limit` times, `period` apart, and stops the run at the end.
class Rescheduler : public Actor {
 public:
  Rescheduler(Simulator* sim, TimeDelta period, int limit)
      : sim_(sim), period_(period), limit_(limit) {}
  void Act(TimePoint now) override {
    if (++count_ == limit_) {
      sim_->Stop();
      return;
    }
    sim_->Schedule(this, now + period_);
  }
  int count() const { return count_; }

 private:
  Simulator* sim_;
  TimeDelta period_;
  int limit_;
  int count_ = 0;
};

TEST(SimulatorTest, ActorsRescheduleThemselvesAndStopEndsTheRun) {
  Simulator sim;
  Rescheduler r(&sim, TimeDelta::FromMicroseconds(1), 10);
  Recorder never_reached(9, nullptr);
  sim.Schedule(&r, Ns(0));
  sim.Schedule(&never_reached, Ns(1'000'000));
  sim.RunUntilIdle();
  EXPECT_EQ(r.count(), 10);
  EXPECT_EQ(sim.Now(), Ns(9000));
  EXPECT_EQ(sim.events_processed(), 10u);
  sim.Unschedule(&never_reached);
}

}  // namespace
}  // namespace atp::sim

namespace atp::sim {
namespace {

// SelfScheduler: reschedules itself twice per Act (the second time earlier),
// schedules a peer for the same time, and may ask for the next event time.
class SelfScheduler : public Actor {
 public:
  SelfScheduler(Simulator* sim, Actor* peer, std::vector<std::pair<int, int64_t>>* log,
                bool peek)
      : sim_(sim), peer_(peer), log_(log), peek_(peek) {}
  void Act(TimePoint now) override {
    log_->push_back({0, now.ToNanoseconds()});
    if (now.ToNanoseconds() >= 50) return;
    sim_->Schedule(this, now + TimeDelta::FromNanoseconds(50));
    sim_->Schedule(this, now + TimeDelta::FromNanoseconds(10));  // earlier: wins
    sim_->Schedule(peer_, now + TimeDelta::FromNanoseconds(10));  // ignored if pending
    if (peek_) {
      // Its own new time (now + 10), or the peer still pending from before.
      const TimePoint next = sim_->NextEventTime();
      EXPECT_TRUE(next >= now && next <= now + TimeDelta::FromNanoseconds(10));
      EXPECT_EQ(next, peer_->scheduled_time());
    }
  }

 private:
  Simulator* sim_;
  Actor* peer_;
  std::vector<std::pair<int, int64_t>>* log_;
  bool peek_;
};

TEST(SimulatorTest, SelfReschedulingDuringActKeepsTimeAndTieOrder) {
  for (bool peek : {false, true}) {
    Simulator sim;
    std::vector<std::pair<int, int64_t>> log;
    Recorder peer(1, &log);
    SelfScheduler self(&sim, &peer, &log, peek);
    sim.Schedule(&self, TimePoint::FromNanoseconds(0));
    sim.RunUntilIdle();
    // `self` asked first each time, so it runs before the peer at equal times;
    // the peer, still pending at 10 when asked for 20, runs at 10, 30, 50.
    EXPECT_EQ(log, (std::vector<std::pair<int, int64_t>>{
                       {0, 0}, {0, 10}, {1, 10}, {0, 20}, {0, 30}, {1, 30}, {0, 40}, {0, 50},
                       {1, 50}}));
    EXPECT_EQ(sim.events_processed(), 9u);
  }
}

// Draws: SplitMix64, the test's own deterministic numbers.
class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// Hopper: acts `hops` times, each time rescheduling itself 0-7 ns later (a
// draw: many ties), and logs (id, now) as a Recorder does.
class Hopper : public Actor {
 public:
  Hopper(int id, Simulator* sim, int hops, std::vector<std::pair<int, int64_t>>* log)
      : id_(id), sim_(sim), draws_(static_cast<uint64_t>(id)), hops_(hops), log_(log) {}
  void Act(TimePoint now) override {
    log_->push_back({id_, now.ToNanoseconds()});
    if (--hops_ > 0) {
      sim_->Schedule(this,
                     now + TimeDelta::FromNanoseconds(static_cast<int64_t>(draws_.Next() % 8)));
    }
  }

 private:
  int id_;
  Simulator* sim_;
  Draws draws_;
  int hops_;
  std::vector<std::pair<int, int64_t>>* log_;
};

TEST(SimulatorTest, ManyActorsWithTiesRunInTimeThenScheduleOrder) {
  // 1,000 actors (a heap of several levels, nodes with four children and
  // with fewer) hopping 20 times each: the log must be the order of a plain
  // reference queue, by time and then by the order of the Schedule calls.
  constexpr int kActors = 1000;
  constexpr int kHops = 20;
  Simulator sim;
  std::vector<std::pair<int, int64_t>> log;
  std::vector<std::unique_ptr<Hopper>> actors;
  for (int i = 0; i < kActors; ++i) {
    actors.push_back(std::make_unique<Hopper>(i, &sim, kHops, &log));
  }
  for (int i = 0; i < kActors; ++i) sim.Schedule(actors[static_cast<size_t>(i)].get(), Ns(i % 5));
  sim.RunUntilIdle();

  // The reference: the same draws, through a sorted set of (time, the
  // Schedule call's number, id).
  std::vector<std::pair<int, int64_t>> expected;
  std::set<std::tuple<int64_t, uint64_t, int>> queue;
  std::vector<Draws> draws;
  std::vector<int> hops_left(kActors, kHops);
  uint64_t calls = 0;
  for (int i = 0; i < kActors; ++i) {
    draws.emplace_back(static_cast<uint64_t>(i));
    queue.insert({i % 5, calls++, i});
  }
  while (!queue.empty()) {
    const auto [time, call, id] = *queue.begin();
    queue.erase(queue.begin());
    expected.push_back({id, time});
    const auto at = static_cast<size_t>(id);
    if (--hops_left[at] > 0) {
      queue.insert({time + static_cast<int64_t>(draws[at].Next() % 8), calls++, id});
    }
  }
  ASSERT_EQ(log.size(), static_cast<size_t>(kActors * kHops));
  EXPECT_EQ(log, expected);
}

}  // namespace
}  // namespace atp::sim
