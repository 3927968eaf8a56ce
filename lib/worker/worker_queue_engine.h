// lib/worker/worker_queue_engine.h: the worker side of ATP for one queue
// (ATP-SPEC section 5): splits operations into fragments, quantizes them,
// sends them through a window, takes parameter packets back as results and
// acknowledgements, detects losses and timeouts and resends.
//
// One engine per worker, job and queue, driven by one I/O thread; it is not
// thread-safe. It is pure: it never reads a clock (every call that needs the
// time takes `now`), never touches a transport (messages go out through
// CollectSends), and never allocates on the per-packet path (slot state is
// allocated at Create; Enqueue and CollectCompletions are control path).
//
//   ATP_ASSIGN_OR_RETURN(auto engine, WorkerQueueEngine::Create(config));
//   ATP_ASSIGN_OR_RETURN(OperationId op, engine->Enqueue(gradient, result));
//   std::array<wire::AtpMessage, 32> burst;
//   for (;;) {
//     TimePoint now = clock.Now();
//     for (const wire::AtpMessage& m : received) engine->OnParameterPacket(m, now);
//     size_t n = engine->CollectSends(now, burst);   // hand burst[0..n) to the transport
//     std::array<OperationId, 16> done;
//     size_t k = engine->CollectCompletions(done);   // results are in place
//     sleep_until(min(engine->NextDeadline(), next packet));
//   }
//
// Positions: operations get consecutive positions of the queue's stream, in
// Enqueue order; a position p uses window slot p mod slots and travels as
// seq = MakeSeq(queue, p mod 2^20). Positions are 64-bit inside the engine;
// a parameter packet's 20-bit position is mapped back relative to the lowest
// unacknowledged position (serial-number arithmetic), which is unambiguous
// because fewer than `slots` <= 2^16 positions are ever in flight.
//
// Window: a new position is sent only while fewer than `window` fragments
// are in flight (the congestion controller's window, at most `slots`), and
// position p + slots only after p is acknowledged, so a slot holds one
// fragment at a time. Counting fragments in flight (not the span from the
// lowest unacknowledged position) keeps parameter packets flowing past a
// lost fragment, so loss detection works with windows as small as 2.
// Resends after a detected loss or an overflow request are not limited by
// the window (their positions are in flight).
//
// Timeout: when the retransmission timer fires, every fragment in flight is
// presumed lost (like TCP's RTO): none of them counts toward the window any
// more, the congestion controller collapses the window to one fragment
// (CongestionController::OnTimeout), and they are resent oldest first as the
// window allows, before any new position ("recovery"). A late
// acknowledgement of an original send simply removes its position from the
// recovery. So a timeout never floods the network with a whole window of
// resends, which the switches would not aggregate (ATP-SPEC section 4,
// rule 4): 1,024 workers timing out together send 1,024 frames, not 200,000.
//
// Timer jitter: every deadline is the RTO stretched by a per-engine random
// fraction redrawn at each timeout (TimerJitter), so the workers of a job,
// which restart their timers on the same multicast parameter packet, do not
// resend in the same instant round after round (liveness: timer_jitter.h).
// For the same reason, resends that a parameter packet queues (loss,
// overflow request, the next fragment of a timeout's recovery) wait a random
// fraction of the smoothed RTT (TimerJitter::Spread) before they go out:
// NextDeadline() names the end of that wait and WantsToSend() is false
// during it.
//
// Round trips: a sample is taken from the acknowledgement of a fragment sent
// once (Karn's rule), from an overflow request answering a fragment sent
// once, and from the acknowledgement of the float32 resend that answered
// that request (the request is not a loss: that resend is the only
// transmission outstanding). The RTO backoff is reset whenever the lowest
// unacknowledged position advances (RttEstimator::OnProgress).
//
// A sample measures the job's collective round trip, not this worker's own
// send-to-ack time. An aggregate completes when the last worker's fragment
// arrives, so the worker whose fragments arrive last would see only the
// network's few microseconds, its RTO would sit at the floor, and the first
// time another worker ran late (a shared CPU, a thread waking from sleep)
// it would time out spuriously, collapse its window and resend. What all
// workers share is the parameter packets: they reach every worker at once,
// and, loss-free, every worker's window evolves identically from them. So a
// fragment whose send waited for the window is timed from the parameter
// packet that released it (the same instant for every worker: the time a
// worker takes to react is part of the round trip the others see), and one
// sent without waiting (from idle, or while the window had room) from its
// send. A float32 resend answering an overflow request is timed from the
// request. The estimator bounds each sample (RttEstimator::OnSample), since
// a Karn-valid sample can still include another worker's timeout.
//
// Resends re-encode the fragment from the caller's input instead of keeping a
// copy: the input must stay unchanged until its operation completes (that is
// already the Enqueue contract), quantization is deterministic (scalar and
// AVX2 agree bit for bit), so the data is exactly the same, and the engine
// saves a 248-byte copy per fragment sent plus slots x 248 bytes of memory. A
// slot remembers only whether it must now be sent as float32 (after an
// overflow request).
//
// Received packets: the engine keeps, per slot, a copy of the last parameter
// packet that completed a fragment of it (its header and its 248 payload
// bytes as on the wire, 320 bytes per slot: 80 KiB per queue at 256 slots),
// so that after a PS restart it can replay a result another worker lost
// (docs/protocol.md "Failures, runs and restarts"; Received). Every result
// costs one 248-byte copy. ResultsAfterLowest says which results the engine
// holds beyond the lowest unacknowledged position, for the join.
#ifndef ATP_LIB_WORKER_WORKER_QUEUE_ENGINE_H_
#define ATP_LIB_WORKER_WORKER_QUEUE_ENGINE_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "atp/wire.h"
#include "lib/quantize/fragment_dequantizer.h"
#include "lib/quantize/fragment_quantizer.h"
#include "lib/worker/congestion_controller.h"
#include "lib/worker/fragment_skip.h"
#include "lib/worker/keep_alive_runs.h"
#include "lib/worker/loss_detector.h"
#include "lib/worker/rtt_estimator.h"
#include "lib/worker/spurious_timeout.h"
#include "lib/worker/timer_jitter.h"
#include "lib/worker/worker_queue_config.h"

