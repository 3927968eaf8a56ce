#include "lib/ps/ps_engine.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "atp/status_macros.h"
#include "lib/protocol/aggregator_index.h"
#include "lib/ps/slot_window.h"
#include "lib/wire/control_message.h"

namespace atp::ps {
namespace {

// ParameterTemplate: the header fields every parameter packet of a job shares.
// bitmap0 names every worker of the largest rack (fanIn0 = its size), bitmap1
// every rack: the packet speaks for the whole job.
wire::AtpHeader ParameterTemplate(const JobLayout& layout) {
  wire::AtpHeader header;
  header.job = layout.job();
  header.ack = true;
  header.edge = true;
  header.fan_in0 = static_cast<uint8_t>(layout.max_rack_workers());
  header.fan_in1 = static_cast<uint8_t>(layout.racks());
  header.bitmap0 = protocol::JobShape::LowBits(layout.max_rack_workers());
  header.bitmap1 = layout.all_racks();
  return header;
}

// HistoryDepth: the completed packets kept per slot for a job with declared
// fan-ins: contribution_history rounded up to a power of two. Generations are
// counted from the 20-bit position (position / slots), so they wrap at
// 2^20 / slots, a power of two: with a power-of-two depth, entry
// generation % depth stays distinct for consecutive generations across the
// wrap (with 5, generation 2^20 / slots - 1 and generation 0 could share one).
uint32_t HistoryDepth(const PsConfig& config) {
  return std::bit_ceil(config.contribution_history);
}

}  // namespace

absl::StatusOr<PsEngine> PsEngine::Create(PsConfig config) {
  ATP_RETURN_IF_ERROR(config.Validate());
  int max_workers = 0;
  for (const protocol::JobShape& shape : config.jobs) {
    max_workers = std::max(max_workers, JobLayout(shape, true).float_rows());
  }
  return PsEngine(config, static_cast<size_t>(max_workers) * wire::kValuesPerFragment);
}

PsEngine::PsEngine(const PsConfig& config, size_t fp_floats_per_buffer)
    : config_(config),
      slots_(config.slots),
      slot_mask_(config.slots - 1),
      fp_pool_(fp_floats_per_buffer, config.fp_pool_buffers) {
  job_index_.fill(-1);
  size_t slot_count = static_cast<size_t>(config.ServedQueues()) * slots_;
  slots_per_job_ = slot_count;
  touched_.assign(slot_count * config.jobs.size(), TimePoint::Infinite());
  live_since_.assign(touched_.size(), TimePoint::Infinite());
  pulled_since_.assign(touched_.size(), TimePoint::Infinite());
  abandoned_.resize(config.jobs.size());
  jobs_.reserve(config.jobs.size());
  for (const protocol::JobShape& shape : config.jobs) {
    job_index_[shape.job] = static_cast<int16_t>(jobs_.size());
    const bool declared = std::find(config.contribution_skipping_jobs.begin(),
                                    config.contribution_skipping_jobs.end(),
                                    shape.job) != config.contribution_skipping_jobs.end();
    JobLayout layout(shape, declared);
    JobState& job = jobs_.emplace_back(JobState{layout, 0, ParameterTemplate(layout), {}, {}});
    job.slots.resize(slot_count);
    job.completed.resize(slot_count);
    if (declared) job.history.resize(slot_count * HistoryDepth(config));
    for (size_t i = 0; i < slot_count; ++i) {
      job.slots[i].completed_position =
          InitialCompletedPosition(static_cast<uint32_t>(i) & slot_mask_, slots_);
    }
  }
}

void PsEngine::OnGradient(const wire::AtpMessage& message, TimePoint now,
                          protocol::MessageSink& sink) {
  ++counters_.gradients;
  if (live_slots_ > 0 && config_.orphan_scan_per_message > 0) {
    ScanOrphans(now, config_.orphan_scan_per_message);
  }
  const wire::AtpHeader& header = message.header;
  if (wire::ValidateHeader(header) != wire::DecodeError::kOk) {
    ++counters_.malformed;
    return;
  }
  if (wire::IsControl(header)) {
    ++counters_.control;
    return;
  }
  if (header.ack) {
    ++counters_.unexpected_ack;
    return;
  }
  int16_t job_index = job_index_[header.job];
  if (job_index < 0) {
    ++counters_.unknown_job;
    return;
  }
  JobState& job = jobs_[static_cast<size_t>(job_index)];
  uint32_t queue = header.queue();
  if (queue % config_.shard_count != config_.shard_index) {
    ++counters_.wrong_shard;
    return;
  }
  Contributors who;
  switch (job.layout.Parse(header, &who)) {
    case ParseOutcome::kOk:
      break;
    case ParseOutcome::kMalformed:
      ++counters_.malformed;
      return;
    case ParseOutcome::kShapeMismatch:
      ++counters_.shape_mismatch;
      return;
  }

