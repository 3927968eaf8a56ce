#include "lib/host/worker_io_loop.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "atp/status_macros.h"
#include "atp/transport/frame_pool.h"
#include "lib/host/clock.h"
#include "lib/protocol/join_message.h"
#include "lib/protocol/replay_message.h"
#include "lib/protocol/status_message.h"
#include "lib/wire/control_message.h"
#include "lib/wire/frame_checks.h"

namespace atp::host {
namespace {

constexpr TimeDelta kPublishInterval = TimeDelta::FromMilliseconds(1);

// ContinuesRun: `next` can be segment i of a job whose template is `first`:
// every field the same but the seq position (first's + i) and the aggregator
// index (carried per segment). Asked once per fragment sent: the fields are
// compared together, without a copy of `next` and a branch per field (the
// defaulted operator== was most of the run search's time). The layout checks
// catch a field added to AtpHeader and not compared here, unless it is one
// or two bytes placed after `aggregator` (it would fit in the padding).
static_assert(sizeof(wire::AtpHeader) == 28 && offsetof(wire::AtpHeader, aggregator) == 24,
              "compare every AtpHeader field in ContinuesRun");
bool ContinuesRun(const wire::AtpHeader& first, const wire::AtpHeader& next, size_t i) {
  const bool words = (next.seq == transport::SegmentSeq(first.seq, i)) &
                     (next.bitmap0 == first.bitmap0) & (next.bitmap1 == first.bitmap1);
  const bool bytes = (next.job == first.job) & (next.fan_in0 == first.fan_in0) &
                     (next.fan_in1 == first.fan_in1) & (next.edge == first.edge) &
                     (next.resend == first.resend) & (next.collision == first.collision) &
                     (next.ecn == first.ecn) & (next.ack == first.ack) & (next.fp == first.fp);
  return words & bytes;
}

// PrefetchFrame: asks for every cache line of a received frame. A burst's
// frames arrive cold (written by the NIC, or by another core), and the
// checks, the header and the dequantization would each wait for their lines
// in turn; fetching the next frames while one is processed overlaps those
// waits (as DPDK's l2fwd does).
inline void PrefetchFrame(const uint8_t* frame) {
  for (size_t offset = 0; offset < wire::kFrameBytes; offset += 64) {
    __builtin_prefetch(frame + offset);
  }
  __builtin_prefetch(frame + wire::kFrameBytes - 1);
}
// kPrefetchAhead: frames prefetched ahead of the one being processed.
constexpr size_t kPrefetchAhead = 2;

// A frame is the constant L2-L4 template, then the ATP header, then the payload.
static_assert(wire::kL2L4HeaderBytes == wire::kAtpOffset);
static_assert(wire::kAtpOffset + wire::kAtpHeaderBytes == wire::kPayloadOffset);
static_assert(wire::kPayloadOffset + wire::kPayloadBytes == wire::kFrameBytes);

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerIoLoop>> WorkerIoLoop::Create(
    const WorkerIoLoopConfig& config, const worker::WorkerQueueConfig& engine_config,
    transport::Queue& queue) {
  if (config.max_burst < 1 || config.max_burst > kMaxBurst) {
    return absl::InvalidArgumentError(
        absl::StrCat("WorkerIoLoopConfig.max_burst: ", config.max_burst, " is not in 1..",
                     kMaxBurst));
  }
  if (queue.index() != engine_config.queue) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerIoLoop: transport queue ", queue.index(),
                                                   " for engine queue ", engine_config.queue));
  }
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<worker::WorkerQueueEngine> engine,
                       worker::WorkerQueueEngine::Create(engine_config));
  return std::unique_ptr<WorkerIoLoop>(new WorkerIoLoop(config, std::move(engine), queue));
}

