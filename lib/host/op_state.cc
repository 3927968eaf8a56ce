#include "lib/host/op_state.h"

#include <chrono>
#include <utility>

namespace atp::internal {

OpState::OpState(uint64_t id, uint32_t pieces,
                 std::shared_ptr<std::atomic<uint64_t>> finished_counter)
    : id_(id), pieces_left_(pieces), finished_counter_(std::move(finished_counter)) {}

void OpState::PieceDone() {
  // acq_rel: the last piece sees every other piece's output writes (they
  // released with their decrement) and publishes them with done_.
  if (pieces_left_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = piece_failure_;
  }
  Finish(std::move(status));
}

void OpState::PieceFailed(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (piece_failure_.ok()) piece_failure_ = std::move(status);
  }
  PieceDone();
}

bool OpState::Finish(absl::Status status) {
  std::vector<std::function<void(const absl::Status&)>> callbacks;
  absl::Status final_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return false;
    finished_ = true;
    status_ = std::move(status);
    final_status = status_;
    callbacks.swap(on_finish_);
    // Counted before done_ is published and the lock released, so that
    // whoever sees the operation finished (a waiter, done()) also sees it
    // counted in the worker's stats.
    if (finished_counter_ != nullptr) finished_counter_->fetch_add(1, std::memory_order_relaxed);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  for (auto& callback : callbacks) callback(final_status);
  return true;
}

absl::Status OpState::status() const {
  if (!done()) return absl::UnavailableError("operation still running");
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

absl::Status OpState::WaitUntil(absl::Time deadline) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (!finished_) {
    if (deadline == absl::InfiniteFuture()) {
      cv_.wait(lock, [this] { return finished_; });
    } else if (deadline <= absl::Now() ||
               !cv_.wait_until(lock, absl::ToChronoTime(deadline), [this] { return finished_; })) {
      return absl::DeadlineExceededError("operation still running at the deadline");
    }
  }
  return status_;
}

void OpState::OnFinish(std::function<void(const absl::Status&)> callback) {
  absl::Status final_status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!finished_) {
      on_finish_.push_back(std::move(callback));
      return;
    }
    final_status = status_;
  }
  callback(final_status);
}

}  // namespace atp::internal

namespace atp {

bool Handle::Poll() const { return state_ == nullptr || state_->done(); }

absl::Status Handle::Wait(absl::Duration timeout) const {
  if (state_ == nullptr) return absl::FailedPreconditionError("invalid Handle");
  if (timeout == absl::InfiniteDuration()) return state_->WaitUntil(absl::InfiniteFuture());
  return state_->WaitUntil(absl::Now() + timeout);
}

absl::Status Handle::WaitUntil(absl::Time deadline) const {
  if (state_ == nullptr) return absl::FailedPreconditionError("invalid Handle");
  return state_->WaitUntil(deadline);
}

absl::Status Handle::status() const {
  if (state_ == nullptr) return absl::FailedPreconditionError("invalid Handle");
  return state_->status();
}

void Handle::OnDone(std::function<void(const absl::Status&)> callback) const {
  if (state_ == nullptr) {
    callback(absl::FailedPreconditionError("invalid Handle"));
    return;
  }
  state_->OnFinish(std::move(callback));
}

uint64_t Handle::id() const { return state_ == nullptr ? 0 : state_->id(); }

absl::Status WaitAll(std::span<const Handle> handles, absl::Time deadline) {
  absl::Status first_error;
  for (const Handle& handle : handles) {
    absl::Status status = handle.WaitUntil(deadline);
    if (absl::IsDeadlineExceeded(status) && !handle.Poll()) return status;
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  return first_error;
}

}  // namespace atp