namespace atp::worker {

// OperationId: names one Enqueue of one engine; 1, 2, 3, ... in Enqueue order.
using OperationId = uint64_t;

// WorkerQueueStats: counters (since Create) and the current state.
struct WorkerQueueStats {
  // Sends.
  uint64_t fragments_sent = 0;       // first transmissions
  uint64_t fp_fragments_sent = 0;    // of those, sent as float32 (NaN, inf, saturation)
  uint64_t fragments_skipped = 0;    // left out by SkipReduce: never sent, result zero
  // SkipReduce's contribution variant: positions this worker took without
  // sending (it waits for their parameter packets, or they came early), and
  // the kPull control frames it sent for them instead of resends.
  uint64_t fragments_not_contributed = 0;
  uint64_t pulls_sent = 0;
  uint64_t early_results = 0;  // results of those that came before this worker reached them
  // Keep-alive contributions of zeros: positions this worker was left out of
  // but sends, because it left out the previous kMaxSkippedGenerations
  // generations of the slot (keep_alive_runs.h). Counted in
  // fragments_not_contributed, not in fragments_sent.
  uint64_t keep_alives_sent = 0;
  uint64_t resends_loss = 0;         // resends after 3 out-of-order parameter packets
  uint64_t resends_timeout = 0;      // resends after a retransmission timeout
  uint64_t resends_overflow = 0;     // float32 resends answering an overflow request
  // Parameter packets.
  uint64_t parameter_packets = 0;    // completed an in-flight fragment
  uint64_t overflow_requests = 0;    // overflow requests for an in-flight fragment
  uint64_t collisions_seen = 0;      // completions carrying a new aggregator index
  uint64_t float_results = 0;        // completions on the float32 path (summed at the PS)
  uint64_t ecn_marks = 0;            // completions with `ecn`
  uint64_t ignored_unknown_seq = 0;  // position not in flight (stale, duplicate, never sent)
  uint64_t ignored_foreign = 0;      // not a parameter packet (a control frame included),
                                     // or another job or queue
  // Events.
  uint64_t loss_events = 0;          // positions declared lost by reordering
  uint64_t timeouts = 0;             // retransmission timeouts
  uint64_t spurious_timeouts = 0;    // of those, the resent position answered twice
                                     // (spurious_timeout.h)
  uint64_t window_reductions = 0;    // window halvings (ecn marks, losses): congestion control's
  uint64_t rtt_samples = 0;          // round trips measured
  uint64_t operations_completed = 0;
  // State now.
  uint32_t window = 0;
  uint32_t ssthresh = 0;
  uint64_t in_flight = 0;            // sent, not acknowledged
  uint64_t window_in_flight = 0;     // of those, counted against the window
  uint64_t recovery_pending = 0;     // positions a timeout left to resend (upper bound)
  uint64_t lowest_unacked = 0;       // the expected position
  uint64_t next_position = 0;        // the next position to send for the first time
  uint64_t queued_positions = 0;     // enqueued, not yet sent
  TimeDelta srtt;
  TimeDelta rttvar;
  TimeDelta rto;
};

class WorkerQueueEngine {
 public:
  // Create: validates `config` (absl::InvalidArgumentError naming the field)
  // and allocates the slot state.
  static absl::StatusOr<std::unique_ptr<WorkerQueueEngine>> Create(WorkerQueueConfig config);

