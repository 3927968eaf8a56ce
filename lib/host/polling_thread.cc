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
#include "lib/host/adaptive_backoff.h"
#include "lib/host/clock.h"

namespace atp::host {

absl::StatusOr<std::unique_ptr<PollingThread>> PollingThread::Start(std::string name,
                                                                    const PollingOptions& options,
                                                                    std::vector<int> wait_fds,
                                                                    StepFunction step) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  const int doorbell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (doorbell < 0) {
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  wait_fds.erase(std::remove(wait_fds.begin(), wait_fds.end(), -1), wait_fds.end());
  std::unique_ptr<PollingThread> thread(new PollingThread(
      std::move(name), options, std::move(wait_fds), std::move(step), doorbell));
  thread->thread_ = std::thread([t = thread.get()] { t->Run(); });
  return thread;
}

PollingThread::PollingThread(std::string name, const PollingOptions& options,
                             std::vector<int> wait_fds, StepFunction step, int doorbell_fd)
    : name_(std::move(name)),
      options_(options),
      wait_fds_(std::move(wait_fds)),
      step_(std::move(step)),
      doorbell_fd_(doorbell_fd) {}

PollingThread::~PollingThread() {
  Stop();
  close(doorbell_fd_);
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
}

void PollingThread::Run() {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  AdaptiveBackoff backoff(options_);
  while (!stop_.load(std::memory_order_acquire)) {
    const uint64_t seen = wake_seq_.load(std::memory_order_seq_cst);
    const TimePoint now = MonotonicNow();
    const StepResult result = step_(now);
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
          backoff.OnWork();  // new work arrived: look at it at once
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
  pollfd fds[1 + 16];
  size_t n = 0;
  fds[n++] = pollfd{doorbell_fd_, POLLIN, 0};
  for (int fd : wait_fds_) {
    if (n == sizeof(fds) / sizeof(fds[0])) break;
    fds[n++] = pollfd{fd, POLLIN, 0};
  }
  SleepUntilReadable(std::span<pollfd>(fds, n), at_most);
  if ((fds[0].revents & POLLIN) != 0) {
    uint64_t count;
    [[maybe_unused]] ssize_t r = read(doorbell_fd_, &count, sizeof(count));
  }
}

}  // namespace atp::host
