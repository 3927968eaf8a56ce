// atp/handle.h: a handle on one asynchronous operation of a Worker (Push,
// Pull, PushPull). Wait on it with a deadline, or poll it.
//
//   ATP_ASSIGN_OR_RETURN(atp::Handle h, worker->PushPull(grad, sum));
//   ... other work ...
//   ATP_RETURN_IF_ERROR(h.Wait(absl::Seconds(5)));   // `sum` is complete
//
// A Handle is a cheap, copyable reference to shared state: copies see the same
// operation, and the operation runs whether or not a handle still exists.
// Every method may be called from any thread, concurrently.
#ifndef ATP_HANDLE_H_
#define ATP_HANDLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace atp {

namespace internal {
class OpState;
class HandleAccess;
}  // namespace internal

class Handle {
 public:
  // A default-constructed handle is not valid(): it names no operation; its
  // Poll() is true and its status is FailedPreconditionError.
  Handle() = default;

  // valid: the handle names an operation.
  bool valid() const { return state_ != nullptr; }

  // Poll: the operation has finished (successfully or not). Never blocks.
  // After it returns true, the operation's output is complete and status()
  // is final.
  bool Poll() const;

  // Wait / WaitUntil: blocks until the operation finishes or the deadline
  // passes. Returns the operation's status once it has finished, or
  // DeadlineExceededError when it has not (the operation goes on: wait again
  // or poll later). A zero or past deadline polls.
  absl::Status Wait(absl::Duration timeout) const;
  absl::Status WaitUntil(absl::Time deadline) const;

  // status: the final status once Poll() is true; UnavailableError while the
  // operation is still running.
  absl::Status status() const;

  // OnDone: runs `callback(final status)` once when the operation finishes:
  // at once, on the calling thread, if it already has; else on the thread
  // that finishes it (one of the Worker's I/O threads, or the thread
  // destroying the Worker, with CancelledError), after Wait() callers are
  // woken and with no lock held, so the output is complete when it runs.
  // Meant for frameworks that complete their own futures (the PyTorch hook
  // and backend): keep it short, it delays that I/O thread's other work,
  // never wait on a Handle of the same Worker inside it, and never destroy
  // the Worker (or one sharing its I/O threads) inside it: that aborts the
  // process with a message, as the destruction would wait for itself. Several callbacks
  // per operation are allowed; they run in the order added. An invalid
  // handle calls it at once with FailedPreconditionError.
  void OnDone(std::function<void(const absl::Status&)> callback) const;

  // id: the operation's number on its Worker (1, 2, ... in call order; Pull
  // operations are numbered too). 0 for an invalid handle.
  uint64_t id() const;

 private:
  friend class internal::HandleAccess;
  explicit Handle(std::shared_ptr<internal::OpState> state) : state_(std::move(state)) {}

  std::shared_ptr<internal::OpState> state_;
};

// WaitAll: waits for every handle until `deadline`. Returns
// DeadlineExceededError if one is still running at the deadline, else the
// first non-OK status among the handles in order, else OK.
absl::Status WaitAll(std::span<const Handle> handles, absl::Time deadline);

}  // namespace atp

#endif  // ATP_HANDLE_H_