  WorkerQueueEngine(const WorkerQueueEngine&) = delete;
  WorkerQueueEngine& operator=(const WorkerQueueEngine&) = delete;
  ~WorkerQueueEngine();

  // Enqueue: aggregate `input` (float32 values) with the same operation of the
  // job's other workers; the result goes to `output`. Both spans must have the
  // same size (else InvalidArgumentError), are owned by the caller, must stay
  // alive until the operation completes, and `input` must not change until
  // then (resends encode it again). Output values are written as their
  // fragments complete: the dequantized int32 sum, or the float32 sum after
  // the overflow path. The input is cut into ceil(size / 62) fragments (the
  // last zero-padded) that take the queue's next positions. An empty input
  // completes at once. Control path: may allocate (amortized).
  //
  // `skip` (SkipReduce, fragment_skip.h): with kWholeFragments the fragments
  // it drops take no position and are never sent; their output values are set
  // to zero here, at once (an operation whose fragments are all dropped
  // completes at once). With kContributions every fragment takes its
  // position; this worker sends only those it contributes to (with the
  // declared fan-ins of SliceRole), waits for the parameter packet of all,
  // and pulls (kPull) instead of resending one it did not contribute to.
  absl::StatusOr<OperationId> Enqueue(std::span<const float> input, std::span<float> output,
                                      const FragmentSkip& skip = {});

  // OnParameterPacket: a message received on this queue. A parameter packet
  // for an in-flight position stores its result, frees the slot (taking a new
  // aggregator index when `collision` is set), feeds RTT, loss detection and
  // congestion control, and may queue a resend; an overflow request queues a
  // float32 resend. Anything else (another job or queue, not `ack`, a
  // position not in flight) is counted and ignored.
  void OnParameterPacket(const wire::AtpMessage& message, TimePoint now);
  // OnParameterPacket (wire form): the same, from a received frame's ATP
  // header and payload bytes as they came (`wire_message`, network byte
  // order; `header` is its header, decoded by the caller): the payload is
  // dequantized into the output in one pass, and both are kept (Received)
  // as plain byte copies.
  void OnParameterPacket(const wire::AtpHeader& header,
                         std::span<const uint8_t, wire::kMessageBytes> wire_message, TimePoint now);

  // OnJobWaitsAt: the PS reported (a kWaitingForWorkers status frame; the
  // host decodes it) that the fragment of this queue it has waited for
  // longest (PsEngine::CollectWaiting) is at `position` (20-bit). Under
  // contribution skipping a worker that has not reached that position is
  // behind the job: the positions before it that it sits out were most
  // likely completed without it and their results lost (e.g. its receive
  // ring overflowed while its thread did not run), and the job cannot move
  // on until this worker catches up, so no later parameter packet will tell
  // it. It pulls them at once, those in flight and those it reaches below
  // `position` (as below results_seen_end_), instead of one window per
  // retransmission timeout. Does nothing without contribution skipping or
  // for a position it has reached. (The report names no one under declared
  // fan-ins: PsEngine::Missing.)
  void OnJobWaitsAt(uint32_t position);