  uint32_t position = header.position();
  size_t index =
      static_cast<size_t>(queue / config_.shard_count) * slots_ + (position & slot_mask_);
  SlotState& slot = job.slots[index];
  switch (ClassifyPosition(position, slot.completed_position, slots_)) {
    case Generation::kStale:
      if (header.resend) {
        // Contribution skipping: a contributor lost this parameter packet
        // while the job went on without it (its next positions in the slot
        // were left out); the job's history may still hold it.
        if (const wire::AtpMessage* old = Recent(job, index, queue, position); old != nullptr) {
          ++counters_.param_resent;
          sink.Send(*old);
          return;
        }
      }
      ++counters_.stale;
      NoteOutOfWindow(job, queue);
      return;
    case Generation::kAhead:
      ++counters_.ahead;
      NoteOutOfWindow(job, queue);
      return;
    case Generation::kCompleted:
      if (!slot.has_completed_packet) {
        // The virtual generation before position 0: nothing was ever sent.
        ++counters_.stale;
        NoteOutOfWindow(job, queue);
      } else if (header.resend) {
        // A worker lost this parameter packet: send the very same one again.
        ++counters_.param_resent;
        sink.Send(job.completed[index]);
      } else {
        ++counters_.duplicates;
      }
      return;
    case Generation::kNext:
      break;
  }
  const size_t flat = static_cast<size_t>(job_index) * slots_per_job_ + index;
  // State older than the timeout is an orphan even if the scan has not
  // reached it yet: the message starts the generation afresh.
  if (IsOrphan(touched_[flat], now)) ReleaseOrphan(flat);
  const bool was_live = slot.mode != SlotMode::kIdle;
  if (slot.mode == SlotMode::kFloat) {
    OnFloatPath(job, index, message, who, sink);
  } else {
    OnIntegerOrIdle(job, index, message, who, sink);
  }
  // Any message for the live generation (a duplicate resend too) keeps it.
  const bool live = slot.mode != SlotMode::kIdle;
  touched_[flat] = live ? now : TimePoint::Infinite();
  if (live && !was_live) {
    ++live_slots_;
    live_since_[flat] = now;
  }
  if (!live && was_live) --live_slots_;
  if (slot.completed_position == position) ForgetPull(flat);
}

void PsEngine::OnPull(const wire::AtpMessage& pull, TimePoint now, protocol::MessageSink& sink) {
  const wire::AtpHeader& header = pull.header;
  const int16_t job_index = job_index_[header.job];
  const uint32_t queue = header.queue();
  if (job_index < 0 || queue % config_.shard_count != config_.shard_index) {
    ++counters_.pulls_ignored;
    return;
  }
  JobState& job = jobs_[static_cast<size_t>(job_index)];
  const uint32_t position = header.position();
  const size_t index =
      static_cast<size_t>(queue / config_.shard_count) * slots_ + (position & slot_mask_);
  const SlotState& slot = job.slots[index];
  const Generation generation = ClassifyPosition(position, slot.completed_position, slots_);
  if (generation == Generation::kNext) {
    // Not complete: its completion will be multicast. Someone waits for it.
    const size_t flat = static_cast<size_t>(job_index) * slots_per_job_ + index;
    if (pulled_since_[flat].IsInfinite()) {
      pulled_since_[flat] = now;
      ++pulled_slots_;
    }
    ++counters_.pulls_ignored;
    return;
  }
  if (!slot.has_completed_packet) {
    ++counters_.pulls_ignored;
    return;
  }
  if (generation == Generation::kCompleted) {
    ++counters_.pulls_answered;
    sink.Send(job.completed[index]);
    return;
  }
  // An older generation of the slot: the worker fell behind the job.
  if (const wire::AtpMessage* old = Recent(job, index, queue, position); old != nullptr) {
    ++counters_.pulls_answered;
    sink.Send(*old);
    return;
  }
  ++counters_.pulls_ignored;
}

void PsEngine::ClearHistory(JobState& job, size_t index) {
  if (job.history.empty()) return;
  const uint32_t history = HistoryDepth(config_);
  std::fill_n(job.history.begin() + static_cast<ptrdiff_t>(index * history), history,
              wire::AtpMessage{});
}

const wire::AtpMessage* PsEngine::Recent(const JobState& job, size_t index, uint32_t queue,
                                         uint32_t position) const {
  if (job.history.empty()) return nullptr;
  const uint32_t history = HistoryDepth(config_);
  const uint32_t generation = position / slots_;
  const wire::AtpMessage& old = job.history[index * history + generation % history];
  if (old.header.ack && old.header.position() == position && old.header.queue() == queue) {
    return &old;
  }
  return nullptr;
}

size_t PsEngine::ScanOrphans(TimePoint now, size_t budget) {
  const size_t total = touched_.size();
  budget = std::min(budget, total);
  size_t released = 0;
  for (size_t k = 0; k < budget && live_slots_ > 0; ++k) {
    if (IsOrphan(touched_[scan_cursor_], now)) {
      ReleaseOrphan(scan_cursor_);
      ++released;
    }
    if (++scan_cursor_ == total) scan_cursor_ = 0;
  }
  return released;
}

size_t PsEngine::OrphanScanBudget(TimeDelta interval) const {
  const size_t total = touched_.size();
  if (config_.orphan_timeout.IsInfinite()) return 1;
  if (interval <= TimeDelta::Zero()) return total;
  return ShareOfPass(total, interval, config_.orphan_timeout / 4);
}

void PsEngine::ResetLive(SlotState& slot) {
  if (slot.mode == SlotMode::kFloat) fp_pool_.Release(std::move(slot.fp_rows));
  slot.mode = SlotMode::kIdle;
  slot.ecn = false;
  slot.collision = false;
  slot.coverage.Clear();
}

void PsEngine::ReleaseOrphan(size_t flat) {
  JobState& job = jobs_[flat / slots_per_job_];
  const size_t index = flat % slots_per_job_;
  SlotState& slot = job.slots[index];
  AbandonReport& report = abandoned_[flat / slots_per_job_];
  if (report.fragments == 0) {
    report.job = job.layout.job();
    report.first_queue = QueueOfIndex(index);
    report.first_position = (slot.completed_position + slots_) & wire::kPositionMask;
  }
  ++report.fragments;
  report.never_contributed.AddAll(Missing(job, slot));
  ResetLive(slot);
  touched_[flat] = TimePoint::Infinite();
  --live_slots_;
  ++counters_.orphans_released;
}

protocol::WorkerSet PsEngine::Missing(const JobState& job, const SlotState& slot) {
  protocol::WorkerSet missing;
  // Under declared fan-ins (contribution skipping) a fragment's bitmaps count
  // its declared contributors, not workers, and which workers those are only
  // the workers' skip plans say: name no one rather than the wrong workers
  // (the workers then stall as kStalled, not kWaitingForWorkers).
  if (job.layout.declared_fan_ins()) return missing;
  for (int rack = 0; rack < job.layout.racks(); ++rack) {
    for (uint32_t bits = job.layout.rack_bitmap(rack) & ~slot.coverage.workers(rack); bits != 0;
         bits &= bits - 1) {
      missing.Add(job.layout.worker_index(rack, std::countr_zero(bits)));
    }
  }
  return missing;
}

void PsEngine::CollectWaiting(TimePoint now, TimeDelta older_than,
                              std::vector<WaitingReport>& out) const {
  if (live_slots_ == 0 && pulled_slots_ == 0) return;
  // WaitedSince: since when slot `flat`'s next generation is waited for
  // (live or pulled), or TimePoint::Infinite().
  auto waited_since = [&](size_t flat) {
    const TimePoint live = touched_[flat].IsInfinite() ? TimePoint::Infinite() : live_since_[flat];
    return Earliest(live, pulled_since_[flat]);
  };
  for (size_t j = 0; j < jobs_.size(); ++j) {
    const JobState& job = jobs_[j];
    for (size_t first = 0; first < slots_per_job_; first += slots_) {
      // The generation waited for longest among this queue's slots.
      size_t oldest = slots_per_job_;
      TimePoint oldest_since = TimePoint::Infinite();
      for (size_t index = first; index < first + slots_; ++index) {
        const TimePoint since = waited_since(j * slots_per_job_ + index);
        if (since.IsInfinite() || now - since < older_than) continue;
        if (oldest == slots_per_job_ || since < oldest_since) {
          oldest = index;
          oldest_since = since;
        }
      }
      if (oldest == slots_per_job_) continue;
      const SlotState& slot = job.slots[oldest];
      WaitingReport& report = out.emplace_back();
      report.job = job.layout.job();
      report.queue = QueueOfIndex(oldest);
      report.position = (slot.completed_position + slots_) & wire::kPositionMask;
      report.missing = Missing(job, slot);
      report.fan_in0 = job.parameter_template.fan_in0;
      report.fan_in1 = job.parameter_template.fan_in1;
    }
  }
}

void PsEngine::TakeOutOfWindow(std::vector<OutOfWindow>& out) {
  if (!any_out_of_window_) return;
  for (JobState& job : jobs_) {
    for (uint32_t bits = job.out_of_window; bits != 0; bits &= bits - 1) {
      out.push_back(OutOfWindow{job.layout.job(), static_cast<uint32_t>(std::countr_zero(bits))});
    }
    job.out_of_window = 0;
  }
  any_out_of_window_ = false;
}

size_t PsEngine::RebuildQueue(uint8_t job_id, uint32_t queue, uint64_t lowest, RebuildMode mode,
                              std::span<const uint64_t> acked_by_all) {
  if (job_index_[job_id] < 0 || !ServesQueue(queue)) return 0;
  const auto j = static_cast<size_t>(job_index_[job_id]);
  JobState& job = jobs_[j];
  const size_t first = static_cast<size_t>(queue / config_.shard_count) * slots_;
  size_t changed = 0;
  for (uint32_t s = 0; s < slots_; ++s) {
    // The position of [lowest, lowest + slots) that uses slot s, or the next
    // one if every worker has its result.
    uint64_t target64 = lowest + ((s - lowest) & slot_mask_);
    if (std::binary_search(acked_by_all.begin(), acked_by_all.end(), target64)) {
      target64 += slots_;
    }
    const auto target = static_cast<uint32_t>(target64 & wire::kPositionMask);
    SlotState& slot = job.slots[first + s];
    // Pulls of the runs before are no longer waited for.
    ForgetPull(j * slots_per_job_ + first + s);
    const Generation now_is = ClassifyPosition(target, slot.completed_position, slots_);
    if (mode == RebuildMode::kNewRun) {
      // Positions start again at 0: a stored packet, partial sums or history
      // of the slot are another run's, even for the very position it waits
      // for. Only a slot that never held anything of it is left as it is.
      ClearHistory(job, first + s);
      if (now_is == Generation::kNext && slot.mode == SlotMode::kIdle) continue;
    } else {
      if (now_is == Generation::kNext) continue;  // already waiting for it
      if (now_is == Generation::kCompleted && slot.has_completed_packet) continue;
      if (now_is == Generation::kStale) continue;  // the PS is past it
    }
    const size_t flat = j * slots_per_job_ + first + s;
    if (slot.mode != SlotMode::kIdle) --live_slots_;
    ResetLive(slot);
    touched_[flat] = TimePoint::Infinite();
    slot.completed_position = (target - slots_) & wire::kPositionMask;
    slot.has_completed_packet = false;
    ++changed;
  }
  return changed;
}

bool PsEngine::WaitsFor(uint8_t job_id, uint32_t queue, uint32_t position) const {
  if (job_index_[job_id] < 0 || !ServesQueue(queue)) return false;
  const JobState& job = jobs_[static_cast<size_t>(job_index_[job_id])];
  const size_t index =
      static_cast<size_t>(queue / config_.shard_count) * slots_ + (position & slot_mask_);
  return ClassifyPosition(position & wire::kPositionMask, job.slots[index].completed_position,
                          slots_) == Generation::kNext;
}

bool PsEngine::OnReplay(const wire::AtpMessage& packet, protocol::MessageSink& sink) {
  const wire::AtpHeader& header = packet.header;
  const int16_t job_index = job_index_[header.job];
  const uint32_t queue = header.queue();
  const uint32_t position = header.position();
  // Only a result (not an overflow request, not a control frame) of a queue
  // served here, for the position its slot waits for.
  if (job_index < 0 || !ServesQueue(queue) || !header.ack || header.IsOverflowRequest() ||
      wire::IsControl(header) || !WaitsFor(header.job, queue, position)) {
    ++counters_.replays_ignored;
    return false;
  }
  const auto j = static_cast<size_t>(job_index);
  JobState& job = jobs_[j];
  const size_t index =
      static_cast<size_t>(queue / config_.shard_count) * slots_ + (position & slot_mask_);
  SlotState& slot = job.slots[index];
  // The stored packet is rebuilt from the job's template and what the
  // original carried (so a replay cannot change the job's shape fields); the
  // payload is the original's, bit for bit.
  wire::AtpMessage& stored = job.completed[index];
  stored.header = job.parameter_template;
  stored.header.seq = header.seq;
  stored.header.ecn = header.ecn;
  stored.header.fp = header.fp;
  stored.header.aggregator = header.aggregator;
  if (header.collision) {
    stored.header.collision = true;
    stored.header.bitmap1 = header.NewAggregatorIndex();
  }
  stored.payload = packet.payload;
  const size_t flat = j * slots_per_job_ + index;
  if (slot.mode != SlotMode::kIdle) --live_slots_;
  ResetLive(slot);
  touched_[flat] = TimePoint::Infinite();
  ForgetPull(flat);
  slot.completed_position = position;
  slot.has_completed_packet = true;
  if (!job.history.empty()) {
    const uint32_t history = HistoryDepth(config_);
    job.history[index * history + (position / slots_) % history] = stored;
  }
  ++counters_.replays_applied;
  ++counters_.param_sent;
  sink.Send(stored);
  return true;
}

void PsEngine::TakeAbandoned(std::vector<AbandonReport>& out) {
  for (AbandonReport& report : abandoned_) {
    if (report.fragments == 0) continue;
    out.push_back(report);
    report = AbandonReport{};
  }
}

void PsEngine::OnIntegerOrIdle(JobState& job, size_t index, const wire::AtpMessage& message,
                               const Contributors& who, protocol::MessageSink& sink) {
  SlotState& slot = job.slots[index];
  const wire::AtpHeader& header = message.header;
  if (header.fp) {
    // A worker went float directly (NaN, infinity or a saturating value). The
    // integer state is discarded whatever it holds, so this cannot overlap it.
    ++counters_.contributions;
    NoteContribution(slot, header);
    StartFloatPath(slot);
    slot.coverage.TryAdd(job.layout, who);  // kAdded: the coverage was just cleared
    AddFloatRow(job.layout, slot, message, who);
    if (slot.coverage.IsComplete(job.layout)) {
      SumFloatRowsOf(job.layout, slot, job.completed[index].payload);
      Complete(job, index, header.seq, sink);
    } else {
      SendOverflowRequest(job, slot, header.seq, sink);
    }
    return;
  }

  if (!AddCoverage(job.layout, slot, who)) return;
  ++counters_.contributions;
  // Whole from the switches: the first contribution, already summed over
  // every rack (edge set), completes the seq on its own.
  const bool first_from_switches = slot.mode == SlotMode::kIdle && header.edge;
  NoteContribution(slot, header);
  if (HasInt32Bound(message.payload)) {
    // A switch saturated on the way: the integer sum is lost.
    StartFloatPath(slot);
    SendOverflowRequest(job, slot, header.seq, sink);
    return;
  }
  if (slot.mode == SlotMode::kIdle) {
    slot.mode = SlotMode::kInteger;
    if (slot.coverage.IsComplete(job.layout)) {
      // One contribution covers every worker (the switches summed it): its
      // values are the sums, and with no bound value among them each lies in
      // the open int32 range, so they complete the seq as they are.
      job.completed[index].payload = message.payload;
      if (first_from_switches) ++counters_.switch_completed;
      Complete(job, index, header.seq, sink);
      return;
    }
    AssignSums(message.payload, slot.sums);
  } else {
    AddToSums(message.payload, slot.sums);
  }
  if (!slot.coverage.IsComplete(job.layout)) return;
  if (!SumsFitOpenInt32(slot.sums)) {
    StartFloatPath(slot);
    SendOverflowRequest(job, slot, header.seq, sink);
    return;
  }
  StoreInt32Sums(slot.sums, job.completed[index].payload);
  if (first_from_switches) ++counters_.switch_completed;
  Complete(job, index, header.seq, sink);
}

bool PsEngine::AddCoverage(const JobLayout& layout, SlotState& slot, const Contributors& who) {
  switch (slot.coverage.TryAdd(layout, who)) {
    case AddOutcome::kAdded:
      return true;
    case AddOutcome::kOverlap:
      ++counters_.duplicates;
      return false;
    case AddOutcome::kMismatch:
      ++counters_.shape_mismatch;
      return false;
  }
  return false;
}

void PsEngine::OnFloatPath(JobState& job, size_t index, const wire::AtpMessage& message,
                           const Contributors& who, protocol::MessageSink& sink) {
  SlotState& slot = job.slots[index];
  const wire::AtpHeader& header = message.header;
  if (!header.fp) {
    // An integer packet sent before its worker saw the overflow request, or
    // after the request was lost. Repeat the request unless every worker it
    // names has already sent its fp row (then it is only a late copy).
    ++counters_.integer_on_float_path;
    slot.ecn |= header.ecn;
    if (!slot.coverage.CoversAll(who)) SendOverflowRequest(job, slot, header.seq, sink);
    return;
  }
  if (!AddCoverage(job.layout, slot, who)) return;
  ++counters_.contributions;
  NoteContribution(slot, header);
  AddFloatRow(job.layout, slot, message, who);
  if (!slot.coverage.IsComplete(job.layout)) return;
  SumFloatRowsOf(job.layout, slot, job.completed[index].payload);
  Complete(job, index, header.seq, sink);
}

void PsEngine::NoteContribution(SlotState& slot, const wire::AtpHeader& header) {
  if (slot.mode == SlotMode::kIdle) slot.aggregator = header.aggregator;
  slot.ecn |= header.ecn;
  slot.collision |= header.collision;
}

void PsEngine::StartFloatPath(SlotState& slot) {
  ++counters_.overflows;
  slot.mode = SlotMode::kFloat;
  slot.coverage.Clear();
  slot.fp_rows = fp_pool_.Acquire();
}

void PsEngine::AddFloatRow(const JobLayout& layout, SlotState& slot,
                           const wire::AtpMessage& message, const Contributors& who) {
  // Parse guarantees an fp packet names one worker of one rack.
  int worker = std::countr_zero(who.workers);
  auto row = static_cast<size_t>(layout.float_row(who.rack, worker)) * wire::kValuesPerFragment;
  StoreFloatRow(message.payload, slot.fp_rows.get() + row);
}

void PsEngine::SumFloatRowsOf(const JobLayout& layout, const SlotState& slot,
                              wire::Payload& out) {
  if (!layout.declared_fan_ins()) {
    SumFloatRowsInOrder(slot.fp_rows.get(), layout.total_workers(), out);
    return;
  }
  // Declared fan-ins: only the declared contributors' rows hold values, in
  // (contributing rack, contributor) order. fp packets are level 1, so every
  // complete rack's worker count is known.
  std::array<uint16_t, wire::kMaxFanIn * wire::kMaxFanIn> order;
  size_t rows = 0;
  for (uint32_t racks = slot.coverage.complete_racks(); racks != 0; racks &= racks - 1) {
    const int rack = std::countr_zero(racks);
    for (uint32_t workers = slot.coverage.declared_workers(rack); workers != 0;
         workers &= workers - 1) {
      order[rows++] = static_cast<uint16_t>(layout.float_row(rack, std::countr_zero(workers)));
    }
  }
  SumFloatRows(slot.fp_rows.get(), std::span<const uint16_t>(order.data(), rows), out);
}

void PsEngine::SendOverflowRequest(const JobState& job, const SlotState& slot, uint32_t seq,
                                   protocol::MessageSink& sink) {
  ++counters_.overflow_requests;
  wire::AtpMessage request;  // zero payload
  request.header = job.parameter_template;
  request.header.seq = seq & wire::kSeqMask;
  request.header.resend = true;  // with ack and not fp: "resend this fragment as fp"
  request.header.bitmap0 = 0;    // an overflow request carries no contributors
  request.header.bitmap1 = 0;
  request.header.aggregator = slot.aggregator;  // switches clear what they hold for it
  sink.Send(request);
}

void PsEngine::Complete(JobState& job, size_t index, uint32_t seq, protocol::MessageSink& sink) {
  SlotState& slot = job.slots[index];
  wire::AtpMessage& packet = job.completed[index];
  packet.header = job.parameter_template;
  packet.header.seq = seq & wire::kSeqMask;
  packet.header.ecn = slot.ecn;
  packet.header.aggregator = slot.aggregator;  // the old index: switches clear it
  if (slot.collision) {
    // A new index for the slot's next fragments, in the low 16 bits of bitmap1.
    packet.header.collision = true;
    packet.header.bitmap1 =
        protocol::RehashAggregatorIndex(job.layout.job(), packet.header.seq, slot.aggregator);
    ++counters_.collisions_rehashed;
  }
  ++counters_.completed;
  if (slot.mode == SlotMode::kFloat) {
    packet.header.fp = true;
    ++counters_.fp_completed;
  }

  slot.completed_position = wire::PositionOfSeq(seq);
  slot.has_completed_packet = true;
  ResetLive(slot);

  if (!job.history.empty()) {
    const uint32_t history = HistoryDepth(config_);
    job.history[index * history + (slot.completed_position / slots_) % history] = packet;
  }

  ++counters_.param_sent;
  sink.Send(packet);
}

}  // namespace atp::ps
