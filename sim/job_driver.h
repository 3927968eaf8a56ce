// sim/job_driver.h: runs one job's training loop on its worker nodes and
// checks every result.
//
// Each worker runs `iterations` allreduce operations back to back: when one
// completes, the driver checks the output against the iteration's
// ExpectedResult, then starts the next iteration with its next input. A
// worker never waits for the others between iterations, as in data-parallel
// training with ATP's push-pull.
//
// Inputs are made one iteration ahead, on the TaskThread: the first
// iteration's when the driver is built, the next one's when a worker starts
// an iteration, each added to its iteration's ExpectedResult as it is made.
// A worker's input is a function of (seed, job, worker, iteration), so the
// run is the same with or without the helper thread. No worker can complete
// an iteration before every worker has started it (and so before every input
// was added): the driver reports it if one does.
//
// A job's workers may live in two partitions of the network, run by two
// threads (network.h): each worker's alarms use its own partition's clock,
// the shared state is behind a mutex, and with `partitioned` each worker
// draws its start jitter from a stream of its own (the order in which
// workers of two threads draw from one would vary from run to run).
#ifndef ATP_SIM_JOB_DRIVER_H_
#define ATP_SIM_JOB_DRIVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "atp/time.h"
#include "sim/alarm.h"
#include "sim/network.h"
#include "sim/random.h"
#include "sim/task_thread.h"
#include "sim/workload.h"

namespace atp::sim {

class JobDriver {
 public:
  // `tasks`, `job` and the nodes it names outlive the driver. `on_done` is
  // called once, when every worker has finished every iteration (on the
  // thread of the worker that finished last). Posts the first iteration's
  // inputs to `tasks`. `partitioned`: the job's workers may run on two
  // threads (see above).
  JobDriver(TaskThread* tasks, const JobNodes& job, const WorkloadConfig& workload,
            bool partitioned, std::function<void()> on_done);
  // Cancels the inputs still being made.
  ~JobDriver();

  // AwaitFirstInputs: returns once every worker's first input is made and
  // added (this thread helps). Optional: Start waits for each as needed.
  void AwaitFirstInputs();

  // Start: starts every worker's first iteration (call at the job's start
  // time, from an event). Not with `partitioned`: StartAt.
  void Start();
  // StartAt: sets every worker's first iteration to start at `start` (plus
  // its jitter), each on its own partition's clock; call before the run.
  void StartAt(TimePoint start);

  bool done() const {
    return workers_done_.load(std::memory_order_acquire) == static_cast<int>(workers_.size());
  }
  TimePoint start_time() const { return start_time_; }
  TimePoint finish_time() const { return finish_time_; }
  // exact: every result checked so far was exactly right and identical on
  // every worker.
  bool exact() const { return mismatches_ == 0; }
  uint64_t results_checked() const { return results_checked_; }
  const std::string& first_error() const { return first_error_; }

 private:
  struct WorkerState {
    WorkerNode* node = nullptr;
    // inputs[iteration % 2] and output: thirds of `values` (NaN until
    // FillInput writes an input and StartIteration poisons the output). The
    // node reads inputs[i % 2] while iteration i runs; the TaskThread writes
    // the other one meanwhile.
    std::unique_ptr<float[]> values;
    std::span<float> inputs[2];
    std::span<float> output;
    TaskThread::Ticket input_ready = 0;  // the next input's task (0: none)
    int iteration = 0;  // the iteration running (== iterations when finished)
    std::unique_ptr<Alarm> start_alarm;  // WorkloadConfig::start_jitter
    std::unique_ptr<Random> jitter;      // partitioned: this worker's own stream
  };
  struct IterationCheck {
    std::unique_ptr<ExpectedResult> expected;
    int started = 0;  // workers that started the iteration
    int checked = 0;
  };
  IterationCheck& CheckFor(int iteration);

  // PrepareInput: posts the task that makes the worker's input of
  // `iteration` and adds it to the iteration's ExpectedResult.
  void PrepareInput(int index_in_job, int iteration);

  // Begin: Start (on_alarms false: now, from an event) and StartAt.
  void Begin(TimePoint start, bool on_alarms);
  // The rest holds mutex_.
  // JitterDelay: the worker's next start delay (WorkloadConfig::start_jitter).
  TimeDelta JitterDelay(int index_in_job);
  // NextIteration: starts the worker's next iteration, after its jitter.
  void NextIteration(int index_in_job);
  void StartIteration(int index_in_job);
  void OnComplete(int index_in_job, TimePoint now);
  // Fail: records a wrong result; the earliest (time, worker) is first_error.
  void Fail(TimePoint now, int index_in_job, std::string message);

  TaskThread* tasks_;
  const JobNodes& job_;
  Random random_;  // start jitter of every worker, without `partitioned`
  WorkloadConfig workload_;
  bool partitioned_;
  std::function<void()> on_done_;
  std::vector<WorkerState> workers_;
  std::map<int, IterationCheck> checks_;  // live iterations only
  std::vector<std::unique_ptr<ExpectedResult>> spare_;  // recycled
  // Serializes ExpectedResult::Add (and Finish) between the threads that
  // make inputs (the TaskThread's helper, the partitions' threads).
  std::mutex add_mutex_;
  // mutex_: what the workers of both partitions share: everything here but
  // the WorkerStates' own fields, read by one thread each. After a run,
  // reads need no lock.
  std::mutex mutex_;
  std::atomic<int> workers_done_{0};
  TimePoint start_time_;
  TimePoint last_finish_;  // the latest last result so far
  TimePoint finish_time_ = TimePoint::Infinite();
  uint64_t results_checked_ = 0;
  uint64_t mismatches_ = 0;
  std::string first_error_;
  std::pair<TimePoint, int> first_error_at_{TimePoint::Infinite(), 0};
};

}  // namespace atp::sim

#endif  // ATP_SIM_JOB_DRIVER_H_
