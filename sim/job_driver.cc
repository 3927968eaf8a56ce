#include "sim/job_driver.h"

#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace atp::sim {
namespace {

// FillWithNan: every value a quiet NaN, in blocks of fixed length (which the
// compiler vectorizes at -O2; std::fill it does not).
void FillWithNan(std::span<float> values) {
  constexpr size_t kBlock = 8;
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  size_t i = 0;
  for (; i + kBlock <= values.size(); i += kBlock) {
    for (size_t k = 0; k < kBlock; ++k) values[i + k] = kNan;
  }
  for (; i < values.size(); ++i) values[i] = kNan;
}

}  // namespace

JobDriver::JobDriver(TaskThread* tasks, const JobNodes& job, const WorkloadConfig& workload,
                     bool partitioned, std::function<void()> on_done)
    : tasks_(tasks),
      job_(job),
      random_(Random::DeriveSeed(workload.seed, 0x6a17'7e00ull + job.shape.job)),
      workload_(workload),
      partitioned_(partitioned),
      on_done_(std::move(on_done)) {
  workers_.resize(job.workers.size());
  const size_t n = workload.values;
  for (size_t w = 0; w < workers_.size(); ++w) {
    workers_[w].node = job.workers[w];
    WorkerState& worker = workers_[w];
    worker.values = std::make_unique_for_overwrite<float[]>(3 * n);
    worker.inputs[0] = {worker.values.get(), n};
    worker.inputs[1] = {worker.values.get() + n, n};
    worker.output = {worker.values.get() + 2 * n, n};
    // Touch every page now, while the experiment is set up, not in its run.
    FillWithNan({worker.values.get(), 3 * n});
    const int index = static_cast<int>(w);
    worker.node->SetCompletionCallback(
        [this, index](WorkerNode&, uint64_t, TimePoint now) { OnComplete(index, now); });
    worker.start_alarm = std::make_unique<Alarm>(worker.node->sim(), [this, index](TimePoint) {
      std::lock_guard<std::mutex> lock(mutex_);
      StartIteration(index);
    });
    if (partitioned_) {
      worker.jitter = std::make_unique<Random>(Random::DeriveSeed(
          workload.seed, (0x6a17'7e01ull + job.shape.job) << 16 | static_cast<uint64_t>(w)));
    }
  }
  if (workload_.iterations > 0) {
    for (size_t w = 0; w < workers_.size(); ++w) PrepareInput(static_cast<int>(w), 0);
  }
}

JobDriver::~JobDriver() {
  for (WorkerState& worker : workers_) tasks_->Cancel(worker.input_ready);
}

void JobDriver::AwaitFirstInputs() {
  for (WorkerState& worker : workers_) {
    if (worker.iteration == 0) tasks_->Wait(worker.input_ready);
  }
}

void JobDriver::Start() { Begin(job_.start_time, /*on_alarms=*/false); }

void JobDriver::StartAt(TimePoint start) { Begin(start, /*on_alarms=*/true); }

void JobDriver::Begin(TimePoint start, bool on_alarms) {
  std::unique_lock<std::mutex> lock(mutex_);
  start_time_ = start;
  if (workload_.iterations <= 0) {
    workers_done_ = static_cast<int>(workers_.size());
    finish_time_ = start_time_;
    lock.unlock();
    if (on_done_) on_done_();
    return;
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    const int index = static_cast<int>(w);
    if (on_alarms) {
      workers_[w].start_alarm->Set(start + JitterDelay(index));
    } else {
      NextIteration(index);
    }
  }
}

TimeDelta JobDriver::JitterDelay(int index_in_job) {
  const int64_t jitter = workload_.start_jitter.ToNanoseconds();
  if (jitter <= 0) return TimeDelta::Zero();
  Random& random = partitioned_ ? *workers_[static_cast<size_t>(index_in_job)].jitter : random_;
  return TimeDelta::FromNanoseconds(
      static_cast<int64_t>(random.Below(static_cast<uint64_t>(jitter))));
}

void JobDriver::NextIteration(int index_in_job) {
  if (workload_.start_jitter <= TimeDelta::Zero()) {
    StartIteration(index_in_job);
    return;
  }
  WorkerState& worker = workers_[static_cast<size_t>(index_in_job)];
  worker.start_alarm->Set(worker.node->sim()->Now() + JitterDelay(index_in_job));
}

JobDriver::IterationCheck& JobDriver::CheckFor(int iteration) {
  IterationCheck& check = checks_[iteration];
  if (!check.expected) {
    if (spare_.empty()) {
      check.expected =
          std::make_unique<ExpectedResult>(workload_, static_cast<int>(workers_.size()));
    } else {
      check.expected = std::move(spare_.back());
      spare_.pop_back();
      check.expected->Reset();
    }
  }
  return check;
}

void JobDriver::Fail(TimePoint now, int index_in_job, std::string message) {
  ++mismatches_;
  const std::pair<TimePoint, int> at{now, index_in_job};
  if (first_error_.empty() || at < first_error_at_) {
    first_error_ = std::move(message);
    first_error_at_ = at;
  }
}

void JobDriver::PrepareInput(int index_in_job, int iteration) {
  WorkerState& worker = workers_[static_cast<size_t>(index_in_job)];
  ExpectedResult* expected = CheckFor(iteration).expected.get();
  const std::span<float> input = worker.inputs[iteration % 2];
  const int workers = static_cast<int>(workers_.size());
  worker.input_ready = tasks_->Post([this, expected, input, index_in_job, iteration, workers] {
    FillInput(workload_, job_.shape.job, index_in_job, workers, iteration, input);
    std::lock_guard<std::mutex> lock(add_mutex_);
    expected->Add(index_in_job, input);
    if (expected->added() == workers) expected->Finish();
  });
}

void JobDriver::StartIteration(int index_in_job) {
  WorkerState& worker = workers_[static_cast<size_t>(index_in_job)];
  const int iteration = worker.iteration;
  tasks_->Wait(worker.input_ready);
  worker.input_ready = 0;
  ++CheckFor(iteration).started;
  if (iteration + 1 < workload_.iterations) PrepareInput(index_in_job, iteration + 1);
  // A pattern no correct result has, so a value the engine never wrote shows.
  FillWithNan(worker.output);
  absl::StatusOr<uint64_t> op = worker.node->Start(worker.inputs[iteration % 2], worker.output);
  if (!op.ok()) {
    Fail(worker.node->sim()->Now(), index_in_job, std::string(op.status().message()));
  }
}

void JobDriver::OnComplete(int index_in_job, TimePoint now) {
  std::unique_lock<std::mutex> lock(mutex_);
  WorkerState& worker = workers_[static_cast<size_t>(index_in_job)];
  const int iteration = worker.iteration;
  const int workers = static_cast<int>(workers_.size());
  IterationCheck& check = CheckFor(iteration);
  ++results_checked_;
  std::string why;
  if (check.started != workers) {
    Fail(now, index_in_job,
         absl::StrCat("job ", +job_.shape.job, " worker ", index_in_job, " completed iteration ",
                      iteration, " before every worker had started it"));
  } else if (!check.expected->Check(worker.output, &why)) {
    Fail(now, index_in_job,
         absl::StrCat("job ", +job_.shape.job, " worker ", index_in_job, " iteration ", iteration,
                      ": ", why));
  }
  // Every worker is checked against the same exact answer: identical everywhere.
  if (++check.checked == workers) {
    spare_.push_back(std::move(check.expected));
    checks_.erase(iteration);
  }

  if (++worker.iteration < workload_.iterations) {
    NextIteration(index_in_job);
    return;
  }
  // With two partitions the last worker to finish in wall time need not be
  // the last in simulated time.
  last_finish_ = std::max(last_finish_, now);
  if (workers_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == workers) {
    finish_time_ = last_finish_;
    lock.unlock();
    if (on_done_) on_done_();
  }
}

}  // namespace atp::sim