  // CollectSends: the messages to send now, written to out[0..n), n returned.
  // First handles an expired retransmission timeout (NextDeadline() <= now),
  // then writes queued resends (loss, overflow), then a timeout's resends
  // while the window allows (oldest first), then new fragments while the
  // window allows.
  // What does not fit in `out` stays queued for the next call (see
  // WantsToSend).
  size_t CollectSends(TimePoint now, std::span<wire::AtpMessage> out);
  // CollectSends (wire form): the same sends, message i's header written to
  // headers[i] and its payload quantized straight into wire_payloads[i] (248
  // bytes in network byte order, e.g. the payload of the frame it goes out
  // in), for i < n <= min(headers.size(), wire_payloads.size()).
  size_t CollectSends(TimePoint now, std::span<wire::AtpHeader> headers,
                      std::span<uint8_t* const> wire_payloads);

  // WantsToSend: CollectSends would write at least one message now (ignoring
  // timeouts: see NextDeadline).
  bool WantsToSend() const;

  // NextDeadline: when the retransmission timer fires (call CollectSends at
  // or after it), or TimePoint::Infinite() when nothing is in flight.
  TimePoint NextDeadline() const;

  // CollectCompletions: ids of operations completed since the last call, in
  // completion order, written to out[0..n), n returned; the rest stay for the
  // next call. Their outputs are complete. Control path.
  size_t CollectCompletions(std::span<OperationId> out);

  // ReceivedPacket: a parameter packet that completed a fragment here.
  // Both parts are kept as on the wire: the receive path copies a frame's
  // bytes (a whole-struct copy of the header it has just decoded field by
  // field would stall store forwarding on every packet), and the rare replay
  // decodes them again.
  struct alignas(FragmentDequantizer::kKeptAlignment) ReceivedPacket {
    uint64_t position = UINT64_MAX;  // its stream position; UINT64_MAX: none yet
    std::array<uint8_t, wire::kAtpHeaderBytes> header_bytes{};
    // The payload (big-endian), then zeros to whole lines: written with
    // non-temporal stores (FragmentDequantizer), on lines of its own.
    alignas(FragmentDequantizer::kKeptAlignment)
        std::array<uint8_t, FragmentDequantizer::kKeptBytes> kept_payload{};

    wire::AtpHeader header() const { return wire::DecodeHeader(header_bytes); }
    std::span<const uint8_t, wire::kPayloadBytes> payload() const {
      return std::span(kept_payload).first<wire::kPayloadBytes>();
    }
  };
  // Received: the parameter packet that completed `position`, if this engine
  // has its result and still holds the copy (the slot's last one); null
  // otherwise. Valid until the next OnParameterPacket.
  const ReceivedPacket* Received(uint64_t position) const {
    const ReceivedPacket& copy = received_[position & slot_mask_];
    return copy.position == position ? &copy : nullptr;
  }
  // ResultsAfterLowest: sets bit i (of bits[i / 32], bit i % 32) when
  // position lowest_unacked + 1 + i has its result (acknowledged out of
  // order, or an early result), for i < 32 * bits.size(); returns one past
  // the highest position with a result (lowest_unacked when none beyond it).
  uint64_t ResultsAfterLowest(std::span<uint32_t> bits) const;

  WorkerQueueStats stats() const;
  // parameter_packets: stats().parameter_packets without building the rest
  // (the I/O loop reads it after every receive, to see progress).
  uint64_t parameter_packets() const { return counters_.parameter_packets; }
  const WorkerQueueConfig& config() const { return config_; }
  RttEstimator::DebugState rtt_debug_state() const { return rtt_.debug_state(); }
  CongestionController::DebugState cc_debug_state() const { return cc_.debug_state(); }
  LossDetector::DebugState loss_debug_state() const { return loss_.debug_state(); }

