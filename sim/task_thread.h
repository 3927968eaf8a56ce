// sim/task_thread.h: a second thread for harness work that the simulation
// will need later but that does not depend on it: a job's next inputs and
// their exact sum (JobDriver). The simulation thread posts a task early and
// waits for it when it needs the result, so the two cores share the work and
// the simulation thread spends its time on frames.
//
// Determinism: a task must depend only on what it was posted with and write
// only memory that nothing else reads or writes until Wait (or Cancel)
// returns. Then the thread that runs it does not matter: same bits.
//
// Without a thread (threaded = false) a task runs inside Wait, on the
// caller's thread, when it is needed: the simulator's order before this
// class existed.
//
//   TaskThread tasks(/*threaded=*/true);
//   TaskThread::Ticket next = tasks.Post([&] { FillInput(..., next_input); });
//   ...                    // simulate; the helper fills next_input meanwhile
//   tasks.Wait(next);      // runs it here if the helper has not started it
//
// Thread safety: Post, Wait and Cancel may be called from any thread (a
// ticket posted by one may be waited for by another: JobDriver posts a
// worker's first input on the thread that builds it and waits for it on
// the worker's partition's thread, sim/network.h); the helper only runs
// tasks.
#ifndef ATP_SIM_TASK_THREAD_H_
#define ATP_SIM_TASK_THREAD_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace atp::sim {

class TaskThread {
 public:
  // Ticket: names a posted task; 0 names none (Wait and Cancel ignore it).
  using Ticket = uint64_t;

  explicit TaskThread(bool threaded);
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;
  // Drops the queued tasks, waits for a running one, joins the helper.
  ~TaskThread();

  bool threaded() const { return helper_.joinable(); }

  // Post: queues `task` (FIFO) for the helper. Never returns 0.
  Ticket Post(std::function<void()> task);

  // Wait: returns once the task has run. A task still queued runs here; while
  // the helper runs it, this thread runs other queued tasks (oldest first)
  // instead of idling, and sleeps only when none is left.
  void Wait(Ticket ticket);

  // Cancel: the task will not run and is not running when this returns (a
  // queued task is dropped; a running one is waited for).
  void Cancel(Ticket ticket);

 private:
  struct Task {
    Ticket ticket;
    std::function<void()> run;
  };

  void HelperLoop();
  // TakeLocked: removes `ticket` from the queue into *task; false if it is
  // not queued.
  bool TakeLocked(Ticket ticket, Task* task);
  // RunUnlocked: runs `task` with the mutex released, marked running meanwhile.
  void RunUnlocked(Task& task, std::unique_lock<std::mutex>& lock);
  bool RunningLocked(Ticket ticket) const;

  std::mutex mutex_;
  std::condition_variable changed_;  // a task finished, was posted, or stop
  std::deque<Task> queued_;          // in ticket order
  std::vector<Ticket> running_;      // one per thread running a task
  Ticket next_ticket_ = 1;
  bool stopping_ = false;
  std::thread helper_;  // last: started once everything above exists
};

}  // namespace atp::sim

#endif  // ATP_SIM_TASK_THREAD_H_
