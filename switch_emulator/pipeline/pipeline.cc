#include "switch_emulator/pipeline/pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/wire/frame_view.h"

namespace atp::switch_emulator {

using wire::DecodeError;
using wire::FrameView;

namespace {

// Popcount32: the number of set bits, branch-free and inline (std::popcount
// becomes a libgcc call when the target has no POPCNT instruction).
constexpr int Popcount32(uint32_t v) {
  v = v - ((v >> 1) & 0x55555555u);
  v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
  v = (v + (v >> 4)) & 0x0F0F0F0Fu;
  return static_cast<int>((v * 0x01010101u) >> 24);
}
static_assert(Popcount32(0) == 0 && Popcount32(0xFFFFFFFFu) == 32 && Popcount32(0x80000001u) == 2);

}  // namespace

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAbsorbed:
      return "absorbed";
    case Verdict::kToPs:
      return "to_ps";
    case Verdict::kMulticast:
      return "multicast";
    case Verdict::kForward:
      return "forward";
    case Verdict::kMalformed:
      return "malformed";
  }
  return "unknown";
}

absl::StatusOr<SwitchPipeline> SwitchPipeline::Create(const PipelineConfig& config) {
  if (config.aggregator_count < 1 || config.aggregator_count > kMaxAggregators) {
    return absl::InvalidArgumentError(absl::StrCat("PipelineConfig.aggregator_count: must be 1..",
                                                   kMaxAggregators, ", got ",
                                                   config.aggregator_count));
  }
  if (config.orphan_timeout <= TimeDelta::Zero()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineConfig.orphan_timeout: must be > 0, got ",
                     config.orphan_timeout.ToNanoseconds(), " ns"));
  }
  if (config.base_port > 65536 - wire::kMaxQueues) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineConfig.base_port: must leave room for ", wire::kMaxQueues,
                     " ports (<= ", 65536 - wire::kMaxQueues, "), got ", config.base_port));
  }
  absl::StatusOr<JobTable> jobs =
      JobTable::Create(config.jobs, config.partition, config.aggregator_count);
  if (!jobs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("PipelineConfig.", jobs.status().message()));
  }
  absl::StatusOr<ValueKernels> kernels = SelectValueKernels(config.kernel);
  if (!kernels.ok()) {
    return absl::Status(kernels.status().code(),
                        absl::StrCat("PipelineConfig.kernel: ", kernels.status().message()));
  }
  return SwitchPipeline(config, *std::move(jobs), *kernels);
}

SwitchPipeline::SwitchPipeline(const PipelineConfig& config, JobTable jobs, ValueKernels kernels)
    : aggregators_(config.aggregator_count),
      jobs_(std::move(jobs)),
      kernels_(kernels),
      orphan_timeout_(config.orphan_timeout),
      ecn_threshold_(config.ecn_threshold),
      base_port_(config.base_port),
      scan_per_packet_(static_cast<uint32_t>(
          std::min<size_t>(config.orphan_scan_per_packet, config.aggregator_count))) {}

inline void SwitchPipeline::Release(size_t i) {
  aggregators_.state(i) = AggregatorState{};
  --in_use_;
}

inline void SwitchPipeline::ScanOne(TimePoint now) {
  const AggregatorState& s = aggregators_.state(scan_cursor_);
  if (!s.is_free() && now - s.timestamp > orphan_timeout_) [[unlikely]] {
    Release(scan_cursor_);
    ++counters_.orphaned;
  }
  if (++scan_cursor_ == aggregators_.size()) scan_cursor_ = 0;
}

static_assert(static_cast<Verdict>(0) == Verdict::kAbsorbed &&
              static_cast<Verdict>(1) == Verdict::kToPs);