 private:
  // kEarlyResult: SkipReduce's contribution variant only: the result of a
  // position this worker does not contribute to arrived before the worker
  // reached it (the others need not wait for it); it is in the output, and
  // the position is acknowledged when the send loop reaches it.
  enum class SlotState : uint8_t { kFree, kInFlight, kAcked, kEarlyResult };
  enum class ResendCause : uint8_t { kLoss, kTimeout, kOverflow };
  enum class Transmission : uint8_t { kFirst, kResend };

  struct Operation {
    OperationId id = 0;
    std::span<const float> input;
    std::span<float> output;
    uint64_t first_position = 0;
    uint64_t fragments = 0;  // positions taken (fragments sent)
    uint64_t acked = 0;
    // kept: with SkipReduce, the fragment (of this operation) each position
    // carries, in order; empty when every fragment is sent (position i then
    // carries fragment i).
    std::vector<uint32_t> kept;
    // roles: with SkipReduce's contribution variant, this worker's role in
    // each slice of the operation (fragment_skip.h); empty otherwise.
    std::vector<SliceRole> roles;
    std::optional<SkipPlan> contribution_plan;  // roles only: every worker's part
    uint64_t op_fragments = 0;    // roles only: F of the whole operation
    uint64_t first_fragment = 0;  // roles only: the piece's first fragment in it

    uint64_t end_position() const { return first_position + fragments; }
    // FirstValue: the index in input/output of the first value `position` carries.
    uint64_t FirstValue(uint64_t position) const {
      const uint64_t i = position - first_position;
      return (kept.empty() ? i : kept[i]) * wire::kValuesPerFragment;
    }
    bool done() const { return acked == fragments; }
    // RoleOf: this worker's role for `position`, or nullptr when it sends
    // every fragment (no contribution skipping).
    const SliceRole* RoleOf(uint64_t position) const {
      if (roles.empty()) return nullptr;
      return &roles[static_cast<size_t>(SliceOfPosition(position))];
    }
    // SliceOfPosition: roles only: the slice of the fragment at `position`.
    int SliceOfPosition(uint64_t position) const {
      const uint64_t fragment = first_fragment + (position - first_position);
      return SliceOf(static_cast<size_t>(op_fragments), static_cast<int>(roles.size()),
                     static_cast<size_t>(fragment));
    }
    bool Contributes(uint64_t position) const {
      const SliceRole* role = RoleOf(position);
      return role == nullptr || role->contributes;
    }
  };

  // Slot: one window slot; `position` is the fragment it holds (or held).
  struct Slot {
    uint64_t position = 0;
    Operation* op = nullptr;  // stable: ops_ is a deque, popped only when done
    // round_trip_start: when the timed transmission's collective round trip
    // began (RTT samples are measured from it; see "Round trips" above).
    TimePoint round_trip_start;
    uint16_t aggregator = 0;  // the slot's current aggregator index
    SlotState state = SlotState::kFree;
    // timed: exactly one transmission may be answered (round_trip_start);
    // false once an ambiguous resend went out (Karn's rule: no sample).
    bool timed = false;
    // counted: in flight and counted in window_in_flight_ (false for the
    // fragments a timeout presumed lost, until they are resent).
    bool counted = false;
    bool send_as_float = false;
    bool resend_queued = false;
    ResendCause resend_cause = ResendCause::kLoss;
    // SkipReduce's contribution variant (declares): the position's declared
    // contributor set as this worker's header fields (fragment_skip.h);
    // `role.contributes` says whether it sends at all, and keep_alive that
    // it sends zeros (the plan left it out, keep_alive_runs.h).
    bool declares = false;
    bool keep_alive = false;
    SliceRole role;
    bool Sends() const { return !declares || role.contributes; }
  };

  explicit WorkerQueueEngine(WorkerQueueConfig config);

