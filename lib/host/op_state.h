// lib/host/op_state.h: the shared state behind a Handle: how many pieces
// of an operation are still running, its final status, and who waits.
//
// Created by the Worker at submission; the I/O threads that run its pieces
// call PieceDone or PieceFailed (the last one finishes the operation), and
// so does the Worker's shutdown, with CancelledError, for the pieces left.
// Waiters block on a condition variable.
#ifndef ATP_LIB_HOST_OP_STATE_H_
#define ATP_LIB_HOST_OP_STATE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "atp/handle.h"

namespace atp::internal {

class OpState {
 public:
  // `pieces`: how many PieceDone calls finish it (0: call Finish yourself).
  // `finished_counter`, if set, is incremented when it finishes.
  OpState(uint64_t id, uint32_t pieces,
          std::shared_ptr<std::atomic<uint64_t>> finished_counter = nullptr);

  OpState(const OpState&) = delete;
  OpState& operator=(const OpState&) = delete;

  uint64_t id() const { return id_; }

  // done: finished (acquire: the output written before is visible).
  bool done() const { return done_.load(std::memory_order_acquire); }

  // PieceDone: one piece finished and wrote its output. The last one finishes
  // the operation with OK (unless it already finished, e.g. cancelled).
  // Any thread.
  void PieceDone();

  // PieceFailed: one piece stopped without finishing its output (its queue
  // failed, or could not take it). The operation fails with the first such
  // status, but only when its last piece has stopped (done or failed): until
  // then another queue's I/O thread may still read the input or write the
  // output, which the caller may free as soon as Wait returns. Any thread.
  void PieceFailed(absl::Status status);

  // Finish: finishes with `status` if not finished yet; returns whether it
  // did. Wakes the waiters, then runs the OnFinish callback on this thread.
  // For an operation of no pieces (one the Worker finishes itself: an empty
  // PushPull, a Pull).
  bool Finish(absl::Status status);

  // status: the final status; UnavailableError while running.
  absl::Status status() const;

  // WaitUntil: see Handle::WaitUntil.
  absl::Status WaitUntil(absl::Time deadline) const;

  // OnFinish: runs `callback(final status)` once: now, on this thread, if the
  // operation has finished; else on the thread that finishes it, after the
  // waiters are woken and without any lock held. Several callbacks run in the
  // order they were added (the runtime's own, e.g. a Pull's copy, and one
  // from Handle::OnDone).
  void OnFinish(std::function<void(const absl::Status&)> callback);

  // set_keep_alive: memory the operation writes into (a Push's result
  // buffer), kept as long as the state lives.
  void set_keep_alive(std::shared_ptr<void> memory) { keep_alive_ = std::move(memory); }

 private:
  const uint64_t id_;
  std::atomic<uint32_t> pieces_left_;
  std::atomic<bool> done_{false};
  const std::shared_ptr<std::atomic<uint64_t>> finished_counter_;
  std::shared_ptr<void> keep_alive_;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool finished_ = false;  // under mu_; done_ follows it
  absl::Status status_;    // under mu_; immutable once done_
  absl::Status piece_failure_;  // under mu_: the first PieceFailed's status
  std::vector<std::function<void(const absl::Status&)>> on_finish_;  // under mu_
};

// HandleAccess: the runtime's way to make and open Handles.
class HandleAccess {
 public:
  static Handle Make(std::shared_ptr<OpState> state) { return Handle(std::move(state)); }
  static const std::shared_ptr<OpState>& State(const Handle& handle) { return handle.state_; }
};

}  // namespace atp::internal

#endif  // ATP_LIB_HOST_OP_STATE_H_
