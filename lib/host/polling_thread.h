// lib/host/polling_thread.h: a thread that runs step functions over and
// over, in turn, backing off when none has work (AdaptiveBackoff): spin,
// yield, then sleep in ppoll() on a doorbell (eventfd) and the steps' wait_fds
// (their transport queues'), never past the earliest deadline a step asked for.
//
//   auto thread = PollingThread::Start("atp-w0-q1", polling, {queue.wait_fd()},
//       [&](TimePoint now) { return loop.Step(now); });
//   ... submit work, then: thread->Wake();
//   thread.reset();   // stops and joins
//
// Several loops may share one thread (atp/shared_io_threads.h): Add
// puts a step in the rotation, Remove takes it out and returns once the thread
// no longer runs it. A round calls every step once; it did work if any step
// did, and its deadline is the earliest step's.
//
// Threads: the steps run on the thread only, each with the time read just
// before it. The step list is the thread's own; Add and Remove hand changes
// over under mu_, applied between rounds. Wake, Add, Remove, Stop: any thread
// but this one's steps (Remove and Stop would wait for themselves).
#ifndef ATP_LIB_HOST_POLLING_THREAD_H_
#define ATP_LIB_HOST_POLLING_THREAD_H_

#include <poll.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/options.h"
#include "atp/time.h"

namespace atp::host {

// StepResult: what one iteration did, and when the next is due at the latest
// even with nothing to do (a retransmission timer; Infinite: no deadline).
struct StepResult {
  bool did_work = false;
  TimePoint deadline = TimePoint::Infinite();
};

// SleepUntilReadable: sleeps at most `at_most`, less if one of `fds` (each
// asking for POLLIN) turns readable: a frame arrived on a queue's wait_fd, a
// doorbell rang. Their revents say which. A plain sleep when `fds` is empty.
// The one sleep of PollingThread and of atp-switchd's datapath thread.
void SleepUntilReadable(std::span<pollfd> fds, TimeDelta at_most);

class PollingThread {
 public:
  using StepFunction = std::function<StepResult(TimePoint now)>;
  using StepId = uint64_t;

  // Start: a thread with no steps yet (it sleeps until Add gives it some).
  // `index`: its number in its group, which picks its CPU when
  // options.cpus is set (options.h); InvalidArgumentError naming the CPU
  // when this process may not run there.
  static absl::StatusOr<std::unique_ptr<PollingThread>> Start(std::string name,
                                                              const PollingOptions& options,
                                                              uint32_t index = 0);
  // Start: a thread running one step: Start, then Add(wait_fds, step).
  static absl::StatusOr<std::unique_ptr<PollingThread>> Start(std::string name,
                                                              const PollingOptions& options,
                                                              std::vector<int> wait_fds,
                                                              StepFunction step);

  PollingThread(const PollingThread&) = delete;
  PollingThread& operator=(const PollingThread&) = delete;
  // Stops and joins.
  ~PollingThread();

  // Add: `step` joins the rotation from the next round on. `wait_fds` (-1
  // entries ignored) wake a sleeping thread when readable; they stay owned by
  // the caller and must stay open until Remove returns (or the thread stops).
  StepId Add(std::vector<int> wait_fds, StepFunction step);

  // Remove: takes step `id` out of the rotation; when it returns the thread
  // no longer runs it (nor polls its wait_fds) and never will, so what the
  // step uses may go. Waits for the round in progress at most. Unknown ids:
  // a no-op.
  void Remove(StepId id);

  // steps: steps added and not removed (where SharedIoThreads places a loop).
  size_t steps() const { return step_count_.load(std::memory_order_relaxed); }

  // Wake: new work is waiting; cuts a sleep short (a write to the doorbell
  // only when the thread sleeps or is about to).
  void Wake();

  // Stop: ends the loop after the current round and joins. Idempotent.
  void Stop();

  // IsCallingThread: the caller is this thread (one of its steps, or what a
  // step calls), where Remove and Stop would wait for themselves.
  bool IsCallingThread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // sleeps: how many times the thread slept (tests, statistics).
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  struct Step {
    StepId id;
    std::vector<int> wait_fds;
    StepFunction function;
  };

  PollingThread(std::string name, const PollingOptions& options, int doorbell_fd);

  void Run();
  // RunRound: every step once; the time of the last one in `now`.
  StepResult RunRound(TimePoint& now);
  // ApplyChangesLocked: under mu_, the thread between rounds (or anyone once it
  // stopped): adds and removes what Add and Remove handed over.
  void ApplyChangesLocked();
  void Sleep(TimeDelta at_most);

  const std::string name_;
  const PollingOptions options_;
  const int doorbell_fd_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<uint64_t> wake_seq_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::atomic<size_t> step_count_{0};

  // The thread's own (after it stopped: under mu_): the rotation and what
  // Sleep polls (the doorbell, then the steps' wait_fds).
  std::vector<Step> steps_;
  std::vector<pollfd> poll_fds_;

  // Changes handed over by Add and Remove. changed_: some are waiting (the
  // thread checks it once per round without the lock).
  std::mutex mu_;
  std::condition_variable applied_cv_;
  std::vector<Step> added_;         // under mu_
  std::vector<StepId> removed_;     // under mu_
  uint64_t applied_ = 0;            // under mu_: change sets applied so far
  bool stopped_ = false;            // under mu_: joined; changes apply at once
  StepId next_id_ = 1;              // under mu_
  std::atomic<bool> changed_{false};

  std::thread thread_;
};

}  // namespace atp::host

#endif  // ATP_LIB_HOST_POLLING_THREAD_H_
