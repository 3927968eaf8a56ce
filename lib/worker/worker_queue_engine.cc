#include "lib/worker/worker_queue_engine.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <utility>

#include "atp/status_macros.h"
#include "lib/protocol/aggregator_index.h"
#include "lib/worker/fragment_codec.h"
#include "lib/wire/control_message.h"

namespace atp::worker {
namespace {

constexpr uint64_t kValuesPerFragment = wire::kValuesPerFragment;
constexpr uint64_t kPositionSpace = uint64_t{1} << wire::kQueueShift;
// How many fragments ahead BuildMessage prefetches the input and WriteResult
// the output (bench/RESULTS.md measured both).
constexpr uint64_t kInputPrefetchAhead = 8;
constexpr uint64_t kOutputPrefetchAhead = 4;
constexpr size_t kCacheLineBytes = 64;

// PrefetchFragment: asks for every line that the fragment of `values`
// starting at value `first` touches (248 bytes: up to 5 lines, each address
// inside them), if that fragment is whole inside `values`. A tensor larger
// than the cache streams through the worker once per operation, and its
// fragments' loads (quantize) or stores (dequantize) otherwise wait for
// their lines in turn. kUse: whether the lines are about to be read or
// written.
enum class Use { kRead = 0, kWrite = 1 };
template <Use kUse, typename T>
inline void PrefetchFragment(std::span<T> values, uint64_t first) {
  if (first + kValuesPerFragment > values.size()) return;
  const auto* bytes = reinterpret_cast<const char*>(values.data() + first);
  for (size_t b = 0; b < wire::kPayloadBytes; b += kCacheLineBytes) {
    __builtin_prefetch(bytes + b, static_cast<int>(kUse));
  }
  __builtin_prefetch(bytes + wire::kPayloadBytes - 1, static_cast<int>(kUse));
}

}  // namespace

static_assert(FragmentDequantizer::kValues == wire::kValuesPerFragment &&
              FragmentDequantizer::kBytes == wire::kPayloadBytes);

absl::StatusOr<std::unique_ptr<WorkerQueueEngine>> WorkerQueueEngine::Create(
    WorkerQueueConfig config) {
  ATP_RETURN_IF_ERROR(config.Validate());
  return std::unique_ptr<WorkerQueueEngine>(new WorkerQueueEngine(std::move(config)));
}

WorkerQueueEngine::WorkerQueueEngine(WorkerQueueConfig config)
    : config_(std::move(config)),
      slot_mask_(config_.slots - 1),
      slots_(config_.slots),
      received_(config_.slots),
      quantizer_(config_.scale),
      dequantizer_(config_.scale),
      resend_ring_(config_.slots),
      rtt_(config_.rtt_config()),
      cc_(config_.cc_config()),
      jitter_(config_.timer_seed,
              (uint64_t{config_.shape.job} << 48) | (static_cast<uint64_t>(config_.rack) << 32) |
                  (static_cast<uint64_t>(config_.worker_in_rack) << 16) | config_.queue,
              config_.rto_jitter_percent) {
  header_template_.job = config_.shape.job;
  header_template_.bitmap0 = uint32_t{1} << config_.worker_in_rack;
  header_template_.bitmap1 = uint32_t{1} << config_.rack;
  header_template_.fan_in0 = static_cast<uint8_t>(config_.shape.workers_in_rack(config_.rack));
  header_template_.fan_in1 = static_cast<uint8_t>(config_.shape.racks());
  header_template_.edge = false;
  header_template_.collision = false;
  header_template_.ecn = false;
  header_template_.ack = false;
  for (int r = 0; r < config_.rack; ++r) worker_index_ += config_.shape.workers_in_rack(r);
  worker_index_ += config_.worker_in_rack;
  for (uint32_t s = 0; s < config_.slots; ++s) {
    slots_[s].aggregator = protocol::InitialAggregatorIndex(
        config_.index_policy, config_.shape.job, config_.queue, s, config_.slots);
  }
}

WorkerQueueEngine::~WorkerQueueEngine() = default;

absl::StatusOr<OperationId> WorkerQueueEngine::Enqueue(std::span<const float> input,
                                                       std::span<float> output,
                                                       const FragmentSkip& skip) {
  if (input.size() != output.size()) {
    return absl::InvalidArgumentError("WorkerQueueEngine::Enqueue: input and output sizes differ");
  }
  PopCompletedOperations();
  Operation& op = ops_.emplace_back();
  op.id = next_op_id_++;
  op.input = input;
  op.output = output;
  op.first_position = assigned_end_;
  op.fragments = (input.size() + kValuesPerFragment - 1) / kValuesPerFragment;
  if (skip.SkipsContributions()) {
    op.roles = skip.Roles(config_.shape, config_.rack, config_.worker_in_rack);
    op.contribution_plan = skip.plan;
    if (!keep_alive_runs_.has_value()) {
      keep_alive_runs_.emplace(config_.slots, config_.shape.total_workers());
      held_results_.resize(static_cast<size_t>(protocol::kMaxSkippedGenerations + 2) *
                           config_.slots);
    }
    op.op_fragments = skip.op_fragments;
    op.first_fragment = skip.first_fragment;
  } else if (skip.plan.has_value()) {
    KeepUndropped(skip, op);
  }
  assigned_end_ += op.fragments;
  // Room for every completion that can happen before the next
  // CollectCompletions, so the packet path never grows the vector.
  if (op.fragments == 0) {
    completions_.push_back(op.id);
    ++counters_.operations_completed;
  } else {
    ++operations_not_done_;
  }
  completions_.reserve(completions_.size() + operations_not_done_);
  return op.id;
}

void WorkerQueueEngine::KeepUndropped(const FragmentSkip& skip, Operation& op) {
  const uint64_t all = op.fragments;
  op.kept.reserve(static_cast<size_t>(all));
  for (uint64_t f = 0; f < all; ++f) {
    if (!skip.Dropped(f)) {
      op.kept.push_back(static_cast<uint32_t>(f));
      continue;
    }
    // Nothing is sent for it: its result is zero on every worker.
    const uint64_t first = f * kValuesPerFragment;
    const uint64_t count = std::min<uint64_t>(kValuesPerFragment, op.output.size() - first);
    std::fill_n(op.output.begin() + static_cast<std::ptrdiff_t>(first), count, 0.0f);
    ++counters_.fragments_skipped;
  }
  op.fragments = op.kept.size();
  // Nothing dropped in this piece: the identity mapping needs no table.
  if (op.fragments == all) op.kept.clear();
}

void WorkerQueueEngine::PopCompletedOperations() {
  // Every fragment of a done operation is acknowledged, so no slot in flight
  // and no queued resend refers to it any more.
  while (!ops_.empty() && ops_.front().done()) {
    ops_.pop_front();
    if (send_cursor_ > 0) --send_cursor_;
  }
}

WorkerQueueEngine::Operation& WorkerQueueEngine::OperationForNextSend() {
  while (ops_[send_cursor_].end_position() <= next_send_) ++send_cursor_;
  return ops_[send_cursor_];
}

bool WorkerQueueEngine::WantsToSend() const {
  if (resends_held_) return MaySendNew();
  return resend_count_ > 0 || RecoveryMaySend() ||
         MaySendNew();
}

void WorkerQueueEngine::HoldQueuedResends(TimePoint now) {
  // The span is the smoothed round trip, at most the RTO floor: a sample may
  // include a long wait for other workers' resends (a fragment acknowledged
  // only after the job recovered from a timeout), and before any sample
  // (every fragment was resent: Karn's rule) the floor stands in for it.
  const TimeDelta span =
      rtt_.has_sample() ? std::min(rtt_.srtt(), config_.rto_floor) : config_.rto_floor;
  const TimeDelta wait = jitter_.Spread(span);
  if (wait <= TimeDelta::Zero()) return;
  resend_hold_until_ = now + wait;
  resends_held_ = true;
}

bool WorkerQueueEngine::RecoveryMaySend() const {
  if (!RecoveryPending() || window_in_flight_ >= cc_.window()) return false;
  // Originals are being answered: only positions below the highest of them
  // were passed over; the ones above are most likely on their way too.
  return recovery_next_ == recovery_probe_ || recovery_evidence_end_ == 0 ||
         recovery_next_ < recovery_evidence_end_;
}

void WorkerQueueEngine::CountAgainstWindow(Slot& slot) {
  if (slot.counted) return;
  slot.counted = true;
  ++window_in_flight_;
}

void WorkerQueueEngine::TakeFirstRttSampleAt(TimeDelta rtt, TimePoint now) {
  last_rtt_sample_at_ = now;
  rtt_.OnSample(rtt, now);
  ++counters_.rtt_samples;
}

void WorkerQueueEngine::SkipRecoveredPositionsInRecovery() {
  while (recovery_next_ < recovery_end_) {
    const Slot& slot = SlotOf(recovery_next_);
    if (slot.state == SlotState::kInFlight && slot.position == recovery_next_ && !slot.counted) {
      return;
    }
    ++recovery_next_;
  }
}

TimePoint WorkerQueueEngine::NextDeadline() const {
  const TimePoint timer = in_flight_ > 0 ? RtoDeadline() : TimePoint::Infinite();
  return resends_held_ ? Earliest(timer, resend_hold_until_) : timer;
}

void WorkerQueueEngine::QueueResend(uint64_t position, ResendCause cause) {
  Slot& slot = SlotOf(position);
  assert(slot.state == SlotState::kInFlight && slot.position == position);
  if (slot.resend_queued) {
    // Already queued: an overflow request still has to be counted as such.
    if (cause == ResendCause::kOverflow) slot.resend_cause = cause;
    return;
  }
  assert(resend_count_ < resend_ring_.size());
  resend_ring_[(resend_head_ + resend_count_) & slot_mask_] = position;
  ++resend_count_;
  slot.resend_queued = true;
  slot.resend_cause = cause;
}

void WorkerQueueEngine::OnRetransmissionTimeout(TimePoint now) {
  ++counters_.timeouts;
  // expected_ is resent first: its answers tell a spurious timeout.
  spurious_.Arm(expected_);
  rtt_.OnTimeout();
  cc_.OnTimeout();
  // Every fragment in flight is presumed lost: none counts against the
  // window until it is resent, oldest first, as the (collapsed) window allows.
  for (uint64_t p = expected_; p < next_send_; ++p) {
    Slot& slot = SlotOf(p);
    if (slot.state == SlotState::kInFlight) slot.counted = false;
  }
  window_in_flight_ = 0;
  recovery_next_ = expected_;
  recovery_end_ = next_send_;
  recovery_probe_ = expected_;
  recovery_evidence_end_ = 0;
  SkipRecoveredPositions();
  loss_.OnTimeout(expected_, cc_.send_bound());
  jitter_.Redraw();
  RestartTimer(now);
}

void WorkerQueueEngine::SendResend(const Slot& slot, ResendCause cause, const SendTarget& out,
                                   size_t i) {
  if (!slot.Sends()) {
    BuildPull(slot, out, i);
    ++counters_.pulls_sent;
    return;
  }
  BuildMessage(slot, Transmission::kResend, out, i);
  switch (cause) {
    case ResendCause::kLoss: ++counters_.resends_loss; break;
    case ResendCause::kTimeout: ++counters_.resends_timeout; break;
    case ResendCause::kOverflow: ++counters_.resends_overflow; break;
  }
}

void WorkerQueueEngine::BuildPull(const Slot& slot, const SendTarget& out, size_t i) const {
  wire::ControlMessage control;
  control.type = wire::ControlType::kPull;
  control.sender = static_cast<uint32_t>(worker_index_);
  control.incarnation = config_.incarnation;
  const wire::ControlSender sender{
      .worker_in_rack = static_cast<uint32_t>(config_.worker_in_rack),
      .rack = static_cast<uint32_t>(config_.rack),
      .fan_in0 = header_template_.fan_in0,
      .fan_in1 = header_template_.fan_in1};
  const wire::AtpMessage pull = wire::MakeWorkerControl(
      config_.shape.job, sender, config_.queue, static_cast<uint32_t>(slot.position), control);
  if (out.messages != nullptr) {
    out.messages[i] = pull;
    return;
  }
  out.headers[i] = pull.header;
  wire::EncodePayload(pull.payload,
                      std::span<uint8_t, wire::kPayloadBytes>(out.wire_payloads[i],
                                                              wire::kPayloadBytes));
}

bool WorkerQueueEngine::BuildMessage(const Slot& slot, Transmission transmission,
                                     const SendTarget& out, size_t i) const {
  const Operation& op = *slot.op;
  const uint64_t offset = op.FirstValue(slot.position);
  const size_t count = static_cast<size_t>(
      std::min<uint64_t>(kValuesPerFragment, op.input.size() - offset));
  // Positions mostly go out in order: the input of the fragment
  // kInputPrefetchAhead on, within this operation.
  PrefetchFragment<Use::kRead>(op.input, offset + kInputPrefetchAhead * kValuesPerFragment);
  wire::AtpHeader& header = out.messages != nullptr ? out.messages[i].header : out.headers[i];
  header = header_template_;
  header.seq = wire::MakeSeq(config_.queue, static_cast<uint32_t>(slot.position));
  header.aggregator = slot.aggregator;
  header.resend = transmission == Transmission::kResend;
  if (slot.declares) {
    // SkipReduce's contribution variant: the header declares the fragment's
    // contributor set (fragment_skip.h).
    header.fan_in0 = slot.role.fan_in0;
    header.bitmap0 = slot.role.bitmap0;
    header.fan_in1 = slot.role.fan_in1;
    header.bitmap1 = slot.role.bitmap1;
  }
  FragmentEncoding wanted =
      slot.send_as_float ? FragmentEncoding::kFloat : FragmentEncoding::kInteger;
  // A keep-alive adds nothing to the sum: zeros (as float32 rows too, when an
  // overflow request asks every declared contributor for one).
  static constexpr std::array<float, kValuesPerFragment> kZeros{};
  const std::span<const float> values = slot.keep_alive
                                            ? std::span<const float>(kZeros).first(count)
                                            : op.input.subspan(offset, count);
  const FragmentEncoding used =
      out.messages != nullptr
          ? EncodeFragment(values, config_.scale, wanted, out.messages[i].payload)
          : EncodeFragmentToWire(values, quantizer_, wanted,
                                 std::span<uint8_t, wire::kPayloadBytes>(out.wire_payloads[i],
                                                                         wire::kPayloadBytes));
  header.fp = used == FragmentEncoding::kFloat;
  return header.fp;
}

size_t WorkerQueueEngine::CollectSends(TimePoint now, std::span<wire::AtpMessage> out) {
  return CollectSendsTo(now, SendTarget{.messages = out.data(), .capacity = out.size()});
}

size_t WorkerQueueEngine::CollectSends(TimePoint now, std::span<wire::AtpHeader> headers,
                                       std::span<uint8_t* const> wire_payloads) {
  return CollectSendsTo(now, SendTarget{.headers = headers.data(),
                                        .wire_payloads = wire_payloads.data(),
                                        .capacity = std::min(headers.size(), wire_payloads.size())});
}

size_t WorkerQueueEngine::CollectSendsTo(TimePoint now, const SendTarget& out) {
  if (in_flight_ > 0 && now >= RtoDeadline()) OnRetransmissionTimeout(now);
  if (resends_held_ && now >= resend_hold_until_) resends_held_ = false;
  size_t n = 0;
  while (n < out.capacity && !resends_held_ && resend_count_ > 0) {
    const uint64_t position = resend_ring_[resend_head_];
    resend_head_ = (resend_head_ + 1) & slot_mask_;
    --resend_count_;
    Slot& slot = SlotOf(position);
    if (!slot.resend_queued || slot.position != position) continue;
    slot.resend_queued = false;
    if (slot.state != SlotState::kInFlight) continue;
    // A float32 resend answering the request for a fragment sent once is
    // the only transmission that can still be answered: it stays timed (from
    // the request, OnParameterPacket). Any other resend is ambiguous.
    if (!(slot.resend_cause == ResendCause::kOverflow && slot.timed)) slot.timed = false;
    CountAgainstWindow(slot);
    SendResend(slot, slot.resend_cause, out, n++);
  }
  SkipRecoveredPositions();
  while (n < out.capacity && !resends_held_ && RecoveryMaySend()) {
    Slot& slot = SlotOf(recovery_next_);
    ResendCause cause = ResendCause::kTimeout;
    if (slot.resend_queued) {
      // Also queued for another cause: this send answers it (the ring entry
      // is skipped), and counts as that cause.
      cause = slot.resend_cause;
      slot.resend_queued = false;
    }
    slot.timed = false;
    CountAgainstWindow(slot);
    SendResend(slot, cause, out, n++);
    SkipRecoveredPositions();
  }
  // The operation holding next_send_, looked up again only when next_send_
  // leaves it (nothing pops ops_ during this call).
  Operation* send_op = nullptr;
  while (n < out.capacity && MaySendNew()) {
    if (send_op == nullptr || send_op->end_position() <= next_send_) {
      send_op = &OperationForNextSend();
    }
    Operation& op = *send_op;
    Slot& slot = SlotOf(next_send_);
    HeldResult* held =
        held_results_.empty() ? nullptr : &held_results_[next_send_ % held_results_.size()];
    if (held != nullptr && held->position_plus_one == next_send_ + 1) {
      // Held while the slot was busy: it takes it now.
      held->position_plus_one = 0;
      if (held->collision) slot.aggregator = held->aggregator;
      slot.position = next_send_;
      slot.state = SlotState::kEarlyResult;
    }
    if (slot.state == SlotState::kEarlyResult && slot.position == next_send_) {
      // Its result came before this worker got here: done, nothing to send.
      // (The PS completed it without this worker, so the keep-alive rule
      // cannot have asked for one here: every worker applies it alike.)
      // It is a fragment this worker did not contribute to, like one it
      // reaches before its result comes.
      TakeRole(op, slot);
      ++counters_.fragments_not_contributed;
      slot.state = SlotState::kAcked;
      ++next_send_;
      CountAcked(op);
      if (FreeAckedPrefix()) {
        SettleTimer();  // the RTO changes here without a restart
        rtt_.OnProgress();
      }
      continue;
    }
    assert(slot.state == SlotState::kFree);
    slot.position = next_send_;
    slot.op = &op;
    slot.round_trip_start = release_pending_ ? release_time_ : now;
    slot.state = SlotState::kInFlight;
    slot.timed = true;
    slot.counted = true;
    slot.send_as_float = false;
    slot.resend_queued = false;
    TakeRole(op, slot);
    if (slot.Sends()) {
      const bool fp = BuildMessage(slot, Transmission::kFirst, out, n);
      if (slot.keep_alive) {
        ++counters_.keep_alives_sent;
        ++counters_.fragments_not_contributed;
      } else {
        ++counters_.fragments_sent;
      }
      if (fp) ++counters_.fp_fragments_sent;
      ++n;
    } else {
      // SkipReduce left this worker's contribution out: nothing goes up,
      // but the position is in flight (counted against the window, timed)
      // until its parameter packet comes down like everyone else's.
      ++counters_.fragments_not_contributed;
      if (next_send_ < results_seen_end_) {
        // The job is past it: its result most likely came before this
        // worker could take it. Ask now (a live one is ignored by the PS;
        // its completion comes anyway). The answer is no round-trip sample.
        slot.timed = false;
        BuildPull(slot, out, n++);
        ++counters_.pulls_sent;
      }
    }
    if (in_flight_ == 0) RestartTimer(now);
    ++in_flight_;
    ++window_in_flight_;
    ++next_send_;
  }
  // The release ends when new sends stop for the window or for lack of
  // positions; positions that only did not fit in `out` keep it.
  if (!MaySendNew()) release_pending_ = false;
  return n;
}

void WorkerQueueEngine::TakeSkippingRole(const Operation& op, Slot& slot) {
  if (!op.contribution_plan.has_value()) {
    keep_alive_runs_->AllSend(next_send_);
    return;
  }
  const int slice = op.SliceOfPosition(next_send_);
  const SkipPlan& plan = *op.contribution_plan;
  keep_alive_runs_->Next(next_send_,
                         [&](int worker) { return plan.ContributionIncluded(slice, worker); });
  slot.role = DeclaredRole(config_.shape, config_.rack, config_.worker_in_rack,
                           [&](int worker) { return keep_alive_runs_->sends(worker); });
  slot.declares = true;
  slot.keep_alive = slot.role.contributes && !op.roles[static_cast<size_t>(slice)].contributes;
}

void WorkerQueueEngine::OnJobWaitsAt(uint32_t position) {
  if (!keep_alive_runs_.has_value()) return;  // only contribution skipping leaves positions out
  // Serial-number arithmetic as for parameter packets: at or after expected_.
  const uint64_t delta = (position - expected_) & (kPositionSpace - 1);
  if (delta >= kPositionSpace / 2) return;
  const uint64_t waits_at = expected_ + delta;
  if (waits_at < next_send_) return;  // reached: not behind the job
  results_seen_end_ = std::max(results_seen_end_, waits_at);
  // The positions in flight that it sits out: pull them now rather than at
  // the next timeout (again, if pulled before: the PS answers a completed
  // one and ignores a live one, whose result comes when it completes). A
  // queued resend of a position it sits out goes as a pull (SendResend);
  // the cause only names what a real resend is counted as.
  for (uint64_t p = expected_; p < next_send_; ++p) {
    const Slot& slot = SlotOf(p);
    if (slot.state == SlotState::kInFlight && slot.position == p && !slot.Sends() &&
        !slot.resend_queued) {
      QueueResend(p, ResendCause::kLoss);
    }
  }
}

void WorkerQueueEngine::OnParameterPacket(const wire::AtpMessage& message, TimePoint now) {
  OnParameterPacketWith(message.header, ResultPayload{.host = &message.payload}, now);
}

void WorkerQueueEngine::OnParameterPacketWith(const wire::AtpHeader& h,
                                              const ResultPayload& payload, TimePoint now) {
  if (!h.ack || wire::IsControl(h) || h.job != config_.shape.job || h.queue() != config_.queue) {
    ++counters_.ignored_foreign;
    return;
  }
  // Serial-number arithmetic: the position at or after expected_ whose low
  // 20 bits match. Everything in flight is within `slots` of expected_, and a
  // stale packet (below expected_) maps to a position >= next_send_.
  const uint64_t delta = (h.position() - expected_) & (kPositionSpace - 1);
  const uint64_t position = expected_ + delta;
  // Ahead, not a stale packet (those map to nearly 2^20 ahead).
  if (keep_alive_runs_.has_value() && !h.IsOverflowRequest() && delta < kPositionSpace / 2) {
    results_seen_end_ = std::max(results_seen_end_, position + 1);
  }
  if (position >= next_send_) {
    if (TakeEarlyResult(h, payload, position)) return;
    ++counters_.ignored_unknown_seq;
    // A second answer for the position a timeout resent first.
    if (!h.IsOverflowRequest() &&
        spurious_.OnDuplicate(h.position(), expected_, config_.slots)) {
      ++counters_.spurious_timeouts;
    }
    return;
  }
  Slot& slot = SlotOf(position);
  if (slot.state != SlotState::kInFlight || slot.position != position) {
    ++counters_.ignored_unknown_seq;  // a duplicate of a completed fragment
    return;
  }

  if (h.IsOverflowRequest()) {
    ++counters_.overflow_requests;
    // Not a contributor: no row to send; the result will come down anyway.
    if (!slot.Sends()) return;
    if (slot.send_as_float) {
      // A repeated request (another worker's integer contribution came
      // late): a second float32 resend goes out; which one the result will
      // answer is ambiguous.
      slot.timed = false;
    } else if (slot.timed) {
      // The request answers the integer fragment, sent once: a round trip.
      TakeRttSample(now - slot.round_trip_start, now);
      // The float32 resend's round trip starts with this request, which
      // reaches every worker at once.
      slot.round_trip_start = now;
    }
    slot.send_as_float = true;
    QueueResend(position, ResendCause::kOverflow);
    // The request proves the path works: the float32 resend gets a full RTO.
    RestartTimer(now);
    HoldResendsTriggeredAt(now);
    return;
  }

  // The result. Whether positions were waiting for the window before it.
  const bool window_was_full = next_send_ < assigned_end_ && !MaySendNew();
  Operation& op = *slot.op;
  WriteResult(h, payload, op, position);
  ++counters_.parameter_packets;
  if (h.collision) {
    // The next fragment of this slot (position + slots) uses the new index;
    // every worker gets it from this same packet before it may send that one.
    slot.aggregator = h.NewAggregatorIndex();
    ++counters_.collisions_seen;
  }
  if (h.ecn) ++counters_.ecn_marks;
  if (h.fp) ++counters_.float_results;
  if (slot.timed) TakeRttSample(now - slot.round_trip_start, now);
  spurious_.OnAnswered(position);  // the position a timeout resent first
  // An original the timeout presumed lost, answered before it was resent:
  // the recovery resends only positions below it (RecoveryMaySend).
  if (!slot.counted && position < recovery_end_) {
    recovery_evidence_end_ = std::max(recovery_evidence_end_, position + 1);
  }

  slot.state = SlotState::kAcked;
  --in_flight_;
  if (slot.counted) {
    slot.counted = false;
    --window_in_flight_;
  }
  CountAcked(op);
  // Progress proves the path works, sample or not (every completion may
  // answer a resend): the RTO returns to its unbacked value.
  if (FreeAckedPrefix()) rtt_.OnProgress();
  SkipRecoveredPositions();

  cc_.OnAck(position, h.ecn ? EcnMark::kMarked : EcnMark::kNotMarked, expected_);
  if (loss_.OnAck(position, expected_, cc_.send_bound()) == LossVerdict::kLost) {
    ++counters_.loss_events;
    cc_.OnLoss(expected_, expected_);
    QueueResend(expected_, ResendCause::kLoss);
  }
  // This packet let new positions out: their round trips start now, the
  // same instant for every worker of the job.
  if (window_was_full && MaySendNew()) {
    release_time_ = now;
    release_pending_ = true;
  }
  // RFC 6298 (5.3): restart the timer on an acknowledgement of new data.
  if (in_flight_ > 0) {
    RestartTimer(now);
  } else {
    StopTimer();
  }
  HoldResendsTriggeredAt(now);
}

// Inline: once per result, and as a call its register saves and restores
// were 13 of its own 33 instructions (callgrind, BM_PullWindow/256).
inline void WorkerQueueEngine::WriteResult(const wire::AtpHeader& h, const ResultPayload& payload,
                                           const Operation& op, uint64_t position) {
  const uint64_t offset = op.FirstValue(position);
  const size_t count =
      static_cast<size_t>(std::min<uint64_t>(kValuesPerFragment, op.output.size() - offset));
  const std::span<float> result = op.output.subspan(offset, count);
  // Positions mostly complete in order: the output of the fragment
  // kOutputPrefetchAhead on, within this operation (measured: about 10% of a
  // pulled fragment's cost, bench/RESULTS.md).
  PrefetchFragment<Use::kWrite>(op.output, offset + kOutputPrefetchAhead * kValuesPerFragment);
  // The position and header line of the copy kOutputPrefetchAhead on (its
  // payload lines are written around the cache).
  __builtin_prefetch(&received_[(position + kOutputPrefetchAhead) & slot_mask_], /*rw=*/1);
  ReceivedPacket& copy = received_[position & slot_mask_];
  copy.position = position;
  if (payload.host != nullptr) {
    DecodeResult(h.fp, *payload.host, config_.scale, result);
    wire::EncodeHeader(h, copy.header_bytes);
    wire::EncodePayload(*payload.host, std::span(copy.kept_payload).first<wire::kPayloadBytes>());
  } else {
    const std::span<const uint8_t, wire::kPayloadBytes> wire_payload(
        payload.wire_message + wire::kAtpHeaderBytes, wire::kPayloadBytes);
    // A fixed-size copy, which the compiler inlines (a library call per
    // packet otherwise).
    std::memcpy(copy.header_bytes.data(), payload.wire_message, wire::kAtpHeaderBytes);
    if (h.fp) [[unlikely]] {
      DecodeResultFromWire(/*fp=*/true, wire_payload, config_.scale, result);
      std::memcpy(copy.kept_payload.data(), wire_payload.data(), wire::kPayloadBytes);
    } else {
      dequantizer_.KeepAndDequantize(wire_payload, result, copy.kept_payload);
    }
  }
}

uint64_t WorkerQueueEngine::ResultsAfterLowest(std::span<uint32_t> bits) const {
  std::fill(bits.begin(), bits.end(), 0u);
  uint64_t end = expected_;
  // Results exist only within `slots` of expected_ (in flight, or early).
  for (uint64_t p = expected_ + 1; p < expected_ + config_.slots; ++p) {
    const Slot& slot = SlotOf(p);
    if (slot.position != p ||
        (slot.state != SlotState::kAcked && slot.state != SlotState::kEarlyResult)) {
      continue;
    }
    end = p + 1;
    const uint64_t i = p - expected_ - 1;
    if (i < uint64_t{32} * bits.size()) bits[i / 32] |= 1u << (i % 32);
  }
  return end;
}

void WorkerQueueEngine::CompleteOperation(const Operation& op) {
  assert(completions_.size() < completions_.capacity());
  completions_.push_back(op.id);  // capacity reserved by Enqueue
  --operations_not_done_;
  ++counters_.operations_completed;
}

bool WorkerQueueEngine::TakeEarlyResult(const wire::AtpHeader& h, const ResultPayload& payload,
                                        uint64_t position) {
  // With contribution skipping the job needs no contribution of this worker
  // for this position, so its result may come before the worker reached it
  // (a slower thread, or an operation the others started first). Keeping it
  // matters for liveness: the PS keeps a slot's last result only until the
  // slot's next generation completes. Positions below expected_ + slots have
  // a free slot (its previous position is acknowledged).
  if (h.IsOverflowRequest() || position >= assigned_end_ ||
      position >= expected_ + std::max<uint64_t>(config_.slots, held_results_.size())) {
    return false;
  }
  size_t i = send_cursor_;
  while (i < ops_.size() && ops_[i].end_position() <= position) ++i;
  if (i == ops_.size() || ops_[i].Contributes(position)) return false;
  Operation& op = ops_[i];
  Slot& slot = SlotOf(position);
  if (slot.state == SlotState::kEarlyResult && slot.position == position) return false;  // again
  if (position >= expected_ + config_.slots || slot.state != SlotState::kFree) {
    // The slot still holds an older position: hold the result aside.
    if (held_results_.empty()) return false;
    HeldResult& held = held_results_[position % held_results_.size()];
    if (held.position_plus_one == position + 1) return false;  // a duplicate
    WriteResult(h, payload, op, position);
    ++counters_.parameter_packets;
    ++counters_.early_results;
    held = HeldResult{.position_plus_one = position + 1,
                      .collision = h.collision,
                      .aggregator = h.collision ? h.NewAggregatorIndex() : uint16_t{0}};
    if (h.collision) ++counters_.collisions_seen;
    if (h.ecn) ++counters_.ecn_marks;
    return true;
  }
  WriteResult(h, payload, op, position);
  ++counters_.parameter_packets;
  ++counters_.early_results;
  if (h.collision) {
    slot.aggregator = h.NewAggregatorIndex();
    ++counters_.collisions_seen;
  }
  if (h.ecn) ++counters_.ecn_marks;
  slot.position = position;
  slot.op = &op;
  slot.state = SlotState::kEarlyResult;
  return true;
}

size_t WorkerQueueEngine::CollectCompletions(std::span<OperationId> out) {
  const size_t n = std::min(out.size(), completions_.size());
  std::copy_n(completions_.begin(), n, out.begin());
  completions_.erase(completions_.begin(), completions_.begin() + static_cast<ptrdiff_t>(n));
  PopCompletedOperations();
  return n;
}

WorkerQueueStats WorkerQueueEngine::stats() const {
  WorkerQueueStats s = counters_;
  s.window = cc_.window();
  s.ssthresh = cc_.ssthresh();
  s.window_reductions = cc_.debug_state().reductions;
  s.in_flight = in_flight_;
  s.window_in_flight = window_in_flight_;
  s.recovery_pending = recovery_end_ - std::min(recovery_next_, recovery_end_);
  s.lowest_unacked = expected_;
  s.next_position = next_send_;
  s.queued_positions = assigned_end_ - next_send_;
  s.srtt = rtt_.srtt();
  s.rttvar = rtt_.rttvar();
  s.rto = rtt_.Rto();
  return s;
}

}  // namespace atp::worker