WorkerIoLoop::WorkerIoLoop(const WorkerIoLoopConfig& config,
                           std::unique_ptr<worker::WorkerQueueEngine> engine,
                           transport::Queue& queue)
    : config_(config),
      from_ps_(SourceAdmission::Only({&config.ps, 1}, config.parameter_source_check)),
      engine_(std::move(engine)),
      queue_(queue),
      burst_(config.max_burst),
      offload_segmentation_(queue.capabilities().OffloadsSegmentation()),
      rx_frames_(burst_),
      tx_frames_(2 * burst_),
      tx_headers_(burst_),
      tx_payloads_(2 * burst_),
      completed_ids_(burst_),
      stall_(config.stall_timeout) {
  if (offload_segmentation_) {
    segment_messages_.resize(burst_ * wire::kMessageBytes);
    segment_aggregators_.resize(burst_);
    for (size_t i = 0; i < burst_; ++i) {
      tx_payloads_[i] = segment_messages_.data() + i * wire::kMessageBytes + wire::kAtpHeaderBytes;
    }
  }
  // Any valid header of this queue gives the L2-L4 bytes every frame shares.
  wire::FrameFields fields;
  fields.src_mac = config.self.mac;
  fields.src_ip = config.self.ipv4;
  fields.dst_mac = config.ps.mac;
  fields.dst_ip = config.ps.ipv4;
  fields.ip_tos = wire::kTosEct0;
  fields.header.job = engine_->config().shape.job;
  fields.header.seq = wire::MakeSeq(queue.index(), 0);
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  std::array<uint8_t, wire::kFrameBytes> frame{};
  wire::EncodeFrame(fields, wire::Payload{}, config.base_port, frame);
  std::copy_n(frame.begin(), wire::kL2L4HeaderBytes, l2l4_template_.begin());
  pending_.reserve(burst_);
  finishing_.reserve(burst_);
  published_.queue = queue.index();
}

WorkerIoLoop::~WorkerIoLoop() {
  transport::ReleaseFrames(std::span(tx_frames_).subspan(tx_first_, tx_spare_));
  if (pending_head_ < pending_.size()) {
    transport::ReleaseFrames(std::span(pending_).subspan(pending_head_));
  }
}

void WorkerIoLoop::Submit(PieceRequest piece) {
  std::lock_guard<std::mutex> lock(inbox_mu_);
  inbox_.push_back(std::move(piece));
  inbox_size_.store(inbox_.size(), std::memory_order_release);
}

StepResult WorkerIoLoop::Step(TimePoint now) {
  if (!failed_ && config_.failure != nullptr && config_.failure->failed()) {
    FailQueue(config_.failure->first());
  }
  if (failed_) return StepFailed();
  if (!joined_) {
    joined_ = true;
    if (config_.join_at_start) SendJoin(/*answers=*/0);
  }
  bool work = TakeSubmitted(now);
  work |= Receive(now);
  // A control frame (a mismatch, an unrecoverable restart) may have failed
  // the queue: its records are gone and the engine must not be touched.
  if (failed_) return StepFailed();
  if (!unconfirmed_.empty() && now >= next_op_begin_resend_) ResendOpBegins(now);
  if (!replays_.empty()) work |= SendReplays();
  work |= FinishCompleted();
  CheckStall(now);
  if (failed_) return StepFailed();
  work |= Transmit(now);
  if (now >= next_publish_) {
    Publish();
    next_publish_ = now + kPublishInterval;
  }
  StepResult result;
  result.did_work = work;
  result.deadline = engine_->NextDeadline();
  if (Busy()) result.deadline = Earliest(result.deadline, stall_.deadline());
  if (!unconfirmed_.empty()) result.deadline = Earliest(result.deadline, next_op_begin_resend_);
  if (!replays_.empty()) result.deadline = now;  // more to replay next Step
  // Frames waiting for room at the receiver (held by the queue or by us):
  // come back soon even if nothing else happens.
  if (held_by_queue_ > 0 || HasPending()) {
    result.deadline = Earliest(result.deadline, now + TimeDelta::FromMicroseconds(50));
  }
  return result;
}

bool WorkerIoLoop::TakeSubmitted(TimePoint now) {
  if (inbox_size_.load(std::memory_order_acquire) == 0) return false;
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    taking_.swap(inbox_);
    inbox_size_.store(0, std::memory_order_relaxed);
  }
  // An idle queue that gets work starts the stall clock afresh.
  if (!Busy()) stall_.OnBusy(now);
  for (PieceRequest& piece : taking_) {
    const worker::WorkerQueueStats before = engine_->stats();
    const uint64_t first_position = before.next_position + before.queued_positions;
    absl::StatusOr<worker::OperationId> id = engine_->Enqueue(piece.input, piece.output, piece.skip);
    if (!id.ok()) {
      piece.op->PieceFailed(id.status());
      continue;
    }
    if (records_.empty()) first_id_ = *id;
    // Engine ids are consecutive from 1: the record of id sits at id - first_id_.
    records_.push_back(
        Record{std::move(piece.op), piece.output, piece.reduction, piece.average_divisor, false});
    if (config_.confirm_operations) {
      const worker::WorkerQueueStats after = engine_->stats();
      protocol::OpBeginBody body;
      body.piece = next_piece_++;
      body.first_position = first_position;
      body.positions = after.next_position + after.queued_positions - first_position;
      body.op_values = piece.op_values;
      records_.back().piece = body.piece;
      records_.back().confirmed = false;
      if (unconfirmed_.empty()) next_op_begin_resend_ = now + engine_->stats().rto;
      unconfirmed_.push_back(body);
      declared_.push_back(body);
      if (declared_.size() > kRedeclaredPieces) declared_.pop_front();
      wire::ControlMessage control;
      protocol::EncodeOpBegin(body, control);
      SendControl(control);
    }
    fragments_assigned_ += piece.fragments;
  }
  taking_.clear();
  return true;
}

