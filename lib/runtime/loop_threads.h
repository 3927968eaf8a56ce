// lib/runtime/loop_threads.h: where an endpoint's I/O loops run: a
// PollingThread of its own per loop (the default), or a place on a
// SharedIoThreads group's least busy thread (atp/shared_io_threads.h).
//
//   LoopThreads threads(options.shared_io_threads, options.polling);
//   ATP_RETURN_IF_ERROR(threads.Run("atp-w0-q0", {loop->wait_fd()},
//                                   [loop](TimePoint now) { return loop->Step(now); }));
//   threads.Wake(0);    // loop 0 has new work
//   threads.StopAll();  // no loop's step runs any more
//
// Threads: Run, StopAll and the destructor on the endpoint's owning thread;
// Wake from any thread while the loops run (between Run and StopAll).
#ifndef ATP_LIB_RUNTIME_LOOP_THREADS_H_
#define ATP_LIB_RUNTIME_LOOP_THREADS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "atp/options.h"
#include "atp/shared_io_threads.h"
#include "lib/host/polling_thread.h"

namespace atp {

// SharedIoThreads::Threads: the group's threads and its placement rule.
struct SharedIoThreads::Threads {
  std::vector<std::unique_ptr<host::PollingThread>> all;

  // LeastBusy: the thread running the fewest steps (ties: the lowest index).
  // Concurrent placements may both pick one thread: only the balance suffers.
  host::PollingThread& LeastBusy();
};

namespace internal {

class LoopThreads {
 public:
  // `shared` null: a thread of its own per loop, backing off as `polling` says.
  LoopThreads(std::shared_ptr<SharedIoThreads> shared, const PollingOptions& polling);
  LoopThreads(const LoopThreads&) = delete;
  LoopThreads& operator=(const LoopThreads&) = delete;
  ~LoopThreads() { StopAll(); }

  // Run: loop number size() starts running `step`; `name` names its own
  // thread (unused with shared threads). wait_fds as PollingThread::Add.
  absl::Status Run(std::string name, std::vector<int> wait_fds,
                   host::PollingThread::StepFunction step);

  // Wake: loop `loop` has new work.
  void Wake(size_t loop) { placed_[loop].thread->Wake(); }

  // StopAll: when it returns, no loop's step runs nor ever will. Idempotent.
  // Not from a step of these threads (RunsOnCallingThread): it would wait
  // for itself.
  void StopAll();

  // RunsOnCallingThread: one of the loops runs on the calling thread (a
  // completion callback of this Worker, or of another sharing its threads).
  bool RunsOnCallingThread() const;

  size_t size() const { return placed_.size(); }

 private:
  struct Placed {
    host::PollingThread* thread;
    host::PollingThread::StepId step;
  };

  const std::shared_ptr<SharedIoThreads> shared_;
  const PollingOptions polling_;
  std::vector<std::unique_ptr<host::PollingThread>> own_;  // empty with shared threads
  std::vector<Placed> placed_;                             // one per loop
};

}  // namespace internal
}  // namespace atp

#endif  // ATP_LIB_RUNTIME_LOOP_THREADS_H_