  Slot& SlotOf(uint64_t position) { return slots_[position & slot_mask_]; }
  const Slot& SlotOf(uint64_t position) const { return slots_[position & slot_mask_]; }
  // MaySendNew: a new position may be sent now. Asked twice per parameter
  // packet: defined here to be inlined.
  bool MaySendNew() const {
    // The window bounds the fragments in flight; the slots bound the span
    // [expected_, next_send_], so the slot of next_send_ is free: its previous
    // position, next_send_ - slots, is below expected_ (acknowledged). New
    // positions wait for a timeout's recovery to finish, after which every
    // fragment in flight counts against the window again.
    return next_send_ < assigned_end_ && !RecoveryPending() && window_in_flight_ < cc_.window() &&
           next_send_ < expected_ + config_.slots;
  }
  void QueueResend(uint64_t position, ResendCause cause);
  void OnRetransmissionTimeout(TimePoint now);
  // SkipRecoveredPositions: moves recovery_next_ past positions that no
  // longer need a timeout resend (acknowledged, or already resent).
  void SkipRecoveredPositions() {
    recovery_next_ = std::max(recovery_next_, expected_);
    if (RecoveryPending()) SkipRecoveredPositionsInRecovery();  // rare: inline the test only
  }
  void SkipRecoveredPositionsInRecovery();
  bool RecoveryPending() const { return recovery_next_ < recovery_end_; }
  // RecoveryMaySend: the window has room and the recovery's next position is
  // to be resent now: the position the timeout resends first, or any while
  // no original it presumed lost has been answered (a burst loss), or one
  // below the highest such original (passed over: lost). Positions above it
  // wait for their own answers, or for the next timeout: originals that are
  // only late (a descheduled peer, switch or PS) were resent by the dozen
  // before, each answered twice.
  bool RecoveryMaySend() const;
  // HoldResendsTriggeredAt: a parameter packet that every worker of the job
  // receives at `now` left resends pending: they wait a random spread.
  void HoldResendsTriggeredAt(TimePoint now) {
    // Nothing to hold, on nearly every packet: inline the test only.
    if (resends_held_ || (resend_count_ == 0 && !RecoveryPending())) return;
    HoldQueuedResends(now);
  }
  void HoldQueuedResends(TimePoint now);
  // CountAgainstWindow: `slot` (in flight) counts against the window again.
  void CountAgainstWindow(Slot& slot);
  // TakeRttSample: feeds `rtt`, measured at `now`, to the estimator: only
  // the first sample of each receive instant. A host hands a whole receive
  // burst over at one `now`, and its packets' round trips all end together;
  // one sample per burst is what TCP takes from a stretch acknowledgement,
  // and the estimator's arithmetic on every packet was 7% of a pulled
  // fragment's cost (BM_PullWindow/4096, bench/RESULTS.md). The test is
  // inlined: every other packet of a burst stops at it.
  void TakeRttSample(TimeDelta rtt, TimePoint now) {
    if (last_rtt_sample_at_ == now) [[likely]] return;
    TakeFirstRttSampleAt(rtt, now);
  }
  void TakeFirstRttSampleAt(TimeDelta rtt, TimePoint now);
  // TimerDeadline: when a timer armed at `now` fires (RTO, jittered).
  TimePoint TimerDeadline(TimePoint now) const { return now + jitter_.Stretch(rtt_.Rto()); }
  // The retransmission timer. Every parameter packet restarts it (RFC 6298
  // 5.3), a burst of them at the same `now`; working out the deadline
  // (TimerDeadline: the RTO chain and the stretch) once per restart cost
  // about 5% of the receive path. So RestartTimer only notes when, and the
  // deadline is worked out when first needed: by RtoDeadline, or by
  // SettleTimer, which must run before anything changes the RTO or the
  // stretch without restarting the timer after it (rtt_.OnProgress outside
  // the acknowledgement path). The deadline is the one a restart at that
  // time would have computed, so the engine behaves exactly as before.
  void RestartTimer(TimePoint now) {
    timer_restarted_at_ = now;
    timer_restart_pending_ = true;
  }
  void SettleTimer() const {
    if (!timer_restart_pending_) return;
    rto_deadline_ = TimerDeadline(timer_restarted_at_);
    timer_restart_pending_ = false;
  }
  void StopTimer() {
    rto_deadline_ = TimePoint::Infinite();
    timer_restart_pending_ = false;
  }
  TimePoint RtoDeadline() const {
    SettleTimer();
    return rto_deadline_;
  }
  // SendTarget: where CollectSends writes message i: a whole host-order
  // message (messages[i]), or a header and a payload in network byte order
  // (headers[i], wire_payloads[i]).
  struct SendTarget {
    wire::AtpMessage* messages = nullptr;
    wire::AtpHeader* headers = nullptr;
    uint8_t* const* wire_payloads = nullptr;
    size_t capacity = 0;
  };
  // ResultPayload: a parameter packet's payload in host order, or its ATP
  // header and payload bytes as on the wire (kMessageBytes).
  struct ResultPayload {
    const wire::Payload* host = nullptr;
    const uint8_t* wire_message = nullptr;
  };
  size_t CollectSendsTo(TimePoint now, const SendTarget& out);
  void OnParameterPacketWith(const wire::AtpHeader& h, const ResultPayload& payload,
                             TimePoint now);
  // BuildMessage: writes `slot`'s fragment as message i of `out`; returns
  // whether it went as float32 (`fp`).
  bool BuildMessage(const Slot& slot, Transmission transmission, const SendTarget& out,
                    size_t i) const;
  // BuildPull: writes the kPull control frame asking for `slot`'s parameter
  // packet (a fragment this worker did not contribute to) as message i.
  void BuildPull(const Slot& slot, const SendTarget& out, size_t i) const;
  // SendResend: writes `slot`'s resend (or pull) as message i and counts it.
  void SendResend(const Slot& slot, ResendCause cause, const SendTarget& out, size_t i);
  Operation& OperationForNextSend();
  // TakeRole: position next_send_ of `op` passes (sent, or an early result
  // acknowledged): under contribution skipping, sets `slot`'s declared role
  // and advances keep_alive_runs_. Per fragment sent: the test for a job
  // without contribution skipping (nearly all) is inlined.
  void TakeRole(const Operation& op, Slot& slot) {
    slot.declares = false;
    slot.keep_alive = false;
    if (keep_alive_runs_.has_value()) [[unlikely]] TakeSkippingRole(op, slot);
  }
  void TakeSkippingRole(const Operation& op, Slot& slot);
  // KeepUndropped: applies `skip` to `op` (just enqueued, fragments = all of
  // them): zeroes the dropped fragments' output, fills op.kept, counts.
  void KeepUndropped(const FragmentSkip& skip, Operation& op);
  void PopCompletedOperations();
  // CountAcked: one more fragment of `op` acknowledged; queues its completion.
  // Per packet: defined here to be inlined (a call and its register saves
  // cost more than the count).
  void CountAcked(Operation& op) {
    if (++op.acked == op.fragments) CompleteOperation(op);
  }
  void CompleteOperation(const Operation& op);
  // FreeAckedPrefix: moves expected_ past acknowledged positions, freeing
  // their slots; returns whether it moved. Per packet: defined here to be
  // inlined.
  bool FreeAckedPrefix() {
    const uint64_t expected_before = expected_;
    while (expected_ < next_send_ && SlotOf(expected_).state == SlotState::kAcked) {
      SlotOf(expected_).state = SlotState::kFree;
      ++expected_;
    }
    SkipRecoveredPositions();
    return expected_ != expected_before;
  }
  // TakeEarlyResult: a parameter packet for `position` >= next_send_ that
  // this worker does not contribute to: stores the result (its slot, or
  // held_results_ while the slot is busy); false if the position cannot take
  // one (not enqueued, too far ahead, a duplicate, or a contribution).
  bool TakeEarlyResult(const wire::AtpHeader& h, const ResultPayload& payload, uint64_t position);
  // WriteResult: a parameter packet's values into `op`'s output at `position`,
  // and its copy into received_.
  void WriteResult(const wire::AtpHeader& h, const ResultPayload& payload, const Operation& op,
                   uint64_t position);