bool WorkerIoLoop::Receive(TimePoint now) {
  size_t total = 0;
  // Every field is written by the check that validates each frame: one
  // header for the whole call (initialised once, not per frame).
  wire::AtpHeader header;
  for (int b = 0; b < kRxBurstsPerStep; ++b) {
    const size_t n = queue_.RxBurst(rx_frames_);
    for (size_t i = 0; i < std::min(n, kPrefetchAhead); ++i) PrefetchFrame(rx_frames_[i].data);
    for (size_t i = 0; i < n; ++i) {
      if (i + kPrefetchAhead < n) PrefetchFrame(rx_frames_[i + kPrefetchAhead].data);
      const std::span<const uint8_t> frame = rx_frames_[i].bytes();
      // Validated and its header decoded from one read of the header words.
      if (!wire::internal::ValidFrameHeader(frame, config_.base_port, &header)) [[unlikely]] {
        ++decode_errors_;
        continue;
      }
      if (!from_ps_.Admits(frame)) [[unlikely]] {
        ++source_refused_;
        continue;
      }
      stall_.OnFrameFromPs(now);
      if (wire::IsControl(header)) {
        OnControl(frame, now);
        continue;
      }
      // Failed by a control frame earlier in this burst: the outputs may be
      // freed already.
      if (failed_) continue;
      // Valid: exactly kFrameBytes. The engine dequantizes the payload
      // straight from the frame into the operation's output.
      engine_->OnParameterPacket(header, frame.subspan<wire::kAtpOffset, wire::kMessageBytes>(),
                                 now);
    }
    transport::ReleaseFrames(std::span(rx_frames_).first(n));
    total += n;
    if (n < rx_frames_.size()) break;
  }
  frames_received_ += total;
  if (total > 0 && !failed_) {
    const uint64_t completions = engine_->parameter_packets();
    if (completions != completions_seen_) {
      completions_seen_ = completions;
      stall_.OnProgress(now);
    }
  }
  return total > 0;
}

void WorkerIoLoop::OnControl(std::span<const uint8_t> frame, TimePoint now) {
  wire::FrameFields fields;
  wire::AtpMessage message;
  wire::ControlMessage control;
  if (wire::DecodeFrame(frame, config_.base_port, &fields, &message.payload) !=
          wire::DecodeError::kOk ||
      (message.header = fields.header, wire::DecodeControl(message, &control)) !=
          wire::ControlError::kOk ||
      message.header.job != engine_->config().shape.job ||
      message.header.queue() != queue_.index()) {
    ++control_rejected_;
    return;
  }
  switch (control.type) {
    case wire::ControlType::kStatus: {
      protocol::StatusBody status;
      if (!protocol::DecodeStatus(control, &status)) {
        ++control_rejected_;
        return;
      }
      ++control_frames_;
      OnStatus(status, control.incarnation, now);
      return;
    }
    case wire::ControlType::kPull:
    case wire::ControlType::kJoin:
    case wire::ControlType::kOpBegin:
    case wire::ControlType::kReplay:
      // Worker-to-PS types: DecodeControl already refuses them with ack set.
      ++control_rejected_;
      return;
  }
  ++control_rejected_;
}

