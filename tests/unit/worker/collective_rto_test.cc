// tests/unit/worker/collective_rto_test.cc: the retransmission timeout fits
// ATP's collective round trip. Two worker engines share one aggregate per
// position, on a fake clock: the test plays the switch (an aggregate
// completes when both fragments are in; the parameter packet reaches both
// workers at once) and a shared CPU (a worker that waited longer than its
// spin budget sleeps and sees the next packets late; now and then one is
// preempted). The worker whose fragments arrive last sees a short round
// trip of its own; with the engine's defaults it must still not time out.
#include <array>
#include <cstdint>
#include <map>
#include <queue>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker::testing {
namespace {

constexpr int kWorkers = 2;

// SharedCpuJob: the event loop. Times in microseconds after kT0.
class SharedCpuJob {
 public:
  struct Cpu {
    int64_t one_way_us = 5;  // wire and switch, each way
    // Per worker: a thread idle longer than spin_us sleeps and sees the next
    // packet wake_us late.
    std::array<int64_t, kWorkers> spin_us = {50, 50};
    std::array<int64_t, kWorkers> wake_us = {120, 120};
    // Every preempt_every-th wake-up of worker preempted (0: none) takes
    // preempt_us longer (another process had the core).
    int preempted = 0;
    int64_t preempt_every = 0;
    int64_t preempt_us = 0;
  };

  SharedCpuJob(const WorkerQueueConfig& base, Cpu cpu) : cpu_(cpu) {
    for (int w = 0; w < kWorkers; ++w) {
      WorkerQueueConfig config = base;
      config.shape = protocol::JobShape::Uniform(kJob, 1, kWorkers);
      config.worker_in_rack = w;
      config.queue = kQueue;
      workers_[w].engine = MakeEngine(config);
    }
  }

  // Run: each worker aggregates `operations` tensors of `values` floats, one
  // after the other; returns when all completed or simulated time ran out.
  void Run(int operations, size_t values, int64_t limit_us) {
    inputs_.assign(kWorkers, Ramp(values));
    outputs_.assign(kWorkers, std::vector<float>(values));
    operations_left_ = {operations, operations};
    for (int w = 0; w < kWorkers; ++w) {
      ASSERT_NE(workers_[w].engine, nullptr);
      ASSERT_TRUE(workers_[w].engine->Enqueue(inputs_[w], outputs_[w]).ok());
      Push(now_us_, w, Event::kWake);
    }
    while (!events_.empty() && (operations_left_[0] > 0 || operations_left_[1] > 0)) {
      Event e = events_.top();
      events_.pop();
      if (e.at_us > limit_us) break;  // the caller's assertions report it
      now_us_ = e.at_us;
      if (e.kind == Event::kSwitch) {
        OnSwitch(e.message);
      } else if (e.kind == Event::kArrive) {
        OnArrive(e.worker, e.message);
      } else if (e.kind == Event::kWake || workers_[e.worker].wake_at_us < now_us_) {
        // A timer is ignored while the thread is not runnable (asleep or
        // preempted until wake_at_us): that wake-up steps it.
        Step(e.worker);
      }
    }
  }

  const WorkerQueueEngine& engine(int w) const { return *workers_[w].engine; }
  int operations_left(int w) const { return operations_left_[w]; }

 private:
  struct Event {
    enum Kind { kSwitch, kArrive, kWake, kTimer } kind;
    int64_t at_us;
    uint64_t order;
    int worker = 0;
    wire::AtpMessage message;
    bool operator>(const Event& o) const {
      return at_us != o.at_us ? at_us > o.at_us : order > o.order;
    }
  };
  struct Worker {
    std::unique_ptr<WorkerQueueEngine> engine;
    std::vector<wire::AtpMessage> inbox;
    int64_t last_active_us = 0;
    int64_t wake_at_us = -1;  // a wake-up is scheduled (the thread sleeps)
    int64_t wakes = 0;
  };

  static TimePoint At(int64_t us) { return kT0 + Us(us); }

  void Push(int64_t at_us, int worker, Event::Kind kind, const wire::AtpMessage& m = {}) {
    events_.push(Event{kind, at_us, order_++, worker, m});
  }

  // A packet reaches worker w's queue: an awake thread takes it now, a
  // sleeping one when it wakes up.
  void OnArrive(int w, const wire::AtpMessage& m) {
    Worker& worker = workers_[w];
    worker.inbox.push_back(m);
    if (worker.wake_at_us >= now_us_) return;
    int64_t delay = now_us_ - worker.last_active_us > cpu_.spin_us[w] ? cpu_.wake_us[w] : 0;
    if (w == cpu_.preempted && cpu_.preempt_every > 0 && ++worker.wakes % cpu_.preempt_every == 0) {
      delay += cpu_.preempt_us;
    }
    worker.wake_at_us = now_us_ + delay;
    Push(worker.wake_at_us, w, Event::kWake);
  }

