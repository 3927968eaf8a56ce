// lib/host/worker_failure.h: a Worker's first failure, shared by its I/O
// loops and its API calls: the loop that detects a stall records it, every
// loop then finishes its operations with it, and every later call is refused
// with it (atp/failure.h). Thread-safe.
#ifndef ATP_LIB_HOST_WORKER_FAILURE_H_
#define ATP_LIB_HOST_WORKER_FAILURE_H_

#include <atomic>
#include <mutex>

#include "absl/status/status.h"

namespace atp::host {

class WorkerFailure {
 public:
  // Record: keeps `status` if it is the first failure; returns whether it was.
  bool Record(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load(std::memory_order_relaxed)) return false;
    first_ = status;
    failed_.store(true, std::memory_order_release);
    return true;
  }
  // failed: cheap (one atomic load): the I/O loops check it every step.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // first: the first failure; OK while none.
  absl::Status first() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_;
  }

 private:
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  absl::Status first_;  // under mu_
};

}  // namespace atp::host

#endif  // ATP_LIB_HOST_WORKER_FAILURE_H_