void WorkerIoLoop::OnStatus(const protocol::StatusBody& status, uint64_t ps_incarnation,
                            TimePoint now) {
  const uint8_t job = engine_->config().shape.job;
  Failure failure;
  failure.queue = queue_.index();
  failure.workers = status.workers.ToVector();
  switch (status.kind) {
    case protocol::StatusKind::kWaitingForWorkers:
      stall_.OnWaitingFor(now, status.position, status.workers);
      // The job waits at a position this worker has not reached: it is
      // behind (contribution skipping) and catches up by pulling at once.
      engine_->OnJobWaitsAt(status.position);
      return;
    case protocol::StatusKind::kJoinRequest:
      SendJoin(/*answers=*/ps_incarnation);
      RedeclarePieces();
      return;
    case protocol::StatusKind::kOpConfirmed:
      OnOpConfirmed(status, now);
      return;
    case protocol::StatusKind::kReplayRequest:
      if (status.received <= status.expected ||
          (!status.workers.empty() && !status.workers.Contains(GlobalIndex()))) {
        return;  // asked of another worker
      }
      // A repeated request (the PS saw resends of those positions) while the
      // first is still being answered adds nothing; the list stays bounded.
      if (replays_.size() < kMaxReplayRanges &&
          std::none_of(replays_.begin(), replays_.end(), [&](const ReplayRange& r) {
            return r.first == status.expected && r.end == status.received;
          })) {
        replays_.push_back(ReplayRange{status.expected, status.received});
      }
      return;
    case protocol::StatusKind::kRestartUnrecoverable:
      failure.kind = FailureKind::kPsRestarted;
      return Fail(absl::AbortedError(absl::StrCat(
                      "ATP job ", job, " queue ", queue_.index(),
                      ": the parameter server restarted and cannot rebuild the queue: positions ",
                      status.expected, "..", status.received, " completed at worker(s) ",
                      absl::StrJoin(failure.workers, ", "),
                      " but not at the others, and their parameter packets were lost with it")),
                  failure);
    case protocol::StatusKind::kMismatch: {
      failure.kind = FailureKind::kMismatch;
      failure.detail = protocol::MismatchFieldName(status.field);
      const bool scale =
          status.field == static_cast<uint32_t>(protocol::MismatchField::kScale);
      const bool vs_ps = status.field == static_cast<uint32_t>(protocol::MismatchField::kSlots) ||
                         status.field == static_cast<uint32_t>(protocol::MismatchField::kLayout);
      const std::string expected = scale ? absl::StrCat(std::bit_cast<double>(status.expected))
                                         : absl::StrCat(status.expected);
      const std::string received = scale ? absl::StrCat(std::bit_cast<double>(status.received))
                                         : absl::StrCat(status.received);
      return Fail(absl::FailedPreconditionError(absl::StrCat(
                      "ATP job ", job, ": worker ", absl::StrJoin(failure.workers, ", "),
                      " has ", failure.detail, " = ", received,
                      vs_ps ? " but the parameter server's is "
                            : " but the first worker to declare it has ",
                      expected,
                      " (reported by the parameter server; ",
                      vs_ps || failure.detail == "io_threads" || failure.detail == "scale"
                          ? "every worker of a job must use the same JobOptions"
                          : "every worker must issue the same operations, of the same sizes, "
                            "in the same order",
                      ")")),
                  failure);
    }
  }
}

void WorkerIoLoop::Fail(absl::Status status, const Failure& failure) {
  status = WithFailure(std::move(status), failure);
  if (config_.failure != nullptr) {
    config_.failure->Record(status);
    status = config_.failure->first();
  }
  FailQueue(status);
}

void WorkerIoLoop::SendJoin(uint64_t answers) {
  const worker::WorkerQueueConfig& engine_config = engine_->config();
  const worker::WorkerQueueStats stats = engine_->stats();
  protocol::JoinBody join;
  join.io_threads = config_.io_threads;
  join.slots = engine_config.slots;
  join.scale = engine_config.scale;
  join.layout_fingerprint = protocol::LayoutFingerprint(engine_config.shape.workers_per_rack);
  join.lowest_unacked = stats.lowest_unacked;
  join.next_position = stats.next_position;
  join.acked_end = engine_->ResultsAfterLowest(join.acked_after_lowest);
  join.answers = answers;
  wire::ControlMessage control;
  protocol::EncodeJoin(join, control);
  SendControl(control);
}

int WorkerIoLoop::GlobalIndex() const {
  const worker::WorkerQueueConfig& engine_config = engine_->config();
  int rank = engine_config.worker_in_rack;
  for (int r = 0; r < engine_config.rack; ++r) rank += engine_config.shape.workers_in_rack(r);
  return rank;
}

bool WorkerIoLoop::SendReplays() {
  // A burst of frames per Step: a request may name up to `slots` positions.
  size_t frames = 0;
  while (!replays_.empty() && frames + protocol::kReplayParts <= burst_) {
    ReplayRange& range = replays_.front();
    const uint64_t position = range.first++;
    if (range.first >= range.end) replays_.pop_front();
    const worker::WorkerQueueEngine::ReceivedPacket* packet = engine_->Received(position);
    if (packet == nullptr) continue;  // no result of it here
    for (const protocol::ReplayPart& part :
         protocol::SplitReplay(position, packet->header(), packet->payload())) {
      wire::ControlMessage control;
      protocol::EncodeReplay(part, control);
      SendControl(control, position);
      ++frames;
    }
  }
  return frames > 0;
}

