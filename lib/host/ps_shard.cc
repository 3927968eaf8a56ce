#include "lib/host/ps_shard.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "atp/status_macros.h"
#include "lib/host/worker_config.h"
#include "lib/logging/log.h"
#include "lib/protocol/join_message.h"
#include "lib/protocol/op_begin_message.h"
#include "lib/protocol/status_message.h"
#include "lib/wire/byte_order.h"
#include "lib/wire/control_message.h"

namespace atp::host {
namespace {

// RandomIncarnation: a process's random identity in its control frames.
uint64_t RandomIncarnation() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Create(const ParameterServerOptions& options,
                                                         uint32_t shard,
                                                         const transport::DeviceAddress& self) {
  PsDestinations destinations;
  PsSources sources;
  for (const ParameterServerJobOptions& job : options.jobs) {
    if (job.delivery == ParameterDelivery::kMulticast) {
      destinations[job.job_id] = {job.multicast_group};
    } else {
      destinations[job.job_id] = job.workers;
    }
    // The job's named sources, else its workers (kUnicast names them all).
    sources[job.job_id] = SourceAdmission::Only(
        job.gradient_sources.empty() ? job.workers : job.gradient_sources,
        options.gradient_source_check);
  }
  return Create(ToPsConfig(options, shard), std::move(destinations), self, options.base_port,
                std::move(sources));
}

absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Create(ps::PsConfig engine_config,
                                                         PsDestinations destinations,
                                                         const transport::DeviceAddress& self,
                                                         uint16_t base_port, PsSources sources) {
  const bool scans_orphans = !engine_config.orphan_timeout.IsInfinite();
  const TimeDelta waiting_report_interval = engine_config.waiting_report_interval;
  ATP_ASSIGN_OR_RETURN(ps::PsEngine engine, ps::PsEngine::Create(std::move(engine_config)));
  return std::unique_ptr<PsShard>(new PsShard(std::move(engine), scans_orphans,
                                              waiting_report_interval, std::move(destinations),
                                              self, base_port, std::move(sources)));
}

PsShard::PsShard(ps::PsEngine engine, bool scans_orphans, TimeDelta waiting_report_interval,
                 PsDestinations destinations, const transport::DeviceAddress& self,
                 uint16_t base_port, PsSources sources)
    : engine_(std::move(engine)),
      scans_orphans_(scans_orphans),
      base_port_(base_port),
      destinations_(std::move(destinations)),
      sources_(std::move(sources)),
      incarnation_(RandomIncarnation()),
      waiting_report_interval_(waiting_report_interval) {
  wire::FrameFields fields;
  fields.src_ip = self.ipv4;
  fields.src_mac = self.mac;
  fields.ip_tos = wire::kTosEct0;
  for (size_t job = 0; job < destinations_.size(); ++job) {
    for (const transport::DeviceAddress& to : destinations_[job]) {
      fields.dst_ip = to.ipv4;
      fields.dst_mac = to.mac;
      std::array<uint8_t, wire::kFrameBytes> frame;
      wire::EncodeFrame(fields, wire::Payload{}, base_port_, frame);
      l2l4_templates_[job].emplace_back();
      std::copy_n(frame.begin(), wire::kL2L4HeaderBytes, l2l4_templates_[job].back().begin());
    }
  }
}

void PsShard::OnMessage(const wire::AtpMessage& message, TimePoint now, FrameSink& sink) {
  encoder_.out = &sink;
  if (wire::IsControl(message.header) &&
      wire::ValidateHeader(message.header) == wire::DecodeError::kOk) {
    OnControl(message, now, sink);
  } else {
    if (Unsynchronized(message.header.job, message.header.queue())) [[unlikely]] {
      // A run is joining that the PS has not rebuilt the queue for (or a
      // worker restarted alone): what the PS holds of it is another run's,
      // and a result from it would reach every worker. Its workers resend
      // once the queue is rebuilt for them.
      ++unsynchronized_gradients_;
      RequestJoin(message.header.job, message.header.queue(), now);
      encoder_.out = nullptr;
      return;
    }
    engine_.OnGradient(message, now, encoder_);
    if (engine_.has_out_of_window()) RequestJoins(now);
    if (!Synchronized(message.header.job, message.header.queue())) [[unlikely]] {
      RequestJoin(message.header.job, message.header.queue(), now);
    }
    if (queues_replaying_ > 0) [[unlikely]] OnGradientWhileReplaying(message.header, now);
  }
  encoder_.out = nullptr;
}

void PsShard::OnControl(const wire::AtpMessage& message, TimePoint now, FrameSink& /*sink*/) {
  wire::ControlMessage control;
  if (wire::DecodeControl(message, &control) != wire::ControlError::kOk) {
    ++control_rejected_;
    return;
  }
  switch (control.type) {
    case wire::ControlType::kPull:
      engine_.OnPull(message, now, encoder_);  // SkipReduce's contribution variant
      return;
    case wire::ControlType::kJoin:
      OnJoin(message, control, now);
      return;
    case wire::ControlType::kReplay:
      OnReplay(message, control);
      return;
    case wire::ControlType::kOpBegin:
      OnOpBegin(message, control, now);
      return;
    case wire::ControlType::kStatus:
      ++control_rejected_;  // PS-to-worker only: DecodeControl refuses it without ack
      return;
  }
  ++control_rejected_;
}

PsShard::JobControl& PsShard::Control(uint8_t job) {
  std::unique_ptr<JobControl>& control = control_[job];
  if (control == nullptr) {
    control = std::make_unique<JobControl>(engine_.job_layout(job)->total_workers(),
                                           engine_.served_queues());
  }
  return *control;
}

void PsShard::SendStatus(uint8_t job, uint32_t queue, const protocol::StatusBody& status) {
  const ps::JobLayout& layout = *engine_.job_layout(job);
  wire::ControlMessage control;
  control.sender = wire::kControlSenderPs;
  control.incarnation = incarnation_;
  protocol::EncodeStatus(status, control);
  encoder_.Send(wire::MakePsControl(job, static_cast<uint8_t>(layout.max_rack_workers()),
                                    static_cast<uint8_t>(layout.racks()), queue, status.position,
                                    control));
  ++status_sent_;
}

void PsShard::RequestJoins(TimePoint now) {
  out_of_window_.clear();
  engine_.TakeOutOfWindow(out_of_window_);
  for (const ps::PsEngine::OutOfWindow& lost : out_of_window_) {
    RequestJoin(lost.job, lost.queue, now);
  }
}

void PsShard::RequestJoin(uint8_t job, uint32_t queue, TimePoint now) {
  if (engine_.job_layout(job) == nullptr || !engine_.ServesQueue(queue)) return;
  JobControl& control = Control(job);
  if (now < control.next_join_request[queue]) return;
  control.next_join_request[queue] = now + kJoinRequestInterval;
  protocol::StatusBody status;
  status.kind = protocol::StatusKind::kJoinRequest;
  SendStatus(job, queue, status);
  ++join_requests_sent_;
}

std::optional<int> PsShard::SenderOf(const wire::AtpMessage& message,
                                     const wire::ControlMessage& control) const {
  const ps::JobLayout* layout = engine_.job_layout(message.header.job);
  const int rack = std::countr_zero(message.header.bitmap1);
  const int in_rack = std::countr_zero(message.header.bitmap0);
  if (layout == nullptr || !engine_.ServesQueue(message.header.queue()) ||
      rack >= layout->racks() || in_rack >= wire::kMaxFanIn ||
      control.sender >= static_cast<uint32_t>(layout->total_workers()) ||
      static_cast<uint32_t>(layout->worker_index(rack, in_rack)) != control.sender) {
    return std::nullopt;
  }
  return static_cast<int>(control.sender);
}

void PsShard::OnOpBegin(const wire::AtpMessage& message, const wire::ControlMessage& control,
                        TimePoint now) {
  const std::optional<int> worker = SenderOf(message, control);
  protocol::OpBeginBody body;
  if (!worker.has_value() || !protocol::DecodeOpBegin(control, &body)) {
    ++control_rejected_;
    return;
  }
  ++control_received_;
  const uint8_t job = message.header.job;
  const uint32_t queue = message.header.queue();
  // A restarted PS whose workers' operations are all complete but for this
  // confirmation receives no gradient: the joins' answers declare again the
  // pieces it never saw (WorkerIoLoop::RedeclarePieces).
  if (!Synchronized(job, queue)) RequestJoin(job, queue, now);
  JobControl& state = Control(job);
  // A new run's kOpBegin ahead of its join (lost or late): hold the queue
  // back as its join would.
  if (state.tracker.OnOtherIncarnation(engine_.served_index(queue), *worker, control.incarnation)) {
    NoteSynchronization(job, queue, *worker, state.tracker.Unsynchronized(engine_.served_index(queue)));
    RequestJoin(job, queue, now);
  }
  // Between two runs a declaration may be of either, and the ledger compares
  // the pieces of one run only: a late resend of the old run's piece 0 beside
  // the new run's would be a mismatch that is none. The new run's workers
  // declare again until confirmed (WorkerIoLoop::ResendOpBegins), and its
  // decision starts the ledger over.
  if (state.tracker.Unsynchronized(engine_.served_index(queue))) {
    ++unsynchronized_declarations_;
    return;
  }
  const ps::OpLedger::Outcome outcome =
      state.ledger.OnOpBegin(engine_.served_index(queue), *worker, control.incarnation, body);
  protocol::StatusBody status;
  status.position = static_cast<uint32_t>(body.first_position & wire::kPositionMask);
  switch (outcome.verdict) {
    case ps::OpLedger::Verdict::kPending:
    case ps::OpLedger::Verdict::kTooOld:
      return;
    case ps::OpLedger::Verdict::kConfirmed:
      // Multicast, so it also reaches processes of another run at the job's
      // addresses (a new run's workers while a late confirmation of the run
      // before is on its way): `run` says whose it is, and `workers` /
      // `received` name the declaration it answers, from which a worker
      // learns its own run's `run` (WorkerIoLoop::OnOpConfirmed).
      status.kind = protocol::StatusKind::kOpConfirmed;
      status.expected = body.piece;
      status.run = outcome.run;
      status.workers.Add(*worker);
      status.received = control.incarnation;
      SendStatus(job, queue, status);
      ++ops_confirmed_;
      return;
    case ps::OpLedger::Verdict::kMismatch: {
      const bool size = outcome.expected.op_values != body.op_values;
      status.kind = protocol::StatusKind::kMismatch;
      status.workers.Add(*worker);
      status.field = static_cast<uint32_t>(size ? protocol::MismatchField::kOperationSize
                                                : protocol::MismatchField::kOperationPieces);
      status.expected = size ? outcome.expected.op_values : outcome.expected.positions;
      status.received = size ? body.op_values : body.positions;
      SendStatus(job, queue, status);
      if (queue != 0) SendStatus(job, 0, status);  // every worker has queue 0
      ++mismatches_;
      internal::Logger().error(
          "parameter server: job {} queue {}: worker {} declared piece {} with {} = {}, worker "
          "{} with {}",
          job, queue, *worker, body.piece, protocol::MismatchFieldName(status.field),
          status.received, outcome.first_worker, status.expected);
      return;
    }
  }
}

void PsShard::OnJoin(const wire::AtpMessage& message, const wire::ControlMessage& control,
                     TimePoint now) {
  const uint8_t job = message.header.job;
  const uint32_t queue = message.header.queue();
  const ps::JobLayout* layout = engine_.job_layout(job);
  protocol::JoinBody join;
  // The sender's global index must be the one its header's bitmaps name.
  const int rack = std::countr_zero(message.header.bitmap1);
  const int in_rack = std::countr_zero(message.header.bitmap0);
  if (layout == nullptr || !engine_.ServesQueue(queue) || !protocol::DecodeJoin(control, &join) ||
      rack >= layout->racks() || in_rack >= wire::kMaxFanIn ||
      static_cast<uint32_t>(layout->worker_index(rack, in_rack)) != control.sender ||
      control.sender >= static_cast<uint32_t>(layout->total_workers())) {
    ++control_rejected_;
    return;
  }
  if (join.answers != 0 && join.answers != incarnation_) {
    // It answered a dead PS's request, and was still queued for it when this
    // PS started: the stream has moved since. One from every worker would make a
    // decision that misses the results the dead PS delivered after them, and
    // this PS would ask no more.
    ++stale_joins_;
    return;
  }
  ++control_received_;
  const int worker = static_cast<int>(control.sender);
  JobControl& state = Control(job);
  auto report = [&](protocol::MismatchField field, uint64_t expected, uint64_t received) {
    ReportJoinMismatch(job, queue, worker, field, expected, received);
  };
  std::vector<uint8_t> racks(static_cast<size_t>(layout->racks()));
  for (int r = 0; r < layout->racks(); ++r) {
    racks[static_cast<size_t>(r)] = static_cast<uint8_t>(std::popcount(layout->rack_bitmap(r)));
  }
  const uint64_t scale_bits = std::bit_cast<uint64_t>(join.scale);
  if (join.slots != engine_.slots()) {
    return report(protocol::MismatchField::kSlots, engine_.slots(), join.slots);
  }
  if (const uint32_t fingerprint = protocol::LayoutFingerprint(racks);
      join.layout_fingerprint != fingerprint) {
    return report(protocol::MismatchField::kLayout, fingerprint, join.layout_fingerprint);
  }
  // A worker of the run the queue serves (or of the first run to join it)
  // is held to that run's values now. One of another incarnation may be of
  // a new run, with values of its own: its run's joins are checked together
  // at their decision (CheckNewRun).
  const bool of_another_run =
      Synchronized(job, queue) &&
      !state.tracker.SynchronizedWith(engine_.served_index(queue), worker, control.incarnation);
  if (!of_another_run) {
    JobControl::Reference& reference = state.reference;
    if (!reference.set) {
      reference = {true, join.io_threads, scale_bits};
    } else if (join.io_threads != reference.io_threads) {
      return report(protocol::MismatchField::kIoThreads, reference.io_threads, join.io_threads);
    } else if (scale_bits != reference.scale_bits) {
      return report(protocol::MismatchField::kScale, reference.scale_bits, scale_bits);
    }
  }

  const std::optional<ps::RebuildDecision> decision =
      state.tracker.OnJoin(engine_.served_index(queue), worker, control.incarnation, join, now);
  NoteSynchronization(job, queue, worker, state.tracker.Unsynchronized(engine_.served_index(queue)));
  if (!decision.has_value()) return;
  synchronized_queues_[job] |= uint16_t{1} << queue;
  if (decision->mode == ps::RebuildMode::kNewRun) {
    // A new run may use new values: its own, if its workers agree (the
    // queue is rebuilt either way: nothing of the old run may reach them).
    CheckNewRun(job, queue, *decision);
    state.ledger.Reset(engine_.served_index(queue));
  }
  Rebuild(job, queue, *decision);
  SendReplayRequests(job, queue, now, /*force=*/true);
}

void PsShard::ReportJoinMismatch(uint8_t job, uint32_t queue, int worker,
                                 protocol::MismatchField field, uint64_t expected,
                                 uint64_t received) {
  protocol::StatusBody mismatch;
  mismatch.kind = protocol::StatusKind::kMismatch;
  mismatch.workers.Add(worker);
  mismatch.field = static_cast<uint32_t>(field);
  mismatch.expected = expected;
  mismatch.received = received;
  SendStatus(job, queue, mismatch);
  // Every worker has queue 0; a worker with fewer io_threads may not have
  // this one.
  if (queue != 0) SendStatus(job, 0, mismatch);
  ++mismatches_;
  internal::Logger().error(
      "parameter server: job {}: worker {} joined queue {} with {} = {}, the job's is {}", job,
      worker, queue, protocol::MismatchFieldName(mismatch.field), received, expected);
}

void PsShard::CheckNewRun(uint8_t job, uint32_t queue, const ps::RebuildDecision& decision) {
  // Worker 0's values are the run's; each other worker is held to them.
  const protocol::JoinBody& first = decision.joins[0];
  const uint64_t first_scale = std::bit_cast<uint64_t>(first.scale);
  for (size_t w = 1; w < decision.joins.size(); ++w) {
    const protocol::JoinBody& join = decision.joins[w];
    if (join.io_threads != first.io_threads) {
      return ReportJoinMismatch(job, queue, static_cast<int>(w), protocol::MismatchField::kIoThreads,
                                first.io_threads, join.io_threads);
    }
    if (const uint64_t scale = std::bit_cast<uint64_t>(join.scale); scale != first_scale) {
      return ReportJoinMismatch(job, queue, static_cast<int>(w), protocol::MismatchField::kScale,
                                first_scale, scale);
    }
  }
  Control(job).reference = {true, first.io_threads, first_scale};
}

void PsShard::NoteSynchronization(uint8_t job, uint32_t queue, int worker, bool unsynchronized) {
  const auto bit = static_cast<uint16_t>(1u << queue);
  const bool was = (unsynchronized_queues_[job] & bit) != 0;
  if (unsynchronized) {
    unsynchronized_queues_[job] |= bit;
  } else {
    unsynchronized_queues_[job] &= static_cast<uint16_t>(~bit);
  }
  if (unsynchronized && !was) {
    internal::Logger().info(
        "parameter server: job {} queue {}: worker {} is of another run than the one the "
        "queue serves; gradients are held back until every worker has joined as one run",
        job, queue, worker);
  }
}

void PsShard::Rebuild(uint8_t job, uint32_t queue, const ps::RebuildDecision& decision) {
  JobControl& state = Control(job);
  const ps::RecoveryPlan plan = ps::PlanRecovery(decision, engine_.slots());
  const size_t changed =
      engine_.RebuildQueue(job, queue, decision.lowest, decision.mode, plan.acked_by_all);
  std::vector<ps::ReplayRange>& replays = state.replays[engine_.served_index(queue)];
  if (!replays.empty()) --queues_replaying_;
  replays = plan.replays;
  if (!replays.empty()) ++queues_replaying_;
  if (changed == 0 && replays.empty()) return;
  ++rebuilds_;
  uint64_t to_replay = 0;
  for (const ps::ReplayRange& range : replays) to_replay += range.end - range.first;
  internal::Logger().info(
      "parameter server: job {} queue {}: rebuilt from the workers' joins ({}): {} slot(s) now "
      "wait from position {}{}",
      job, queue,
      decision.mode == ps::RebuildMode::kNewRun   ? "a new run"
      : decision.mode == ps::RebuildMode::kResync ? "the run it serves, joining again"
                                                  : "the first since this PS started",
      changed,
      decision.lowest,
      to_replay == 0 && plan.acked_by_all.empty()
          ? std::string()
          : absl::StrCat("; ", plan.acked_by_all.size(),
                         " position(s) already done at every worker, ", to_replay,
                         " completed at some workers only (asked for their replay)"));
}

void PsShard::SendReplayRequests(uint8_t job, uint32_t queue, TimePoint now, bool force) {
  JobControl& state = Control(job);
  if (!force && now < state.next_replay_request[queue]) return;
  state.next_replay_request[queue] = now + kJoinRequestInterval;
  for (const ps::ReplayRange& range : state.replays[engine_.served_index(queue)]) {
    protocol::StatusBody status;
    status.kind = protocol::StatusKind::kReplayRequest;
    status.position = static_cast<uint32_t>(range.first & wire::kPositionMask);
    status.expected = range.first;
    status.received = range.end;
    if (range.worker >= 0) status.workers.Add(range.worker);
    SendStatus(job, queue, status);
    ++replay_requests_sent_;
  }
}

bool PsShard::PruneReplays(uint8_t job, uint32_t queue) {
  std::vector<ps::ReplayRange>& replays = Control(job).replays[engine_.served_index(queue)];
  if (replays.empty()) return false;
  for (ps::ReplayRange& range : replays) {
    while (range.first < range.end &&
           !engine_.WaitsFor(job, queue,
                             static_cast<uint32_t>(range.first & wire::kPositionMask))) {
      ++range.first;
    }
  }
  std::erase_if(replays, [](const ps::ReplayRange& r) { return r.first == r.end; });
  if (!replays.empty()) return true;
  --queues_replaying_;
  return false;
}

void PsShard::OnGradientWhileReplaying(const wire::AtpHeader& header, TimePoint now) {
  if (control_[header.job] == nullptr || !engine_.ServesQueue(header.queue()) ||
      wire::IsControl(header)) {
    return;
  }
  const uint32_t queue = header.queue();
  if (!PruneReplays(header.job, queue)) return;
  // A worker still resends a position some other worker should replay: the
  // request or the replay was lost.
  const uint32_t position = header.position();
  for (const ps::ReplayRange& range : Control(header.job).replays[engine_.served_index(queue)]) {
    const uint64_t offset =
        (position - static_cast<uint32_t>(range.first)) & wire::kPositionMask;
    if (offset < range.end - range.first) {
      SendReplayRequests(header.job, queue, now, /*force=*/false);
      return;
    }
  }
}

void PsShard::OnReplay(const wire::AtpMessage& message, const wire::ControlMessage& control) {
  const std::optional<int> worker = SenderOf(message, control);
  protocol::ReplayPart part;
  if (!worker.has_value() || !protocol::DecodeReplay(control, &part)) {
    ++control_rejected_;
    return;
  }
  const uint8_t job = message.header.job;
  const uint32_t queue = message.header.queue();
  JobControl& state = Control(job);
  const uint32_t served = engine_.served_index(queue);
  // Only the run that joined, for its own job and queue, a position asked
  // for, from the worker asked.
  const bool asked = std::any_of(
      state.replays[served].begin(), state.replays[served].end(),
      [&](const ps::ReplayRange& r) {
        return r.Contains(part.position) && (r.worker < 0 || r.worker == *worker);
      });
  if (!asked || !state.tracker.Joined(served, *worker, control.incarnation) ||
      part.header.job != job || part.header.queue() != queue ||
      part.header.position() != message.header.position() ||
      part.header.position() != (part.position & wire::kPositionMask)) {
    ++control_rejected_;
    return;
  }
  ++control_received_;
  const std::optional<wire::AtpMessage> packet = state.assembler.Add(part);
  if (packet.has_value() && engine_.OnReplay(*packet, encoder_)) PruneReplays(job, queue);
}

size_t PsShard::ReportWaiting(TimePoint now, FrameSink& sink) {
  if (waiting_report_interval_.IsInfinite() || now < next_waiting_report_) return 0;
  next_waiting_report_ = now + waiting_report_interval_;
  waiting_.clear();
  engine_.CollectWaiting(now, waiting_report_interval_, waiting_);
  encoder_.out = &sink;
  for (const ps::WaitingReport& report : waiting_) {
    protocol::StatusBody status;
    status.kind = protocol::StatusKind::kWaitingForWorkers;
    status.position = report.position;
    status.workers = report.missing;
    SendStatus(report.job, report.queue, status);
    // A result of a dead PS that reached a worker after its join is in no
    // plan: that worker never resends the fragment. Fresh joins say who has
    // it (RunTracker's kResync), and it is replayed.
    RequestJoin(report.job, report.queue, now);
  }
  encoder_.out = nullptr;
  return waiting_.size();
}

void PsShard::LogAbandoned() {
  abandoned_.clear();
  engine_.TakeAbandoned(abandoned_);
  for (const ps::AbandonReport& report : abandoned_) {
    internal::Logger().warn(
        "parameter server: job {}: released the partial state of {} fragment(s) no frame touched "
        "for the orphan timeout (first: queue {} position {}); workers that never contributed: {}",
        report.job, report.fragments, report.first_queue, report.first_position,
        absl::StrJoin(report.never_contributed.ToVector(), ", "));
  }
}

void PsShard::Encoder::Send(const wire::AtpMessage& message) {
  PsShard& s = *shard_;
  assert(wire::ValidateHeader(message.header) == wire::DecodeError::kOk);
  // Source and destination port: both base_port + the queue (the options
  // checked that the highest queue's port fits in 16 bits).
  const uint32_t port = uint32_t{s.base_port_} + message.header.queue();
  for (const std::array<uint8_t, wire::kL2L4HeaderBytes>& l2l4 :
       s.l2l4_templates_[message.header.job]) {
    // In the sink's transmit buffer when it lends one: no copy.
    uint8_t* lent = out->FrameBuffer();
    const std::span<uint8_t, wire::kFrameBytes> frame =
        lent != nullptr ? std::span<uint8_t, wire::kFrameBytes>(lent, wire::kFrameBytes)
                        : std::span<uint8_t, wire::kFrameBytes>(s.frame_);
    std::memcpy(frame.data(), l2l4.data(), wire::kL2L4HeaderBytes);
    wire::internal::StoreBig32(frame.data() + wire::kUdpOffset, port * 0x10001u);
    wire::EncodeMessage(message, frame.subspan<wire::kAtpOffset, wire::kMessageBytes>());
    out->SendFrame(frame);
    ++s.frames_sent_;
  }
}

void PsShard::AddTo(ParameterServerStats& stats) const {
  const ps::PsCounters& c = engine_.counters();
  stats.frames_sent += frames_sent_;
  stats.ce_to_ecn += ce_to_ecn_;
  stats.source_refused += source_refused_;
  stats.gradients += c.gradients;
  stats.contributions += c.contributions;
  stats.duplicates += c.duplicates;
  stats.integer_on_float_path += c.integer_on_float_path;
  stats.param_resent += c.param_resent;
  stats.stale += c.stale;
  stats.ahead += c.ahead;
  stats.unknown_job += c.unknown_job;
  stats.wrong_shard += c.wrong_shard;
  stats.shape_mismatch += c.shape_mismatch;
  stats.malformed += c.malformed;
  stats.unexpected_ack += c.unexpected_ack;
  stats.control += c.control;
  stats.pulls_answered += c.pulls_answered;
  stats.pulls_ignored += c.pulls_ignored;
  stats.completed += c.completed;
  stats.fp_completed += c.fp_completed;
  stats.switch_completed += c.switch_completed;
  stats.collisions_rehashed += c.collisions_rehashed;
  stats.overflow_requests += c.overflow_requests;
  stats.orphans_released += c.orphans_released;
  stats.control_received += control_received_;
  stats.control_rejected += control_rejected_;
  stats.status_sent += status_sent_;
  stats.join_requests += join_requests_sent_;
  stats.replay_requests += replay_requests_sent_;
  stats.replays += c.replays_applied;
  stats.rebuilds += rebuilds_;
  stats.stale_joins += stale_joins_;
  stats.unsynchronized_gradients += unsynchronized_gradients_;
  stats.unsynchronized_declarations += unsynchronized_declarations_;
  stats.mismatches += mismatches_;
  stats.operations_confirmed += ops_confirmed_;
}

}  // namespace atp::host
