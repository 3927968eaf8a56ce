// switch_emulator/pipeline/pipeline_datapath.cc: SwitchPipeline's per-packet
// path (ATP-SPEC section 4, rules 1-7): Process, ProcessBurst, the orphan
// scan and the prefetch hint.
//
// The path exists in three compiled copies, the datapaths: kDynamic (any
// x86-64; value kernels called through ValueKernels' pointers), kAvx2 and
// kAvx512 (compiled for those instruction sets plus BMI, BMI2 and POPCNT, with
// the value kernels and the frame checks inline). Each is one function whose
// steady-state path is straight-line code; everything rare is out of line.
// Process and ProcessBurst pick the datapath with one predictable branch.
// bench/results/switch_pipeline.md has the measurements behind these choices.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "lib/wire/byte_order.h"
#include "lib/wire/frame_checks.h"
#include "lib/wire/frame_view.h"
#include "lib/wire/header_layout.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "switch_emulator/pipeline/value_kernels_simd.h"

namespace atp::switch_emulator {

using wire::DecodeError;
using wire::FrameView;
using wire::internal::HeaderWords;
using wire::internal::LoadBig16;
using wire::internal::StoreBig16;
using wire::internal::StoreBig32;

namespace {

// Popcount32: the number of set bits, inline (std::popcount becomes a libgcc
// call when the target has no POPCNT instruction). Most gradients name one
// contributor: that case costs a test and a predictable branch.
constexpr int Popcount32(uint32_t v) {
  if ((v & (v - 1)) == 0) return v != 0 ? 1 : 0;
  v = v - ((v >> 1) & 0x55555555u);
  v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
  v = (v + (v >> 4)) & 0x0F0F0F0Fu;
  return static_cast<int>((v * 0x01010101u) >> 24);
}
static_assert(Popcount32(0) == 0 && Popcount32(0xFFFFFFFFu) == 32 && Popcount32(0x80000001u) == 2);

// AsData: `v`, computed before this point as a value (a flag or a mask), not
// folded by the compiler into a branch that data decides.
[[gnu::always_inline]] inline uint32_t AsData(uint32_t v) {
  asm("" : "+r"(v));
  return v;
}

constexpr bool Has(const HeaderWords& h, uint16_t flag) { return (h.fan_flags & flag) != 0; }

// FanIn: the real fan-in (1..32) at `level`.
constexpr uint8_t FanIn(const HeaderWords& h, AggregationLevel level) {
  const int shift = level == AggregationLevel::kLevel1 ? wire::internal::kFanIn0Shift
                                                       : wire::internal::kFanIn1Shift;
  return static_cast<uint8_t>(((h.fan_flags >> shift) & wire::internal::kFanInFieldMask) + 1);
}

uint16_t LoadFlags(const uint8_t* frame) {
  return LoadBig16(frame + wire::kAtpOffset + wire::internal::kFanFlagsOffset);
}
void StoreFlags(uint8_t* frame, uint16_t fan_flags) {
  StoreBig16(frame + wire::kAtpOffset + wire::internal::kFanFlagsOffset, fan_flags);
}

static_assert(OwnerKey(0xAB, 0x123456) == 0xAB123456u, "job_seq is the owner key");

// --- The datapaths ------------------------------------------------------------
//
// Path: what a datapath inlines. Load, Add and Store are the value kernels;
// AddOut is Add then Store for the add that completes an aggregator (the
// vector datapaths write the sums into the packet only, not into the lanes:
// the aggregator is released next); Checks is wire::ValidateFrame(frame) ==
// kOk for a frame of the right length with header words h; Popcount counts
// bits.
struct DynamicPath {
  static void Load(const ValueKernels& k, int32_t* lanes, const uint8_t* wire) {
    k.load(lanes, wire);
  }
  static void Add(const ValueKernels& k, int32_t* lanes, const uint8_t* wire) {
    k.add(lanes, wire);
  }
  static void Store(const ValueKernels& k, uint8_t* wire, const int32_t* lanes) {
    k.store(wire, lanes);
  }
  static void AddOut(const ValueKernels& k, int32_t* lanes, uint8_t* wire) {
    k.add(lanes, wire);
    k.store(wire, lanes);
  }
  static bool Checks(const uint8_t* frame, uint16_t base_port, const HeaderWords& h) {
    return wire::internal::FrameChecksPass(frame, base_port, h);
  }
  static int Popcount(uint32_t v) { return Popcount32(v); }
};

#define ATP_DATAPATH_AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))
#define ATP_DATAPATH_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx2,bmi,bmi2,popcnt")))

// The vector AddOuts' exact fallback, out of line (an operand of magnitude
// 2^30 or more).
[[gnu::noinline, gnu::cold]] ATP_DATAPATH_AVX2 void AddThenStoreAvx2(int32_t* lanes,
                                                                     uint8_t* wire) {
  simd::AddAvx2(lanes, wire);
  simd::StoreAvx2(wire, lanes);
}
[[gnu::noinline, gnu::cold]] ATP_DATAPATH_AVX512 void AddThenStoreAvx512(int32_t* lanes,
                                                                         uint8_t* wire) {
  simd::AddAvx512(lanes, wire);
  simd::StoreAvx512(wire, lanes);
}

struct Avx2Path {
  ATP_DATAPATH_AVX2 static void Load(const ValueKernels&, int32_t* lanes, const uint8_t* wire) {
    simd::LoadAvx2(lanes, wire);
  }
  ATP_DATAPATH_AVX2 static void Add(const ValueKernels&, int32_t* lanes, const uint8_t* wire) {
    simd::AddAvx2(lanes, wire);
  }
  ATP_DATAPATH_AVX2 static void Store(const ValueKernels&, uint8_t* wire, const int32_t* lanes) {
    simd::StoreAvx2(wire, lanes);
  }
  ATP_DATAPATH_AVX2 static void AddOut(const ValueKernels&, int32_t* lanes, uint8_t* wire) {
    if (!simd::AddOutAvx2(lanes, wire)) [[unlikely]] {
      AddThenStoreAvx2(lanes, wire);
    }
  }
  ATP_DATAPATH_AVX2 static bool Checks(const uint8_t* frame, uint16_t base_port,
                                       const HeaderWords& h) {
    return wire::internal::FrameChecksPassAvx2(frame, base_port, h);
  }
  ATP_DATAPATH_AVX2 static int Popcount(uint32_t v) { return __builtin_popcount(v); }
};

struct Avx512Path {
  ATP_DATAPATH_AVX512 static void Load(const ValueKernels&, int32_t* lanes, const uint8_t* wire) {
    simd::LoadAvx512(lanes, wire);
  }
  ATP_DATAPATH_AVX512 static void Add(const ValueKernels&, int32_t* lanes, const uint8_t* wire) {
    simd::AddAvx512(lanes, wire);
  }
  ATP_DATAPATH_AVX512 static void Store(const ValueKernels&, uint8_t* wire, const int32_t* lanes) {
    simd::StoreAvx512(wire, lanes);
  }
  ATP_DATAPATH_AVX512 static void AddOut(const ValueKernels&, int32_t* lanes, uint8_t* wire) {
    if (!simd::AddOutAvx512(lanes, wire)) [[unlikely]] {
      AddThenStoreAvx512(lanes, wire);
    }
  }
  ATP_DATAPATH_AVX512 static bool Checks(const uint8_t* frame, uint16_t base_port,
                                         const HeaderWords& h) {
    return wire::internal::FrameChecksPassAvx512(frame, base_port, h);
  }
  ATP_DATAPATH_AVX512 static int Popcount(uint32_t v) { return __builtin_popcount(v); }
};

}  // namespace

// Inlining: the steady-state path of Process is one function; the rest is
// out of line so that it costs the hot path neither code nor registers.
#define ATP_HOT [[gnu::always_inline]] inline
#define ATP_COLD [[gnu::noinline, gnu::cold]]

// kFreeState: what a released aggregator holds. Copied from here rather than
// built as a temporary, which would be a 32-byte aligned stack object.
constexpr AggregatorState kFreeState{};

ATP_HOT void SwitchPipeline::Release(size_t i) {
  static_assert(std::is_trivially_copyable_v<AggregatorState>);
  std::memcpy(&aggregators_.state(i), &kFreeState, sizeof(AggregatorState));
  --in_use_;
}

ATP_HOT void SwitchPipeline::ScanOne(TimePoint now) {
  const AggregatorState& s = aggregators_.state(scan_cursor_);
  // One branch, almost never taken: free and busy aggregators alternate at
  // random under the cursor, so a branch on is_free would mispredict.
  // (A free aggregator's owner is 0: the mask keeps it out.)
  const uint32_t untouched = now - s.timestamp > orphan_timeout_ ? ~0u : 0u;
  if ((s.owner & AsData(untouched)) != 0) [[unlikely]] {
    ++JobOf(s).orphaned;
    Release(scan_cursor_);
    ++counters_.orphaned;
  }
  if (++scan_cursor_ == aggregator_count_) scan_cursor_ = 0;
}

static_assert(static_cast<Verdict>(0) == Verdict::kAbsorbed &&
              static_cast<Verdict>(1) == Verdict::kToPs);

Decision SwitchPipeline::Process(std::span<uint8_t> frame, TimePoint now,
                                 uint32_t egress_queue_depth) {
  ++counters_.packets;
  switch (datapath_) {
    case Datapath::kAvx512:
      return ProcessAvx512(frame, now, egress_queue_depth);
    case Datapath::kAvx2:
      return ProcessAvx2(frame, now, egress_queue_depth);
    case Datapath::kDynamic:
      break;
  }
  return ProcessDynamic(frame, now, egress_queue_depth);
}

void SwitchPipeline::ProcessBurst(std::span<const std::span<uint8_t>> frames, TimePoint now,
                                  uint32_t egress_queue_depth, std::span<Decision> decisions) {
  counters_.packets += frames.size();
  switch (datapath_) {
    case Datapath::kAvx512:
      return ProcessBurstAvx512(frames, now, egress_queue_depth, decisions);
    case Datapath::kAvx2:
      return ProcessBurstAvx2(frames, now, egress_queue_depth, decisions);
    case Datapath::kDynamic:
      break;
  }
  ProcessBurstDynamic(frames, now, egress_queue_depth, decisions);
}

// Each datapath is its own function, compiled for its instruction set, with
// everything inline but the out-of-line steps (flatten). The burst versions
// inline the whole per-packet path into their loop.
[[gnu::noinline, gnu::flatten]] Decision SwitchPipeline::ProcessDynamic(
    std::span<uint8_t> frame, TimePoint now, uint32_t egress_queue_depth) {
  return ProcessWith<DynamicPath>(frame, now, egress_queue_depth);
}
[[gnu::noinline, gnu::flatten]] ATP_DATAPATH_AVX2 Decision
SwitchPipeline::ProcessAvx2(std::span<uint8_t> frame, TimePoint now, uint32_t egress_queue_depth) {
  return ProcessWith<Avx2Path>(frame, now, egress_queue_depth);
}
[[gnu::noinline, gnu::flatten]] ATP_DATAPATH_AVX512 Decision SwitchPipeline::ProcessAvx512(
    std::span<uint8_t> frame, TimePoint now, uint32_t egress_queue_depth) {
  return ProcessWith<Avx512Path>(frame, now, egress_queue_depth);
}
[[gnu::noinline, gnu::flatten]] void SwitchPipeline::ProcessBurstDynamic(
    std::span<const std::span<uint8_t>> frames, TimePoint now, uint32_t egress_queue_depth,
    std::span<Decision> decisions) {
  ProcessBurstWith<DynamicPath>(frames, now, egress_queue_depth, decisions);
}
[[gnu::noinline, gnu::flatten]] ATP_DATAPATH_AVX2 void SwitchPipeline::ProcessBurstAvx2(
    std::span<const std::span<uint8_t>> frames, TimePoint now, uint32_t egress_queue_depth,
    std::span<Decision> decisions) {
  ProcessBurstWith<Avx2Path>(frames, now, egress_queue_depth, decisions);
}
[[gnu::noinline, gnu::flatten]] ATP_DATAPATH_AVX512 void SwitchPipeline::ProcessBurstAvx512(
    std::span<const std::span<uint8_t>> frames, TimePoint now, uint32_t egress_queue_depth,
    std::span<Decision> decisions) {
  ProcessBurstWith<Avx512Path>(frames, now, egress_queue_depth, decisions);
}

template <class Path>
ATP_HOT void SwitchPipeline::ProcessBurstWith(std::span<const std::span<uint8_t>> frames,
                                              TimePoint now, uint32_t egress_queue_depth,
                                              std::span<Decision> decisions) {
  const size_t n = frames.size();
  if (!prefetch_in_bursts_) {
    for (size_t k = 0; k < n; ++k) {
      decisions[k] = ProcessWith<Path>(frames[k], now, egress_queue_depth);
    }
    return;
  }
  for (size_t k = 0; k < n && k < kBurstPrefetchDistance; ++k) PrefetchFor(frames[k]);
  for (size_t k = 0; k < n; ++k) {
    if (k + kBurstPrefetchDistance < n) PrefetchFor(frames[k + kBurstPrefetchDistance]);
    decisions[k] = ProcessWith<Path>(frames[k], now, egress_queue_depth);
  }
}

template <class Path>
ATP_HOT Decision SwitchPipeline::ProcessWith(std::span<uint8_t> frame, TimePoint now,
                                             uint32_t egress_queue_depth) {
  // (Process and ProcessBurst count the packets.)
  if (scan_per_packet_ == 1) [[likely]] {
    ScanOne(now);
  } else {
    for (uint32_t k = 0; k < scan_per_packet_; ++k) ScanOne(now);
  }

  // Beyond lengths and checksums, validation guarantees what the aggregators
  // rely on: job != 0, bitmaps inside the fan-ins, a gradient names at least
  // one contributor, and a level-1 gradient exactly one rack (the level-2 feed
  // counts it). The checks run inline, all at once (lib/wire/frame_checks.h);
  // only a rejected frame pays for classification and its reason.
  if (frame.size() != wire::kFrameBytes) [[unlikely]] {
    return Reject(frame);
  }
  uint8_t* const p = frame.data();
  HeaderWords h = wire::internal::LoadHeaderWords(p);
  // Create keeps base_port_ <= 65520, so base_port_ + queue never passes
  // 0xFFFF: saying so lets the compiler drop the checks' port-overflow test.
  if (base_port_ > 65536 - wire::kMaxQueues) __builtin_unreachable();
  if (!Path::Checks(p, base_port_, h)) [[unlikely]] {
    return Reject(frame);
  }

  const JobEntry& job = jobs_.Entry(h.job());
  if (!job.aggregated()) [[unlikely]] {
    ++counters_.not_aggregated;
    return {Verdict::kForward};
  }
  // Rule 1: every packet of an aggregated job, before anything reads its ecn.
  if (egress_queue_depth > ecn_threshold_) [[unlikely]] {
    MarkEcn(p);
    h.fan_flags |= FrameView::kEcn;
  } else if (FrameView(p).ip_tos() == wire::kTosCe) [[unlikely]] {
    // A switch upstream that only forwards this job marked CE (it never
    // writes the ATP header): the mark counts as this packet's ecn, so it
    // survives aggregation into the packet the PS sees.
    h.fan_flags |= FrameView::kEcn;
  }
  // Rules 2 and 3.
  if (Has(h, FrameView::kAck | FrameView::kFp)) [[unlikely]] {
    return AckOrFp(p, job);
  }

  const AggregationLevel level =
      Has(h, FrameView::kEdge) ? AggregationLevel::kLevel2 : AggregationLevel::kLevel1;
  // levels_aggregated_ is 0 in kForwardOnly mode.
  if ((job.levels & static_cast<uint8_t>(level) & levels_aggregated_) == 0) [[unlikely]] {
    ++counters_.not_aggregated;
    ++job_counters_[h.job()].not_aggregated;
    return {Verdict::kToPs};
  }
  const AggregateStep step = level == AggregationLevel::kLevel1
                                 ? AggregateAt<AggregationLevel::kLevel1, Path>(p, h, job, now)
                                 : AggregateAt<AggregationLevel::kLevel2, Path>(p, h, job, now);
  if (step != AggregateStep::kCompleted) return {static_cast<Verdict>(step)};
  return {AfterCompletion<Path>(p, level, job, now)};
}

ATP_COLD Decision SwitchPipeline::Reject(std::span<const uint8_t> frame) {
  if (!wire::IsAtpFrame(frame, base_port_)) {
    ++counters_.not_atp;
    return {Verdict::kForward};
  }
  const DecodeError error = wire::ValidateFrame(frame, base_port_);
  ++counters_.malformed;
  ++counters_.malformed_by_reason[std::min(static_cast<size_t>(error), kDecodeErrorSlots - 1)];
  return {Verdict::kMalformed};
}

ATP_COLD void SwitchPipeline::MarkEcn(uint8_t* frame) {
  StoreFlags(frame, LoadFlags(frame) | FrameView::kEcn);
  FrameView(frame).MarkCongestionExperienced();
  ++counters_.ecn_marked;
}

ATP_COLD Decision SwitchPipeline::AckOrFp(const uint8_t* frame, const JobEntry& job) {
  const HeaderWords h = wire::internal::LoadHeaderWords(frame);
  // Rule 2: parameter packet.
  if (Has(h, FrameView::kAck)) {
    ++counters_.acks;
    // A control frame (fp, resend and collision set; lib/wire/control_message.h)
    // names no fragment: it must not release the aggregator its seq would hash to.
    constexpr uint16_t kControlFlags = FrameView::kFp | FrameView::kResend | FrameView::kCollision;
    const bool control = (h.fan_flags & kControlFlags) == kControlFlags;
    if (mode_ == PipelineMode::kAggregating && !control) {
      const size_t i = job.AggregatorFor(h.aggregator);
      if (aggregators_.state(i).owner == h.job_seq) {
        Release(i);
        ++counters_.acks_cleared;
      }
    }
    return {Verdict::kMulticast, job.multicast_group};
  }
  // Rule 3: float32 data is never aggregated; nor is a worker's control
  // frame (fp, resend and collision set), counted apart: it is no data.
  constexpr uint16_t kControlFlags = FrameView::kFp | FrameView::kResend | FrameView::kCollision;
  if ((h.fan_flags & kControlFlags) == kControlFlags) {
    ++counters_.forwarded_control;
    ++job_counters_[h.job()].forwarded_control;
  } else {
    ++counters_.forwarded_fp;
    ++job_counters_[h.job()].forwarded_fp;
  }
  return {Verdict::kToPs};
}

template <AggregationLevel kLevel, class Path>
ATP_HOT SwitchPipeline::AggregateStep SwitchPipeline::AggregateAt(uint8_t* frame, HeaderWords h,
                                                                  const JobEntry& job,
                                                                  TimePoint now) {
  constexpr bool kLevel1 = kLevel == AggregationLevel::kLevel1;
  const size_t i = job.AggregatorFor(h.aggregator);
  AggregatorState& s = aggregators_.state(i);

  // Rule 4: a free aggregator.
  if (s.is_free()) return Claim<kLevel, Path>(frame, h, i, now);
  // Rule 5: owned by another aggregation (see AggregatorState).
  if (!s.Owns(h.job_seq, kLevel, FanIn(h, kLevel), kLevel1 ? h.bitmap1 : 0)) [[unlikely]] {
    return Collide(frame, h.fan_flags, h.job());
  }
  // Rule 6: ours. A duplicate adds nothing.
  const uint32_t bitmap = kLevel1 ? h.bitmap0 : h.bitmap1;
  if ((s.bitmap & bitmap) != 0) [[unlikely]] {
    return Duplicate(frame, h.fan_flags, i);
  }
  ++counters_.aggregated;
  const auto counter = static_cast<uint8_t>(s.counter + Path::Popcount(bitmap));
  // Every contribution names distinct bits below the shared fan-in, so the
  // counter reaches the fan-in exactly.
  if (counter == s.fan_in) return CompleteWithAdd<kLevel, Path>(frame, i, bitmap);
  Path::Add(kernels_, aggregators_.values(i).lanes, frame + wire::kPayloadOffset);
  s.bitmap |= bitmap;
  s.counter = counter;
  s.ecn |= Has(h, FrameView::kEcn);
  s.timestamp = now;
  if (Has(h, FrameView::kResend)) [[unlikely]] {
    return Flush(frame, i);
  }
  return AggregateStep::kAbsorbed;
}

template <class Path>
ATP_HOT Verdict SwitchPipeline::AfterCompletion(uint8_t* frame, AggregationLevel level,
                                                const JobEntry& job, TimePoint now) {
  if (level == AggregationLevel::kLevel2) return Verdict::kToPs;  // edge stays 1
  // The rack is whole: the packet moves to level 2. Completion rewrote
  // bitmap0 and maybe ecn: read the header back.
  HeaderWords h = wire::internal::LoadHeaderWords(frame);
  h.fan_flags = static_cast<uint16_t>((h.fan_flags | FrameView::kEdge) & ~FrameView::kResend);
  StoreFlags(frame, h.fan_flags);
  if (!job.AggregatesAt(AggregationLevel::kLevel2)) return Verdict::kToPs;
  ++counters_.fed_to_level2;
  const AggregateStep fed = AggregateAt<AggregationLevel::kLevel2, Path>(frame, h, job, now);
  return fed == AggregateStep::kCompleted ? Verdict::kToPs : static_cast<Verdict>(fed);
}

void SwitchPipeline::PrefetchAggregator(std::span<const uint8_t> frame) const {
  PrefetchFor(frame);
}

ATP_HOT void SwitchPipeline::PrefetchFor(std::span<const uint8_t> frame) const {
  if (frame.size() < wire::kAtpOffset + wire::kAtpHeaderBytes) return;
  const uint8_t* atp = frame.data() + wire::kAtpOffset;
  const JobEntry& job = jobs_.Entry(atp[wire::internal::kJobSeqOffset]);
  if (!job.aggregated()) return;
  const size_t i = job.AggregatorFor(LoadBig16(atp + wire::internal::kAggregatorOffset));
  __builtin_prefetch(&aggregators_.state(i), /*rw=*/1);
  const auto* values = reinterpret_cast<const uint8_t*>(&aggregators_.values(i));
  static_assert(sizeof(AggregatorValues) == 4 * 64, "four lines");
  __builtin_prefetch(values, /*rw=*/1);
  __builtin_prefetch(values + 64, /*rw=*/1);
  __builtin_prefetch(values + 128, /*rw=*/1);
  __builtin_prefetch(values + 192, /*rw=*/1);
}

template <AggregationLevel kLevel, class Path>
ATP_HOT SwitchPipeline::AggregateStep SwitchPipeline::Claim(uint8_t* frame, const HeaderWords& h,
                                                            size_t i, TimePoint now) {
  if (Has(h, FrameView::kResend)) [[unlikely]] {
    ++counters_.resend_to_ps;
    ++job_counters_[h.job()].resend_to_ps;
    return AggregateStep::kToPs;
  }
  constexpr bool kLevel1 = kLevel == AggregationLevel::kLevel1;
  const uint32_t bitmap = kLevel1 ? h.bitmap0 : h.bitmap1;
  AggregatorState& s = aggregators_.state(i);
  s.owner = h.job_seq;
  s.rack = kLevel1 ? h.bitmap1 : 0;
  s.fan_in = FanIn(h, kLevel);
  s.level = kLevel;
  s.counter = static_cast<uint8_t>(Path::Popcount(bitmap));
  s.ecn = Has(h, FrameView::kEcn);
  s.bitmap = bitmap;
  s.timestamp = now;
  Path::Load(kernels_, aggregators_.values(i).lanes, frame + wire::kPayloadOffset);
  ++in_use_;
  ++counters_.claimed;
  ++counters_.aggregated;
  if (s.counter == s.fan_in) [[unlikely]] {
    return Complete<Path>(frame, i);
  }
  return AggregateStep::kAbsorbed;
}

ATP_COLD SwitchPipeline::AggregateStep SwitchPipeline::Collide(uint8_t* frame, uint16_t fan_flags,
                                                               uint8_t job) {
  ++counters_.collisions;
  ++job_counters_[job].collisions;
  if ((fan_flags & FrameView::kResend) == 0) {
    StoreFlags(frame, fan_flags | FrameView::kCollision | FrameView::kResend);
  }
  return AggregateStep::kToPs;
}

ATP_COLD SwitchPipeline::AggregateStep SwitchPipeline::Duplicate(uint8_t* frame, uint16_t fan_flags,
                                                                 size_t i) {
  ++counters_.duplicates;
  aggregators_.state(i).ecn |= (fan_flags & FrameView::kEcn) != 0;
  return (fan_flags & FrameView::kResend) != 0 ? Flush(frame, i) : AggregateStep::kAbsorbed;
}

template <class Path>
ATP_HOT SwitchPipeline::AggregateStep SwitchPipeline::Complete(uint8_t* frame, size_t i) {
  WriteOut<Path>(frame, i);
  ++JobOf(aggregators_.state(i)).completed;
  Release(i);
  ++counters_.completed;
  return AggregateStep::kCompleted;
}

template <AggregationLevel kLevel, class Path>
ATP_HOT SwitchPipeline::AggregateStep SwitchPipeline::CompleteWithAdd(uint8_t* frame, size_t i,
                                                                      uint32_t bitmap) {
  const AggregatorState& s = aggregators_.state(i);
  Path::AddOut(kernels_, aggregators_.values(i).lanes, frame + wire::kPayloadOffset);
  // The packet's bitmap gains the aggregator's; its ecn flag is already set
  // if it had one, and gets the aggregator's.
  uint8_t* atp = frame + wire::kAtpOffset;
  StoreBig32(atp + (kLevel == AggregationLevel::kLevel1 ? wire::internal::kBitmap0Offset
                                                        : wire::internal::kBitmap1Offset),
             s.bitmap | bitmap);
  if (s.ecn) StoreFlags(frame, LoadFlags(frame) | FrameView::kEcn);
  ++JobOf(s).completed;
  Release(i);
  ++counters_.completed;
  return AggregateStep::kCompleted;
}

ATP_COLD SwitchPipeline::AggregateStep SwitchPipeline::Flush(uint8_t* frame, size_t i) {
  WriteOut<DynamicPath>(frame, i);
  ++JobOf(aggregators_.state(i)).flushed;
  Release(i);
  ++counters_.flushed;
  return AggregateStep::kToPs;  // edge and resend unchanged: a partial result
}

template <class Path>
ATP_HOT void SwitchPipeline::WriteOut(uint8_t* frame, size_t i) {
  const AggregatorState& s = aggregators_.state(i);
  Path::Store(kernels_, frame + wire::kPayloadOffset, aggregators_.values(i).lanes);
  uint8_t* atp = frame + wire::kAtpOffset;
  StoreBig32(atp + (s.level == AggregationLevel::kLevel1 ? wire::internal::kBitmap0Offset
                                                         : wire::internal::kBitmap1Offset),
             s.bitmap);
  if (s.ecn) StoreFlags(frame, LoadFlags(frame) | FrameView::kEcn);
}

size_t SwitchPipeline::ScanOrphans(TimePoint now, size_t budget) {
  const uint64_t before = counters_.orphaned;
  budget = std::min(budget, aggregators_.size());
  for (size_t k = 0; k < budget; ++k) ScanOne(now);
  return static_cast<size_t>(counters_.orphaned - before);
}

#undef ATP_DATAPATH_AVX512
#undef ATP_DATAPATH_AVX2
#undef ATP_COLD
#undef ATP_HOT

}  // namespace atp::switch_emulator