void WorkerIoLoop::SendControl(const wire::ControlMessage& body, uint64_t position) {
  const worker::WorkerQueueConfig& engine_config = engine_->config();
  wire::ControlMessage control = body;
  control.sender = static_cast<uint32_t>(GlobalIndex());
  control.incarnation = config_.incarnation;
  wire::ControlSender sender;
  sender.worker_in_rack = static_cast<uint32_t>(engine_config.worker_in_rack);
  sender.rack = static_cast<uint32_t>(engine_config.rack);
  sender.fan_in0 = static_cast<uint8_t>(engine_config.shape.workers_in_rack(engine_config.rack));
  sender.fan_in1 = static_cast<uint8_t>(engine_config.shape.racks());
  const wire::AtpMessage message =
      wire::MakeWorkerControl(engine_config.shape.job, sender, queue_.index(),
                              static_cast<uint32_t>(position & wire::kPositionMask), control);
  transport::FrameRef frame;
  if (!TakeTxFrame(&frame)) return;
  wire::FrameFields fields;
  fields.src_mac = config_.self.mac;
  fields.src_ip = config_.self.ipv4;
  fields.dst_mac = config_.ps.mac;
  fields.dst_ip = config_.ps.ipv4;
  fields.ip_tos = wire::kTosEct0;
  fields.header = message.header;
  wire::EncodeFrame(fields, message.payload, config_.base_port,
                    std::span<uint8_t, wire::kFrameBytes>(frame.data, wire::kFrameBytes));
  frame.length = wire::kFrameBytes;
  if (queue_.TxBurst({&frame, 1}) == 1) {
    ++frames_sent_;
    held_by_queue_ = queue_.Flush();
  } else {
    transport::ReleaseFrames({&frame, 1});
  }
}

void WorkerIoLoop::CheckStall(TimePoint now) {
  const std::optional<StallWatch::Stall> stall = stall_.Check(now, Busy());
  if (!stall.has_value()) return;
  Failure failure;
  failure.kind = stall->kind;
  failure.queue = queue_.index();
  failure.workers = stall->workers.ToVector();
  const std::string prefix =
      absl::StrCat("ATP job ", engine_->config().shape.job, " queue ", queue_.index(),
                   ": no fragment completed for ",
                   absl::FormatDuration(ToDuration(stall_.stall_timeout())),
                   " (JobOptions.stall_timeout): ");
  absl::Status status;
  switch (stall->kind) {
    case FailureKind::kPsUnreachable:
      status = absl::UnavailableError(
          absl::StrCat(prefix, "parameter server ", config_.ps.ipv4.ToString(),
                       " unreachable: no frame from it in that time"));
      break;
    case FailureKind::kWaitingForWorkers:
      status = absl::AbortedError(absl::StrCat(
          prefix, "the parameter server waits for worker(s) ",
          absl::StrJoin(failure.workers, ", "), " (rack-major indices) at position ",
          stall->position));
      break;
    case FailureKind::kStalled:
    case FailureKind::kPsRestarted:  // StallWatch never says these two
    case FailureKind::kMismatch:
      failure.kind = FailureKind::kStalled;
      status = absl::AbortedError(absl::StrCat(
          prefix, "the parameter server answers but completes nothing and names no worker"));
      break;
  }
  // The first failure is the Worker's, even if another queue was quicker.
  Fail(std::move(status), failure);
}

void WorkerIoLoop::FailQueue(const absl::Status& status) {
  Abandon(status);
  failed_ = true;
}

StepResult WorkerIoLoop::StepFailed() {
  StepResult result;
  if (inbox_size_.load(std::memory_order_acquire) > 0) {
    const absl::Status status = config_.failure != nullptr ? config_.failure->first()
                                                           : absl::FailedPreconditionError(
                                                                 "the queue failed earlier");
    FailQueue(status);
    result.did_work = true;
  }
  // Drain what arrives (late parameter packets would write into outputs the
  // caller may already have freed), so the transport's ring never fills.
  for (int b = 0; b < kRxBurstsPerStep; ++b) {
    const size_t n = queue_.RxBurst(rx_frames_);
    transport::ReleaseFrames(std::span(rx_frames_).first(n));
    frames_received_ += n;
    if (n > 0) result.did_work = true;
    if (n < rx_frames_.size()) break;
  }
  return result;
}

