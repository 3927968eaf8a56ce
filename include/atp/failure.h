// atp/failure.h: why an operation failed, for the application to act on.
//
// An aggregating operation that makes no progress for JobOptions::stall_timeout
// fails with a status whose message says what happened and which carries a
// structured Failure (an absl::Status payload), read with FailureOf:
//
//   absl::Status s = handle.Wait(absl::Minutes(1));
//   if (std::optional<atp::Failure> f = atp::FailureOf(s)) {
//     if (f->kind == atp::FailureKind::kWaitingForWorkers) restart_workers(f->workers);
//   }
//
// | kind | status code | what it means |
// |---|---|---|
// | kPsUnreachable | Unavailable | no frame at all (parameter packet or control frame) from the queue's parameter server during the stall |
// | kWaitingForWorkers | Aborted | the PS reported that the stalled fragment waits for `workers` (global, rack-major indices), which never contributed: dead, stuck or not issuing the operation |
// | kStalled | Aborted | the PS answers but completed nothing and named no one (e.g. it counts the frames as stale or ahead, or the job skips contributions: docs/skipreduce.md) |
// | kPsRestarted | Aborted | the PS restarted and said it cannot rebuild the queue (status "restart unrecoverable"; reported at once). No PS of this version sends it: a restarted PS replays the results only some workers got, also those that reached a worker after its join (docs/protocol.md "Runs and restarts"); what it cannot recover (a worker restarted alone) stalls as kWaitingForWorkers |
// | kMismatch | FailedPrecondition | worker `workers[0]` disagrees with the job on `detail`: slots, layout, io_threads, scale (its configuration) or operation_size, operation_pieces (an operation); reported at once by the PS, and no result of that operation is delivered |
//
// After any of these the Worker is unusable: the queues' fragment streams no
// longer agree with the PS's, so every operation still running finishes with
// the same failure and every later call fails at once with
// FailedPreconditionError naming the first failure (and carrying its Failure).
// Create a new Worker (every worker of the job, and a fresh PS state: see
// docs/protocol.md "Failures, runs and restarts").
#ifndef ATP_FAILURE_H_
#define ATP_FAILURE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace atp {

// FailureKind: stable values (an application may log or switch on them).
enum class FailureKind : uint8_t {
  kPsUnreachable = 1,
  kWaitingForWorkers = 2,
  kStalled = 3,
  kPsRestarted = 4,
  kMismatch = 5,
};

// FailureKindName: "ps_unreachable", "waiting_for_workers", "stalled",
// "ps_restarted", "mismatch".
std::string_view FailureKindName(FailureKind kind);

struct Failure {
  FailureKind kind = FailureKind::kStalled;
  uint32_t queue = 0;        // the worker queue (I/O thread) that stalled
  std::vector<int> workers;  // kWaitingForWorkers: the global indices the PS waits for;
                             // kPsRestarted: the workers ahead; kMismatch: the worker
  std::string detail;        // kMismatch: "slots", "layout", "io_threads", "scale",
                             // "operation_size" or "operation_pieces"
};

// FailureOf: the Failure a status carries, or nullopt (OK, or a status that
// is not an ATP failure, e.g. a caller's deadline from Handle::Wait).
std::optional<Failure> FailureOf(const absl::Status& status);

// WithFailure: `status` carrying `failure` (for the runtime; public so that
// wrappers can rebuild a status with the same payload).
absl::Status WithFailure(absl::Status status, const Failure& failure);

}  // namespace atp

#endif  // ATP_FAILURE_H_
