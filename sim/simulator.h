// sim/simulator.h: the virtual clock and the event queue.
//
// Everything in a simulation is an Actor: it asks the Simulator to wake it at
// a time (Schedule) and does its work in Act(now). Time only moves when the
// Simulator pops the next event, so a run takes as long as its events take to
// process, not as long as the time it simulates.
//
// Determinism: events at the same time run in the order they were scheduled
// (a sequence number breaks ties), and nothing here reads a clock or a global
// random source, so the same program with the same seeds produces the same
// run, bit for bit.
//
//   class Ticker : public atp::sim::Actor {
//    public:
//     explicit Ticker(atp::sim::Simulator* sim) : sim_(sim) { sim_->Schedule(this, sim_->Now()); }
//     void Act(atp::TimePoint now) override {
//       ++ticks_;
//       sim_->Schedule(this, now + atp::TimeDelta::FromMicroseconds(1));
//     }
//    ...
//   };
//   sim.RunUntil(atp::TimePoint::FromNanoseconds(10'000));
#ifndef ATP_SIM_SIMULATOR_H_
#define ATP_SIM_SIMULATOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "atp/time.h"

namespace atp::sim {

class Simulator;

// Actor: something the Simulator wakes up. An actor has at most one pending
// wake-up: scheduling it again earlier replaces the pending one, scheduling it
// later than the pending one changes nothing (it is woken at the earlier time
// and simply schedules itself again). Actors are not owned by the Simulator
// and must be Unscheduled (or the Simulator Cleared) before they are destroyed.
class Actor {
 public:
  Actor() = default;
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;
  virtual ~Actor() = default;

  // Act: called by Simulator at the time the actor was scheduled for; `now` is
  // Simulator::Now(). The pending wake-up is cleared before the call, so Act
  // may Schedule the actor again.
  virtual void Act(TimePoint now) = 0;

  // scheduled_time: the pending wake-up, or TimePoint::Infinite() if none.
  TimePoint scheduled_time() const { return scheduled_; }

 private:
  friend class Simulator;
  TimePoint scheduled_ = TimePoint::Infinite();
  uint64_t live_event_ = 0;  // sequence number of the pending event (0: none)
};

// Simulator: the clock and the event queue. Used by one thread at a time
// (a network of two partitions has one Simulator each: sim/network.h).
class Simulator {
 public:
  Simulator() = default;
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Now: the current virtual time (starts at TimePoint::Zero()).
  TimePoint Now() const { return now_; }

  // Schedule: wake `actor` at `time`; a time in the past means Now(). Keeps the
  // earlier of `time` and the actor's pending wake-up. An infinite time
  // schedules nothing.
  void Schedule(Actor* actor, TimePoint time);

  // Unschedule: cancel the actor's pending wake-up and forget every queue
  // entry that names it, so the actor may then be destroyed. O(queue size):
  // for teardown and tests, not for the hot path.
  void Unschedule(Actor* actor);

  // Clear: drops every pending event (before tearing a network down).
  void Clear() {
    heap_.clear();
    running_at_top_ = false;
  }

  // RunUntil: processes every event due at or before `deadline`, then sets the
  // clock to `deadline` (unless Stop() was called, which leaves the clock at
  // the stopping event). Returns the number of events processed.
  uint64_t RunUntil(TimePoint deadline);

  // RunUntilIdle: processes events until none is left or Stop() is called.
  uint64_t RunUntilIdle();

  // Stop: makes the running RunUntil / RunUntilIdle return after the current
  // event. Called from inside an Act.
  void Stop() { stop_requested_ = true; }

  // NextEventTime: when the next pending event is due (Infinite if none).
  TimePoint NextEventTime();

  // AdvanceClock: sets the clock to `time` (if later) without running
  // anything: for a caller between runs that knows no event is due before
  // `time` (Network's actions between windows).
  void AdvanceClock(TimePoint time) {
    if (time > now_) now_ = time;
  }

  // events_processed: every Act called since construction.
  uint64_t events_processed() const { return events_processed_; }
  // pending_events: entries in the queue, cancelled ones included.
  size_t pending_events() const { return heap_.size(); }

 private:
  struct Event {
    int64_t time_ns;
    uint64_t sequence;  // tie breaker: FIFO among events at the same time
    Actor* actor;
  };
  // Key: an event's place in the queue, (time_ns, sequence) as one number
  // (time_ns is never negative: Schedule clamps to Now()).
  __extension__ using Key = unsigned __int128;
  static Key KeyOf(const Event& e) {
    return Key{static_cast<uint64_t>(e.time_ns)} << 64 | e.sequence;
  }
  static bool Before(const Event& a, const Event& b) { return KeyOf(a) < KeyOf(b); }

  void Push(const Event& event);
  void PopTop();
  // SiftDown: puts `event` at the top's place and restores the heap.
  void SiftDown(const Event& event);
  // DropCancelled: pops cancelled events off the top of the heap.
  void DropCancelled();
  uint64_t Run(TimePoint deadline);

  // A 4-ary min-heap on (time_ns, sequence): half the depth of a binary one,
  // and the four children of a node (96 bytes) lie side by side.
  static constexpr size_t kArity = 4;
  std::vector<Event> heap_;
  TimePoint now_ = TimePoint::Zero();
  uint64_t next_sequence_ = 1;
  uint64_t events_processed_ = 0;
  bool stop_requested_ = false;
  // The actor whose Act is running, and its own rescheduling, applied when
  // Act returns (see Schedule).
  Actor* running_ = nullptr;
  bool running_at_top_ = false;
  bool has_deferred_ = false;
  Event deferred_{};
};

}  // namespace atp::sim

#endif  // ATP_SIM_SIMULATOR_H_