bool WorkerIoLoop::FinishCompleted() {
  size_t n;
  bool any = false;
  while ((n = engine_->CollectCompletions(completed_ids_)) > 0) {
    any = true;
    for (size_t i = 0; i < n; ++i) {
      Record& record = records_[completed_ids_[i] - first_id_];
      record.engine_done = true;
      // Unconfirmed: its result waits for the PS's confirmation (OnOpConfirmed).
      if (record.confirmed) Deliver(record);
    }
  }
  if (!any) return false;
  DeliverFinished();
  return true;
}

void WorkerIoLoop::Deliver(Record& record) {
  record.done = true;
  if (record.reduction == Reduction::kAverage) {
    const int divisor = record.average_divisor > 0 ? record.average_divisor : config_.total_workers;
    const float workers = static_cast<float>(divisor);
    for (float& v : record.output) v /= workers;
  }
  finishing_.push_back(record.op);
}

void WorkerIoLoop::DeliverFinished() {
  while (!records_.empty() && records_.front().done) {
    records_.pop_front();
    ++first_id_;
  }
  if (finishing_.empty()) return;
  // Publish before finishing, so that stats() after a Wait sees this work.
  Publish();
  for (std::shared_ptr<internal::OpState>& op : finishing_) op->PieceDone();
  finishing_.clear();
}

// A confirmation is multicast to the job's addresses, and pieces are numbered
// from 0 in every run: a late confirmation of the run before (a worker of it
// resent its kOpBegin, the PS confirmed it again before it saw anything of
// the new run) reaches the new run's workers with a piece number they have
// pending. Taken, it stopped that worker's kOpBegin resends while the PS had
// dropped its only declaration as another run's (held back until the new run
// joined): the PS waited for that declaration for good, the other workers
// were never confirmed, and the queue stalled. So the PS names the run in
// each confirmation (`run`, a digest of the declarations' incarnations), and
// a worker takes
//   - one that answers its own declaration (`workers` names this worker,
//     `received` is this incarnation): the PS accepted that declaration into
//     the ledger, and every declaration of the piece there is of the run the
//     PS serves with this worker in it. Its `run` is this worker's run_;
//   - one whose `run` is run_: the same set of incarnations declared it;
//   - one with `run` 0: a PS from before `run` existed (as before).
// Any other is ignored: another run's, or of this run before this worker
// knows its digest (the first confirmation of a run answers its last
// declarer only). If the piece is pending here, the kOpBegins not yet
// confirmed are resent at once (ResendOpBegins, at most once until run_ is
// learned), so that the PS answers this worker (its ledger confirms again
// what it confirmed): one round trip, once per run (and after a redo, which
// changes the run's incarnations); a lost answer costs a retransmission
// timeout, as a lost confirmation always did.
void WorkerIoLoop::OnOpConfirmed(const protocol::StatusBody& status, TimePoint now) {
  const uint64_t piece = status.expected;
  auto pending = std::find_if(unconfirmed_.begin(), unconfirmed_.end(),
                              [piece](const protocol::OpBeginBody& b) { return b.piece == piece; });
  if (status.run != 0) {
    const bool answers_this_worker = status.workers.Contains(GlobalIndex()) &&
                                     status.received == config_.incarnation;
    if (answers_this_worker) {
      run_ = status.run;
      resent_for_foreign_ = false;
    } else if (status.run != run_) {
      if (pending != unconfirmed_.end() && !resent_for_foreign_) {
        resent_for_foreign_ = true;
        next_op_begin_resend_ = now;  // Step's ResendOpBegins, this Step
      }
      return;
    }
  }
  if (pending == unconfirmed_.end()) return;  // a repeat
  unconfirmed_.erase(pending);
  stall_.OnProgress(now);
  for (Record& record : records_) {
    if (record.done || record.piece != piece || record.confirmed) continue;
    record.confirmed = true;
    if (record.engine_done) Deliver(record);
    break;
  }
  DeliverFinished();
}

void WorkerIoLoop::ResendOpBegins(TimePoint now) {
  size_t sent = 0;
  for (const protocol::OpBeginBody& body : unconfirmed_) {
    if (sent++ == burst_) break;
    wire::ControlMessage control;
    protocol::EncodeOpBegin(body, control);
    SendControl(control);
  }
  next_op_begin_resend_ = now + engine_->stats().rto;
}

