// lib/protocol/status_message.h: the body of a kStatus control frame
// (PS -> workers, docs/protocol.md "Failures, runs and restarts"): what the PS
// knows about a job that the workers cannot see themselves.
//
//   wire::ControlMessage c;
//   c.type = wire::ControlType::kStatus;
//   protocol::EncodeStatus({.kind = StatusKind::kWaitingForWorkers, ...}, c);
//   ...
//   protocol::StatusBody status;
//   if (protocol::DecodeStatus(c, &status)) ...
//
// Body words (of wire::ControlMessage::body): 0 = kind; 1 = the 20-bit
// position it concerns (of the frame's queue); 2..33 = a WorkerSet (bit
// w % 32 of word 2 + w / 32 names global worker w); 34 = a field number
// (kMismatch); 35-36 and 37-38 = the expected and the received value
// (64-bit, high word first); 39-40 = the run (kOpConfirmed; 64-bit, high word
// first). A PS that predates `run` leaves words 39-40 zero.
#ifndef ATP_LIB_PROTOCOL_STATUS_MESSAGE_H_
#define ATP_LIB_PROTOCOL_STATUS_MESSAGE_H_

#include <cstdint>

#include "lib/protocol/worker_set.h"
#include "lib/wire/control_message.h"

namespace atp::protocol {

// StatusKind: wire values; never renumber.
enum class StatusKind : uint32_t {
  // The fragment at `position` of the frame's queue has been incomplete at the
  // PS for longer than its report interval; `workers` have not contributed.
  kWaitingForWorkers = 1,
  // The PS lost track of the frame's queue (it received gradients outside
  // its window: it restarted, or a new run began): every worker of the job
  // answers with a kJoin for that queue.
  kJoinRequest = 2,
  // The PS restarted and cannot rebuild the queue: positions [position,
  // `received`) completed at some workers (`workers`: those ahead) and not at
  // others, and it no longer has their parameter packets. (Sent by no PS
  // since replays (kReplayRequest) recover the case; workers still fail on
  // it with kPsRestarted.)
  kRestartUnrecoverable = 3,
  // A worker's configuration disagrees with the job's: `workers` names it,
  // `field` (MismatchField) what, `expected` / `received` the values.
  kMismatch = 4,
  // Every worker declared the piece `expected` (its number in the frame's
  // queue; `position` its first position) alike (kOpBegin): the workers may
  // deliver its result. `run` names the declarations' incarnations (a digest
  // of all of them, never 0; OpLedger::Outcome::run), and `workers` /
  // `received` the one declaration this frame answers (its worker and that
  // worker's incarnation): a worker takes the confirmation only for its own
  // run (WorkerIoLoop::OnOpConfirmed; docs/protocol.md "Mismatches are
  // errors"). `run` 0: a PS that predates it (taken as before).
  kOpConfirmed = 5,
  // The PS restarted, and positions [`expected`, `received`) of the frame's
  // queue (64-bit; `position` = the first one's low 20 bits) completed at
  // some workers and not at others: `workers` (one worker, or none: any
  // worker) replays the parameter packets it has of them (kReplay).
  kReplayRequest = 6,
};
inline constexpr uint32_t kMaxStatusKind = static_cast<uint32_t>(StatusKind::kReplayRequest);

// MismatchField: what a kMismatch is about (wire values).
enum class MismatchField : uint32_t {
  kSlots = 1,              // JobOptions::slots vs the PS's slots
  kLayout = 2,             // the rack layout's fingerprint vs the PS's
  kIoThreads = 3,          // JobOptions::io_threads vs the first worker that joined
  kScale = 4,              // JobOptions::scale (IEEE-754 bits) vs the first worker that joined
  kOperationSize = 5,      // an operation's values (kOpBegin) vs the first worker's
  kOperationPieces = 6,    // the same size cut differently (first position or fragments of a piece)
};
// MismatchFieldName: "slots", "layout", "io_threads", "scale", or "unknown".
const char* MismatchFieldName(uint32_t field);

struct StatusBody {
  StatusKind kind = StatusKind::kWaitingForWorkers;
  uint32_t position = 0;
  WorkerSet workers;
  uint32_t field = 0;
  uint64_t expected = 0;
  uint64_t received = 0;
  uint64_t run = 0;  // kOpConfirmed: the digest of the declaring run (0: none)
};

// EncodeStatus: writes `status` into `control`'s body (its type is set to kStatus).
void EncodeStatus(const StatusBody& status, wire::ControlMessage& control);
// DecodeStatus: false for a kind this build does not know or a control
// message that is not kStatus.
bool DecodeStatus(const wire::ControlMessage& control, StatusBody* out);

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_STATUS_MESSAGE_H_