Verdict SwitchPipeline::Aggregate(FrameView& p, const JobEntry& job, AggregationLevel level,
                                  TimePoint now) {
  const AggregateStep step = AggregateAt(p, job, level, now);
  if (step != AggregateStep::kCompleted) return static_cast<Verdict>(step);
  if (level == AggregationLevel::kLevel2) return Verdict::kToPs;  // edge stays 1
  // The rack is whole: the packet moves to level 2.
  p.set_flag(FrameView::kEdge, true);
  p.set_flag(FrameView::kResend, false);
  if (!job.AggregatesAt(AggregationLevel::kLevel2)) return Verdict::kToPs;
  ++counters_.fed_to_level2;
  const AggregateStep fed = AggregateAt(p, job, AggregationLevel::kLevel2, now);
  return fed == AggregateStep::kCompleted ? Verdict::kToPs : static_cast<Verdict>(fed);
}

Decision SwitchPipeline::Process(std::span<uint8_t> frame, TimePoint now,
                                 uint32_t egress_queue_depth) {
  ++counters_.packets;
  for (uint32_t k = 0; k < scan_per_packet_; ++k) ScanOne(now);

  // Beyond lengths and checksums, ValidateFrame guarantees what the aggregators
  // rely on: job != 0, bitmaps inside the fan-ins, a gradient names at least
  // one contributor, and a level-1 gradient exactly one rack (the level-2 feed
  // counts it). A frame it accepts is an ATP frame, so only a rejected one pays
  // for classification.
  const DecodeError error = wire::ValidateFrame(frame, base_port_);
  if (error != DecodeError::kOk) [[unlikely]] {
    if (!wire::IsAtpFrame(frame, base_port_)) {
      ++counters_.not_atp;
      return {Verdict::kForward};
    }
    ++counters_.malformed;
    ++counters_.malformed_by_reason[std::min(static_cast<size_t>(error), kDecodeErrorSlots - 1)];
    return {Verdict::kMalformed};
  }
  FrameView p(frame.data());

  const JobEntry* job = jobs_.Find(p.job());
  if (job == nullptr) {
    ++counters_.not_aggregated;
    return {Verdict::kForward};
  }

  // Rule 1: every packet of an aggregated job, before anything reads its ecn.
  if (egress_queue_depth > ecn_threshold_) {
    p.set_flag(FrameView::kEcn, true);
    p.MarkCongestionExperienced();
    ++counters_.ecn_marked;
  }

  // Rule 2: parameter packet.
  if (p.flag(FrameView::kAck)) {
    ++counters_.acks;
    if (mode_ == PipelineMode::kAggregating) {
      const size_t i = job->AggregatorFor(p.aggregator());
      if (aggregators_.state(i).owner == OwnerKey(p.job(), p.seq())) {
        Release(i);
        ++counters_.acks_cleared;
      }
    }
    return {Verdict::kMulticast, job->multicast_group};
  }

  // Rule 3: float32 data is never aggregated.
  if (p.flag(FrameView::kFp)) {
    ++counters_.forwarded_fp;
    return {Verdict::kToPs};
  }

  const AggregationLevel level =
      p.flag(FrameView::kEdge) ? AggregationLevel::kLevel2 : AggregationLevel::kLevel1;
  if (mode_ == PipelineMode::kForwardOnly || !job->AggregatesAt(level)) {
    ++counters_.not_aggregated;
    return {Verdict::kToPs};
  }
  return {Aggregate(p, *job, level, now)};
}

void SwitchPipeline::PrefetchAggregator(std::span<const uint8_t> frame) const {
  // ATP header bytes: job at 0, the big-endian aggregator index at 14..15.
  constexpr size_t kIndexOffset = 14;
  static_assert(kIndexOffset + 2 == wire::kAtpHeaderBytes);
  if (frame.size() < wire::kAtpOffset + wire::kAtpHeaderBytes) return;
  const uint8_t* atp = frame.data() + wire::kAtpOffset;
  const JobEntry* job = jobs_.Find(atp[0]);
  if (job == nullptr) return;
  const uint16_t index = static_cast<uint16_t>((atp[kIndexOffset] << 8) | atp[kIndexOffset + 1]);
  const size_t i = job->AggregatorFor(index);
  __builtin_prefetch(&aggregators_.state(i), /*rw=*/1);
  const auto* values = reinterpret_cast<const uint8_t*>(&aggregators_.values(i));
  for (size_t line = 0; line < sizeof(AggregatorValues); line += 64) {
    __builtin_prefetch(values + line, /*rw=*/1);
  }
}