  WorkerQueueConfig config_;
  wire::AtpHeader header_template_;
  uint64_t slot_mask_;
  std::vector<Slot> slots_;
  // received_[slot]: the last parameter packet that completed a fragment of
  // the slot (cold: written once per result, read only for replays).
  std::vector<ReceivedPacket> received_;
  // The job's scale, its constants and kernels chosen once: fragments
  // quantized into frames, and integer results dequantized into the output
  // and kept in received_ in one pass.
  FragmentQuantizer quantizer_;
  FragmentDequantizer dequantizer_;
  // Resend FIFO: a ring of positions, each in flight and queued at most once.
  std::vector<uint64_t> resend_ring_;
  size_t resend_head_ = 0;
  size_t resend_count_ = 0;

  RttEstimator rtt_;
  CongestionController cc_;
  LossDetector loss_;
  SpuriousTimeoutProbe spurious_;
  TimerJitter jitter_;
  // rto_deadline_: the timer's deadline once settled (SettleTimer), and
  // timer_restarted_at_ the restart not yet worked out into it, if any.
  mutable TimePoint rto_deadline_ = TimePoint::Infinite();
  TimePoint timer_restarted_at_;
  mutable bool timer_restart_pending_ = false;
  // release_time_: when the latest parameter packet let new positions out of
  // a full window; release_pending_: positions sent from now on start their
  // round trip then (cleared once the window or the queue stops new sends).
  TimePoint release_time_;
  std::optional<TimePoint> last_rtt_sample_at_;  // TakeRttSample's last instant
  bool release_pending_ = false;
  // Resends (queued and recovery) wait until this time; past when none wait.
  TimePoint resend_hold_until_;
  bool resends_held_ = false;

