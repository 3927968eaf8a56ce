#include "lib/host/polling_thread.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "lib/host/adaptive_backoff.h"
#include "lib/host/clock.h"
#include "lib/host/thread_affinity.h"

namespace atp::host {

absl::StatusOr<std::unique_ptr<PollingThread>> PollingThread::Start(std::string name,
                                                                    const PollingOptions& options,
                                                                    uint32_t index) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  const int doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (doorbell < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  std::unique_ptr<PollingThread> thread(new PollingThread(std::move(name), options, doorbell));
  thread->thread_ = std::thread([t = thread.get()] { t->Run(); });
  if (!options.cpus.empty()) {
    // From the starting thread, so that a failure is this call's error (the
    // thread, stopped by its destructor, had no steps yet).
    const int cpu = options.cpus[index % options.cpus.size()];
    ATP_RETURN_IF_ERROR(PinThread(thread->thread_, cpu, "PollingOptions.cpus"));
  }
  return thread;
}

absl::StatusOr<std::unique_ptr<PollingThread>> PollingThread::Start(std::string name,
                                                                    const PollingOptions& options,
                                                                    std::vector<int> wait_fds,
                                                                    StepFunction step) {
  absl::StatusOr<std::unique_ptr<PollingThread>> thread = Start(std::move(name), options);
  if (thread.ok()) (*thread)->Add(std::move(wait_fds), std::move(step));
  return thread;
}

PollingThread::PollingThread(std::string name, const PollingOptions& options, int doorbell_fd)
    : name_(std::move(name)), options_(options), doorbell_fd_(doorbell_fd) {
  poll_fds_.push_back(pollfd{doorbell_fd_, POLLIN, 0});
}

PollingThread::~PollingThread() {
  Stop();
  close(doorbell_fd_);
}

PollingThread::StepId PollingThread::Add(std::vector<int> wait_fds, StepFunction step) {
  wait_fds.erase(std::remove(wait_fds.begin(), wait_fds.end(), -1), wait_fds.end());
  StepId id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    added_.push_back(Step{id, std::move(wait_fds), std::move(step)});
    step_count_.fetch_add(1, std::memory_order_relaxed);
    if (stopped_) {
      ApplyChangesLocked();
      return id;
    }
    changed_.store(true, std::memory_order_release);
  }
  Wake();
  return id;
}

void PollingThread::Remove(StepId id) {
  std::unique_lock<std::mutex> lock(mu_);
  removed_.push_back(id);
  if (stopped_) {
    ApplyChangesLocked();
    return;
  }
  changed_.store(true, std::memory_order_release);
  // The thread applies every change handed over so far at its next
  // ApplyChangesLocked, which counts as applied_ + 1.
  const uint64_t target = applied_ + 1;
  lock.unlock();
  Wake();
  lock.lock();
  applied_cv_.wait(lock, [&] { return applied_ >= target || stopped_; });
  if (stopped_) ApplyChangesLocked();  // Stop ran first: apply it here
}

void PollingThread::ApplyChangesLocked() {
  changed_.store(false, std::memory_order_relaxed);
  for (Step& step : added_) steps_.push_back(std::move(step));
  added_.clear();
  for (StepId id : removed_) {
    const auto it =
        std::find_if(steps_.begin(), steps_.end(), [id](const Step& s) { return s.id == id; });
    if (it == steps_.end()) continue;
    steps_.erase(it);
    step_count_.fetch_sub(1, std::memory_order_relaxed);
  }
  removed_.clear();
  poll_fds_.resize(1);  // the doorbell
  for (const Step& step : steps_) {
    for (int fd : step.wait_fds) poll_fds_.push_back(pollfd{fd, POLLIN, 0});
  }
  ++applied_;
  applied_cv_.notify_all();
}

void PollingThread::Wake() {
  // seq_cst pairs with Run(): either the thread sees the new wake_seq_ before
  // it sleeps, or this sees sleeping_ and rings the doorbell.
  wake_seq_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(doorbell_fd_, &one, sizeof(one));
  }
}

void PollingThread::Stop() {
  stop_.store(true, std::memory_order_release);
  Wake();
  if (thread_.joinable()) thread_.join();
  // From here on the step list is whoever holds mu_'s; a Remove waiting for
  // a round that will never come applies its change itself.
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  applied_cv_.notify_all();
}

StepResult PollingThread::RunRound(TimePoint& now) {
  StepResult round;
  // Each step gets a fresh reading; `now` ends as the last one (the caller
  // compares the round's deadline with it), or one of its own if no step ran.
  if (steps_.empty()) now = MonotonicNow();
  for (Step& step : steps_) {
    now = MonotonicNow();
    const StepResult result = step.function(now);
    round.did_work = round.did_work || result.did_work;
    round.deadline = std::min(round.deadline, result.deadline);
  }
  return round;
}

void PollingThread::Run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  AdaptiveBackoff backoff(options_);
  while (!stop_.load(std::memory_order_acquire)) {
    // `seen` before the look at changed_: an Add between the two would
    // otherwise bump wake_seq_ into `seen` with its step not yet applied,
    // and the round below would sleep through it (a lost wake-up).
    const uint64_t seen = wake_seq_.load(std::memory_order_seq_cst);
    if (changed_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mu_);
      ApplyChangesLocked();
    }
    TimePoint now;
    const StepResult result = RunRound(now);
    if (result.did_work || result.deadline <= now) {
      backoff.OnWork();
      continue;
    }
    switch (backoff.OnIdle()) {
      case AdaptiveBackoff::Action::kSpin:
        CpuRelax();
        break;
      case AdaptiveBackoff::Action::kYield:
        sched_yield();
        break;
      case AdaptiveBackoff::Action::kSleep: {
        sleeping_.store(true, std::memory_order_seq_cst);
        if (wake_seq_.load(std::memory_order_seq_cst) == seen &&
            !stop_.load(std::memory_order_acquire)) {
          const TimeDelta until_deadline =
              result.deadline.IsInfinite() ? TimeDelta::Infinite() : result.deadline - now;
          Sleep(std::min(backoff.sleep(), until_deadline));
        } else {
          backoff.OnWork();  // new work (or a change of steps) arrived: look at it at once
        }
        sleeping_.store(false, std::memory_order_relaxed);
        break;
      }
    }
  }
}

void SleepUntilReadable(std::span<pollfd> fds, TimeDelta at_most) {
  const int64_t ns = std::max<int64_t>(at_most.ToNanoseconds(), 0);
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
    return;
  }
  const timespec timeout{static_cast<time_t>(ns / 1'000'000'000),
                         static_cast<long>(ns % 1'000'000'000)};
  ppoll(fds.data(), fds.size(), &timeout, nullptr);
}

void PollingThread::Sleep(TimeDelta at_most) {
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  SleepUntilReadable(std::span<pollfd>(poll_fds_), at_most);
  if ((poll_fds_[0].revents & POLLIN) != 0) {
    uint64_t count;
    [[maybe_unused]] ssize_t r = read(doorbell_fd_, &count, sizeof(count));
  }
}

}  // namespace atp::host