SwitchPipeline::AggregateStep SwitchPipeline::AggregateAt(FrameView& p, const JobEntry& job,
                                                          AggregationLevel level, TimePoint now) {
  const bool level1 = level == AggregationLevel::kLevel1;
  const uint32_t bitmap = level1 ? p.bitmap0() : p.bitmap1();
  const uint8_t fan_in = static_cast<uint8_t>(level1 ? p.fan_in0() : p.fan_in1());
  const uint32_t rack = level1 ? p.bitmap1() : 0;
  const bool resend = p.flag(FrameView::kResend);
  const bool ecn = p.flag(FrameView::kEcn);
  const uint32_t key = OwnerKey(p.job(), p.seq());
  const size_t i = job.AggregatorFor(p.aggregator());
  AggregatorState& s = aggregators_.state(i);

  // Rule 4: a free aggregator.
  if (s.is_free()) {
    if (resend) {
      ++counters_.resend_to_ps;
      return AggregateStep::kToPs;
    }
    s.owner = key;
    s.bitmap = bitmap;
    s.rack = rack;
    s.counter = static_cast<uint8_t>(Popcount32(bitmap));
    s.fan_in = fan_in;
    s.level = level;
    s.ecn = ecn;
    s.timestamp = now;
    kernels_.load(aggregators_.values(i).lanes, p.payload());
    ++in_use_;
    ++counters_.claimed;
    ++counters_.aggregated;
    return s.counter == s.fan_in ? Complete(p, i) : AggregateStep::kAbsorbed;
  }

  // Rule 5: owned by another aggregation (see AggregatorState).
  if (!s.Owns(key, level, fan_in, rack)) {
    ++counters_.collisions;
    if (!resend) {
      p.set_flag(FrameView::kCollision, true);
      p.set_flag(FrameView::kResend, true);
    }
    return AggregateStep::kToPs;
  }

  // Rule 6: ours. A duplicate adds nothing.
  if ((s.bitmap & bitmap) != 0) {
    ++counters_.duplicates;
    s.ecn = s.ecn || ecn;
    return resend ? Flush(p, i) : AggregateStep::kAbsorbed;
  }
  kernels_.add(aggregators_.values(i).lanes, p.payload());
  s.bitmap |= bitmap;
  s.counter = static_cast<uint8_t>(s.counter + Popcount32(bitmap));
  s.ecn = s.ecn || ecn;
  s.timestamp = now;
  ++counters_.aggregated;
  // Every contribution names distinct bits below the shared fan-in, so the
  // counter reaches the fan-in exactly.
  if (s.counter == s.fan_in) return Complete(p, i);
  if (resend) return Flush(p, i);
  return AggregateStep::kAbsorbed;
}

SwitchPipeline::AggregateStep SwitchPipeline::Complete(FrameView& p, size_t i) {
  WriteOut(p, i);
  Release(i);
  ++counters_.completed;
  return AggregateStep::kCompleted;
}

SwitchPipeline::AggregateStep SwitchPipeline::Flush(FrameView& p, size_t i) {
  WriteOut(p, i);
  Release(i);
  ++counters_.flushed;
  return AggregateStep::kToPs;  // edge and resend unchanged: a partial result
}

void SwitchPipeline::WriteOut(FrameView& p, size_t i) {
  const AggregatorState& s = aggregators_.state(i);
  kernels_.store(p.payload(), aggregators_.values(i).lanes);
  if (s.level == AggregationLevel::kLevel1) {
    p.set_bitmap0(s.bitmap);
  } else {
    p.set_bitmap1(s.bitmap);
  }
  if (s.ecn) p.set_flag(FrameView::kEcn, true);
}

size_t SwitchPipeline::ScanOrphans(TimePoint now, size_t budget) {
  const uint64_t before = counters_.orphaned;
  budget = std::min(budget, aggregators_.size());
  for (size_t k = 0; k < budget; ++k) ScanOne(now);
  return static_cast<size_t>(counters_.orphaned - before);
}

void SwitchPipeline::WipeState() {
  aggregators_.FreeAll();
  in_use_ = 0;
  ++counters_.wipes;
}

}  // namespace atp::switch_emulator