  // Positions: [0, expected_) acknowledged; [expected_, next_send_) in flight
  // or acknowledged out of order; [next_send_, assigned_end_) enqueued.
  uint64_t expected_ = 0;
  uint64_t next_send_ = 0;
  uint64_t assigned_end_ = 0;
  uint64_t in_flight_ = 0;
  // Fragments in flight that count against the window: all of them, except
  // those a timeout presumed lost and that were not resent since.
  uint64_t window_in_flight_ = 0;
  // Recovery: positions in [recovery_next_, recovery_end_) that are in
  // flight and not counted await a timeout resend; empty when equal.
  uint64_t recovery_next_ = 0;
  uint64_t recovery_end_ = 0;
  // recovery_probe_: the lowest position at the last timeout (resent first);
  // recovery_evidence_end_: one past the highest position the timeout
  // presumed lost whose original was answered since (0: none).
  uint64_t recovery_probe_ = 0;
  uint64_t recovery_evidence_end_ = 0;

  std::deque<Operation> ops_;  // not yet popped, in Enqueue order
  size_t send_cursor_ = 0;     // index in ops_ of the op holding next_send_
  OperationId next_op_id_ = 1;
  uint64_t operations_not_done_ = 0;
  // Completed, not yet collected; capacity reserved by Enqueue so that the
  // packet path never reallocates.
  std::vector<OperationId> completions_;

  // keep_alive_runs_: from the first contribution-skipping operation on.
  std::optional<KeepAliveRuns> keep_alive_runs_;
  // held_results_: contribution skipping: results of positions this worker
  // does not contribute to that came while their slot still held an older
  // position (the window's slots are not enough: the others may be up to
  // kMaxSkippedGenerations + 1 generations of a slot ahead). The values are
  // already in the operation's output; entry position % size records which
  // position (+ 1; 0: none) and its slot's new aggregator index, if any.
  // (kMaxSkippedGenerations + 2) x slots entries, allocated with
  // keep_alive_runs_.
  struct HeldResult {
    uint64_t position_plus_one = 0;
    bool collision = false;
    uint16_t aggregator = 0;
  };
  std::vector<HeldResult> held_results_;
  // results_seen_end_: contribution skipping: 1 + the highest position a
  // parameter packet named (including one this worker could not take yet),
  // or the position the PS reported it waits at (OnJobWaitsAt), whichever
  // is higher. A position it leaves out and reaches below it has most
  // likely had its result already (before the operation was enqueued here,
  // or lost): it pulls at once instead of after a retransmission timeout.
  uint64_t results_seen_end_ = 0;
  int worker_index_ = 0;  // this worker's rack-major index in the job

  WorkerQueueStats counters_;
};

// Per packet on the receive path: defined here to be inlined into the I/O loop.
inline void WorkerQueueEngine::OnParameterPacket(
    const wire::AtpHeader& header, std::span<const uint8_t, wire::kMessageBytes> wire_message,
    TimePoint now) {
  OnParameterPacketWith(header, ResultPayload{.wire_message = wire_message.data()}, now);
}

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_WORKER_QUEUE_ENGINE_H_