void WorkerIoLoop::RedeclarePieces() {
  for (const protocol::OpBeginBody& body : declared_) {
    wire::ControlMessage control;
    protocol::EncodeOpBegin(body, control);
    SendControl(control);
  }
}

bool WorkerIoLoop::RetryPending() {
  if (segments_head_ < segments_end_) return SendSegmentRuns();
  if (pending_head_ == pending_.size()) return true;
  const size_t taken = queue_.TxBurst(std::span(pending_).subspan(pending_head_));
  frames_sent_ += taken;
  pending_head_ += taken;
  if (pending_head_ < pending_.size()) return false;
  pending_.clear();
  pending_head_ = 0;
  return true;
}

bool WorkerIoLoop::TakeTxFrame(transport::FrameRef* frame) {
  if (tx_spare_ == 0) return queue_.tx_pool().AllocBurst({frame, 1}) == 1;
  // The oldest spare, not a new frame: a transport that hands frames over
  // in allocation order (the loopback ingress ring) would hold a frame
  // allocated after the spares back until they are sent, and a queue with
  // no fragment left to send never sends them.
  *frame = tx_frames_[tx_first_];
  ++tx_first_;
  --tx_spare_;
  return true;
}

WorkerIoLoop::SendOutcome WorkerIoLoop::SendFrames(TimePoint now) {
  SendOutcome out;
  // Frames allocated by an earlier Step and not used wait at tx_first_, with
  // their payload pointers; this call tops them up to a burst. The engine
  // often sends a frame or two a step: allocating and freeing a whole burst
  // each time, or moving the spares to the front and working out every
  // payload pointer again, would cost per burst, not per frame sent. Frames
  // go out in allocation order, which a transport may need (a loopback
  // ingress ring publishes its slots in that order).
  if (tx_first_ + burst_ > tx_frames_.size()) {
    std::copy_n(tx_frames_.begin() + static_cast<ptrdiff_t>(tx_first_), tx_spare_,
                tx_frames_.begin());
    std::copy_n(tx_payloads_.begin() + static_cast<ptrdiff_t>(tx_first_), tx_spare_,
                tx_payloads_.begin());
    tx_first_ = 0;
  }
  const std::span<transport::FrameRef> frames = std::span(tx_frames_).subspan(tx_first_, burst_);
  const std::span<uint8_t*> payloads = std::span(tx_payloads_).subspan(tx_first_, burst_);
  const size_t allocated = tx_spare_ + queue_.tx_pool().AllocBurst(frames.subspan(tx_spare_));
  for (size_t i = tx_spare_; i < allocated; ++i) {
    payloads[i] = frames[i].data + wire::kPayloadOffset;
  }
  out.capacity = allocated;
  // CollectSends also handles an expired retransmission timer, even with no
  // room: it queues the resends for the next call.
  const size_t n = engine_->CollectSends(now, std::span(tx_headers_).first(allocated),
                                         payloads.first(allocated));
  out.collected = n;
  for (size_t i = 0; i < n; ++i) {
    uint8_t* frame = frames[i].data;
    std::memcpy(frame, l2l4_template_.data(), wire::kL2L4HeaderBytes);
    wire::EncodeHeader(tx_headers_[i], std::span<uint8_t, wire::kAtpHeaderBytes>(
                                           frame + wire::kAtpOffset, wire::kAtpHeaderBytes));
    frames[i].length = wire::kFrameBytes;
  }
  tx_first_ += n;
  tx_spare_ = allocated - n;
  if (n > 0) {
    const size_t taken = queue_.TxBurst(frames.first(n));
    frames_sent_ += taken;
    if (taken < n) {
      pending_.assign(frames.begin() + static_cast<ptrdiff_t>(taken),
                      frames.begin() + static_cast<ptrdiff_t>(n));
      pending_head_ = 0;
      out.blocked = true;
    }
  }
  return out;
}

WorkerIoLoop::SendOutcome WorkerIoLoop::SendSegmented(TimePoint now) {
  SendOutcome out;
  out.capacity = burst_;
  // The payloads land in segment_messages_, each behind the 16 bytes its
  // header takes (the transport writes them from the job, in place).
  const size_t n = engine_->CollectSends(now, tx_headers_, std::span(tx_payloads_).first(burst_));
  out.collected = n;
  if (n == 0) return out;
  for (size_t i = 0; i < n; ++i) segment_aggregators_[i] = tx_headers_[i].aggregator;
  segments_head_ = 0;
  segments_end_ = n;
  out.blocked = !SendSegmentRuns();
  return out;
}