  void Step(int w) {
    Worker& worker = workers_[w];
    WorkerQueueEngine& engine = *worker.engine;
    const TimePoint now = At(now_us_);
    for (const wire::AtpMessage& m : worker.inbox) engine.OnParameterPacket(m, now);
    worker.inbox.clear();
    worker.wake_at_us = -1;
    for (const wire::AtpMessage& m : Send(engine, now)) {
      Push(now_us_ + cpu_.one_way_us, w, Event::kSwitch, m);
    }
    // One operation in flight at a time: the next is enqueued when it completes.
    if (!Completions(engine).empty() && --operations_left_[w] > 0) {
      ASSERT_TRUE(engine.Enqueue(inputs_[w], outputs_[w]).ok());
      for (const wire::AtpMessage& m : Send(engine, now)) {
        Push(now_us_ + cpu_.one_way_us, w, Event::kSwitch, m);
      }
    }
    worker.last_active_us = now_us_;
    const TimePoint deadline = engine.NextDeadline();
    if (!deadline.IsInfinite()) {
      Push(((deadline - kT0).ToNanoseconds() + 999) / 1000, w, Event::kTimer);
    }
  }

  // The switch: one aggregate per position; both contributions complete it
  // and the parameter packet goes to both workers. A resend of a completed
  // position gets the parameter packet again (the PS keeps it).
  void OnSwitch(const wire::AtpMessage& m) {
    const uint32_t position = m.header.position();
    Aggregate& a = aggregates_[position];
    a.contributors |= m.header.bitmap0;
    if (a.completed) {
      Push(now_us_ + cpu_.one_way_us, BitToWorker(m.header.bitmap0), Event::kArrive, a.result);
      return;
    }
    if (a.contributors != (1u << kWorkers) - 1) return;
    a.completed = true;
    a.result = EchoAck(m);
    a.result.header.resend = false;
    a.result.header.bitmap0 = a.contributors;
    for (int w = 0; w < kWorkers; ++w) Push(now_us_ + cpu_.one_way_us, w, Event::kArrive, a.result);
  }

  static int BitToWorker(uint32_t bit) { return bit == 1 ? 0 : 1; }

  struct Aggregate {
    uint32_t contributors = 0;
    bool completed = false;
    wire::AtpMessage result;
  };

  Cpu cpu_;
  std::array<Worker, kWorkers> workers_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t order_ = 0;
  int64_t now_us_ = 0;
  std::map<uint32_t, Aggregate> aggregates_;
  std::vector<std::vector<float>> inputs_;
  std::vector<std::vector<float>> outputs_;
  std::array<int, kWorkers> operations_left_{};
};

// The engine's defaults (floor 200 us, jitter on), a small window so that
// workers wait for each other every round trip.
WorkerQueueConfig Defaults() {
  WorkerQueueConfig config;
  config.slots = 64;
  config.initial_window = 16;
  return config;
}

TEST(CollectiveRtoTest, LastArrivingWorkerDoesNotTimeOutOnASharedCpu) {
  // Worker 0 busy-polls; worker 1 sleeps when idle and wakes 120 us late, so
  // its fragments complete the aggregates and its own samples are the
  // network's 10 us. Every fifth wake-up of worker 0 is preempted for
  // 900 us, and worker 1 waits for it. Before the RTO followed the
  // collective round trip (slowest recent sample, bounded samples), worker
  // 1's RTO sat at the 200 us floor and it timed out spuriously 226 times in
  // these 10,240 fragments (26 with a preemption every 20th wake-up). A
  // worker cannot know another's delay before it waited for one, so a few
  // timeouts while it learns are allowed (2 here); afterwards none.
  SharedCpuJob job(Defaults(), {.one_way_us = 5,
                                .spin_us = {1'000'000, 50},
                                .wake_us = {0, 120},
                                .preempted = 0,
                                .preempt_every = 5,
                                .preempt_us = 900});
  constexpr int kOperations = 20;
  constexpr uint64_t kFragments = 256;
  job.Run(kOperations, 62 * kFragments, /*limit_us=*/10'000'000);
  std::array<uint64_t, kWorkers> learning_timeouts{};
  for (int w = 0; w < kWorkers; ++w) {
    ASSERT_EQ(job.operations_left(w), 0) << w;
    learning_timeouts[w] = job.engine(w).stats().timeouts;
    EXPECT_LE(learning_timeouts[w], 4u) << w;
  }
  job.Run(kOperations, 62 * kFragments, /*limit_us=*/20'000'000);
  for (int w = 0; w < kWorkers; ++w) {
    SCOPED_TRACE(w);
    EXPECT_EQ(job.operations_left(w), 0);
    const WorkerQueueStats s = job.engine(w).stats();
    EXPECT_EQ(s.fragments_sent, 2 * kOperations * kFragments);
    EXPECT_EQ(s.timeouts, learning_timeouts[w]) << "srtt " << s.srtt.ToMicroseconds()
                                                << " us, rto " << s.rto.ToMicroseconds() << " us";
  }
}

}  // namespace
}  // namespace atp::worker::testing
