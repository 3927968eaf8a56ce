// sim/job_driver.h: runs one job's training loop on its worker nodes and
// checks every result.
//
// Each worker runs `iterations` allreduce operations back to back: when one
// completes, the driver checks the output against the iteration's
// ExpectedResult, then refills the input for the next iteration and starts it.
// The ExpectedResult accumulates each worker's input as the worker starts the
// iteration: no worker can complete it before every worker has started it,
// so the answer is always ready in time (the driver reports it if not). A worker never waits for the others between
// iterations, as in data-parallel training with ATP's push-pull.
#ifndef ATP_SIM_JOB_DRIVER_H_
#define ATP_SIM_JOB_DRIVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "atp/time.h"
#include "sim/alarm.h"
#include "sim/network.h"
#include "sim/random.h"
#include "sim/workload.h"

namespace atp::sim {

class JobDriver {
 public:
  // `sim`, `job` and the nodes it names outlive the driver. `on_done` is
  // called once, when every worker has finished every iteration.
  JobDriver(Simulator* sim, const JobNodes& job, const WorkloadConfig& workload,
            std::function<void()> on_done);

  // Start: starts every worker's first iteration (call at the job's start time).
  void Start();

  bool done() const { return workers_done_ == static_cast<int>(workers_.size()); }
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
    // input and output: halves of `values` (NaN until FillInput writes the
    // input and StartIteration poisons the output).
    std::unique_ptr<float[]> values;
    std::span<float> input;
    std::span<float> output;
    int iteration = 0;  // the iteration running (== iterations when finished)
    std::unique_ptr<Alarm> start_alarm;  // WorkloadConfig::start_jitter
  };
  struct IterationCheck {
    std::unique_ptr<ExpectedResult> expected;
    int checked = 0;
  };
  IterationCheck& CheckFor(int iteration);

  // NextIteration: starts the worker's next iteration, after its jitter.
  void NextIteration(int index_in_job);
  void StartIteration(int index_in_job);
  void OnComplete(int index_in_job, TimePoint now);
  void Fail(std::string message);

  Simulator* sim_;
  const JobNodes& job_;
  Random random_;  // start jitter
  WorkloadConfig workload_;
  std::function<void()> on_done_;
  std::vector<WorkerState> workers_;
  std::map<int, IterationCheck> checks_;  // live iterations only
  std::vector<std::unique_ptr<ExpectedResult>> spare_;  // recycled
  int workers_done_ = 0;
  TimePoint start_time_;
  TimePoint finish_time_ = TimePoint::Infinite();
  uint64_t results_checked_ = 0;
  uint64_t mismatches_ = 0;
  std::string first_error_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_JOB_DRIVER_H_