bool WorkerIoLoop::SendSegmentRuns() {
  while (segments_head_ < segments_end_) {
    const size_t first = segments_head_;
    const wire::AtpHeader& head = tx_headers_[first];
    size_t k = 1;
    while (first + k < segments_end_ && ContinuesRun(head, tx_headers_[first + k], k)) ++k;
    transport::SegmentationJob job;
    std::copy_n(l2l4_template_.begin(), wire::kL2L4HeaderBytes, job.header.begin());
    wire::EncodeHeader(head, std::span<uint8_t, wire::kAtpHeaderBytes>(
                                 job.header.data() + wire::kAtpOffset, wire::kAtpHeaderBytes));
    job.messages = std::span(segment_messages_).subspan(first * wire::kMessageBytes,
                                                        k * wire::kMessageBytes);
    job.aggregators = std::span(segment_aggregators_).subspan(first, k);
    const size_t taken = queue_.TxSegmented(job);
    frames_sent_ += taken;
    segments_head_ += taken;
    if (taken < k) return false;
  }
  segments_head_ = 0;
  segments_end_ = 0;
  return true;
}

bool WorkerIoLoop::Transmit(TimePoint now) {
  bool work = false;
  bool blocked = false;
  if (HasPending()) {
    const size_t before = pending_head_ + segments_head_;
    blocked = !RetryPending();
    work = pending_head_ + segments_head_ != before || !HasPending();
  }
  // With no room the engine must still see an expired retransmission timer
  // (CollectSends with no room queues the resends), or its deadline stays in
  // the past and the caller would step again at once, forever.
  if (blocked && engine_->NextDeadline() <= now) {
    engine_->CollectSends(now, std::span<wire::AtpMessage>());
  }
  for (int b = 0; b < kTxBurstsPerStep && !blocked; ++b) {
    if (!engine_->WantsToSend() && engine_->NextDeadline() > now) break;
    const SendOutcome sent = offload_segmentation_ ? SendSegmented(now) : SendFrames(now);
    if (sent.collected == 0) break;
    work = true;
    blocked = sent.blocked;
    if (sent.collected < sent.capacity) break;
  }
  if (work || held_by_queue_ > 0) held_by_queue_ = queue_.Flush();
  return work;
}

void WorkerIoLoop::Publish() {
  const worker::WorkerQueueStats e = engine_->stats();
  const transport::QueueStats q = queue_.stats();
  WorkerQueueStatistics s;
  s.queue = queue_.index();
  s.frames_sent = frames_sent_;
  s.fragments_sent = e.fragments_sent;
  s.fragments_skipped = e.fragments_skipped;
  s.fragments_not_contributed = e.fragments_not_contributed;
  s.pulls_sent = e.pulls_sent;
  s.retransmissions = e.resends_loss + e.resends_timeout + e.resends_overflow;
  s.timeouts = e.timeouts;
  s.spurious_timeouts = e.spurious_timeouts;
  s.loss_events = e.loss_events;
  s.collisions = e.collisions_seen;
  s.ecn_marks = e.ecn_marks;
  s.window_reductions = e.window_reductions;
  s.overflow_requests = e.overflow_requests;
  s.float_results = e.float_results;
  s.parameter_packets = e.parameter_packets;
  s.frames_received = frames_received_;
  s.decode_errors = decode_errors_;
  s.control_frames = control_frames_;
  s.control_rejected = control_rejected_;
  s.source_refused = source_refused_;
  s.ignored = e.ignored_unknown_seq + e.ignored_foreign;
  s.tx_backpressure = q.tx_backpressure;
  s.window = e.window;
  s.ssthresh = e.ssthresh;
  s.in_flight = e.in_flight;
  s.queued_fragments = e.queued_positions;
  s.fragments_assigned = fragments_assigned_;
  s.srtt = ToDuration(e.srtt);
  s.rto = ToDuration(e.rto);
  std::lock_guard<std::mutex> lock(published_mu_);
  published_ = s;
}

WorkerQueueStatistics WorkerIoLoop::statistics() const {
  std::lock_guard<std::mutex> lock(published_mu_);
  return published_;
}

void WorkerIoLoop::Abandon(const absl::Status& status) {
  Publish();
  {
    std::lock_guard<std::mutex> lock(inbox_mu_);
    for (PieceRequest& piece : inbox_) piece.op->PieceFailed(status);
    inbox_.clear();
    inbox_size_.store(0, std::memory_order_relaxed);
  }
  for (Record& record : records_) {
    if (!record.done) record.op->PieceFailed(status);
  }
  records_.clear();
}

}  // namespace atp::host
