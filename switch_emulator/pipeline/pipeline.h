// switch_emulator/pipeline/pipeline.h: the ToR switch logic of ATP-SPEC
// section 4, as a pure function of (state, frame, now, egress queue depth).
//
// SwitchPipeline does no I/O, reads no clock and allocates nothing after
// Create. A binding (the simulator's switch, atp-switchd, a test) hands it each
// frame and acts on the Decision; the frame is rewritten in place and its length
// never changes.
//
//   ATP_ASSIGN_OR_RETURN(SwitchPipeline pipeline, SwitchPipeline::Create(config));
//   for (Frame& f : burst) {
//     Decision d = pipeline.Process(f.bytes(), now, port.egress_depth());
//     switch (d.verdict) {
//       case Verdict::kAbsorbed:  case Verdict::kMalformed: f.Free(); break;
//       case Verdict::kToPs:      SendUpstream(f); break;
//       case Verdict::kMulticast: SendToGroup(d.multicast_group, f); break;
//       case Verdict::kForward:   Route(f); break;
//     }
//   }
//   pipeline.ScanOrphans(now, 64);   // also when idle: frees orphans with no traffic
//
// A binding that receives frames in bursts calls ProcessBurst instead: one
// call per burst, and the aggregators of the frames a few places ahead
// prefetched (hiding cache misses on arrays beyond L1).
//
// Cost (bench/results/switch_pipeline.md): on a CPU with AVX2 or AVX-512 (and
// BMI2), a valid gradient that aggregates runs straight-line code compiled for
// that instruction set: validation inline, one job-table line, one state line,
// the four value lines through the value kernel inline, no call.
//
// Thread safety: none; one pipeline per thread (a switch core owns it).
#ifndef ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_H_
#define ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "switch_emulator/pipeline/aggregator.h"
#include "switch_emulator/pipeline/job_table.h"
#include "switch_emulator/pipeline/pipeline_config.h"
#include "switch_emulator/pipeline/value_kernels.h"

namespace atp::wire::internal {
struct HeaderWords;
}  // namespace atp::wire::internal

namespace atp::switch_emulator {

// Verdict: what the binding does with a frame after Process.
enum class Verdict : uint8_t {
  kAbsorbed,   // consumed: added into an aggregator, or a duplicate dropped
  kToPs,       // forward toward the PS (upstream)
  kMulticast,  // a parameter packet: send to Decision::multicast_group (every worker;
               // on a level-2 switch also toward the level-1 switches)
  kForward,    // not ATP, or a job this switch does not aggregate: route normally
  kMalformed,  // an invalid ATP frame: counted, drop it
};

std::string_view VerdictName(Verdict verdict);

struct Decision {
  Verdict verdict = Verdict::kForward;
  uint32_t multicast_group = 0;  // the job's group; only meaningful for kMulticast

  friend bool operator==(const Decision&, const Decision&) = default;
};

// PipelineMode: whether the switch aggregates at all.
enum class PipelineMode : uint8_t {
  kAggregating,
  kForwardOnly,  // routes its jobs' packets as before (kToPs / kMulticast) but never
                 // touches an aggregator: a switch that stopped aggregating
};

class SwitchPipeline {
 public:
  // Create: validates `config` (the message names the field) and allocates the
  // aggregator array, all free.
  static absl::StatusOr<SwitchPipeline> Create(const PipelineConfig& config);

  SwitchPipeline(SwitchPipeline&&) = default;
  SwitchPipeline& operator=(SwitchPipeline&&) = default;

  // Process: applies section 4 to one frame and rewrites it in place.
  // `egress_queue_depth` is the queue toward the frame's next hop, in the unit
  // of PipelineConfig::ecn_threshold. `now` must not go backwards by more than
  // the orphan timeout.
  //   - Non-ATP frames (wire::IsAtpFrame false): kForward, never written.
  //   - Invalid ATP frames (wire::ValidateFrame != kOk): kMalformed, counted by
  //     reason, never written, never touch an aggregator.
  //   - Jobs not in the table: kForward, never written (not even ECN).
  //   - Every other frame gets rule 1 (ECN), whatever its level or the mode;
  //     then rules 2-6. A gradient at a level this switch does not aggregate
  //     for its job, or in kForwardOnly mode, goes kToPs unchanged.
  // Also advances the orphan scan by PipelineConfig::orphan_scan_per_packet.
  Decision Process(std::span<uint8_t> frame, TimePoint now, uint32_t egress_queue_depth);

  // ProcessBurst: Process(frames[k], now, egress_queue_depth) for k = 0, 1, ...
  // in order, decisions[k] receiving frames[k]'s Decision: the same results,
  // frame bytes, state and counters as those calls, for less time per frame
  // (one call, the per-packet path inlined into the loop). One queue depth
  // serves the whole burst (a binding with per-frame depths calls Process).
  // When the aggregator array outgrows the L1 cache (kPrefetchFromBytes), it
  // prefetches the aggregator of frame k + kBurstPrefetchDistance while
  // processing frame k. Requires decisions.size() >= frames.size().
  void ProcessBurst(std::span<const std::span<uint8_t>> frames, TimePoint now,
                    uint32_t egress_queue_depth, std::span<Decision> decisions);
  static constexpr size_t kBurstPrefetchDistance = 4;
  static constexpr size_t kPrefetchFromBytes = size_t{64} << 10;

  // PrefetchAggregator: a hint, no effect on state: starts loading the
  // aggregator that `frame` would use (its state line and 4 value lines), so a
  // later Process(frame) finds it in cache. Reads the frame's job and index
  // bytes only, and only if the frame is long enough to hold them; any frame is
  // safe to pass.
  void PrefetchAggregator(std::span<const uint8_t> frame) const;

  // ScanOrphans: visits the next `budget` aggregators (a cursor wraps around
  // the array; at most one full pass per call) and releases each one untouched
  // for longer than the orphan timeout (rule 7). Returns how many it released.
  // Call it from the binding's idle loop: with no traffic, Process's own scan
  // step does not run.
  size_t ScanOrphans(TimePoint now, size_t budget);

  // WipeState: every aggregator free at once, as after a switch reboot.
  void WipeState();

  void SetMode(PipelineMode mode) {
    mode_ = mode;
    levels_aggregated_ = mode == PipelineMode::kAggregating ? kBothLevels : 0;
  }
  PipelineMode mode() const { return mode_; }

  const PipelineCounters& counters() const { return counters_; }
  // job_counters: one job's counters (all zero for a job not in the table).
  const PipelineJobCounters& job_counters(uint8_t job) const { return job_counters_[job]; }
  size_t aggregators_in_use() const { return in_use_; }
  TimeDelta orphan_timeout() const { return orphan_timeout_; }
  // aggregators: read-only view, for tests and statistics.
  const AggregatorArray& aggregators() const { return aggregators_; }
  ValueKernel kernel() const { return kernels_.kind; }

 private:
  SwitchPipeline(const PipelineConfig& config, JobTable&& jobs, ValueKernels kernels);

  // AggregateStep: the outcome of rules 4-6 at one level. Its first two values
  // are Verdict's.
  enum class AggregateStep : uint8_t {
    kAbsorbed = static_cast<uint8_t>(Verdict::kAbsorbed),
    kToPs = static_cast<uint8_t>(Verdict::kToPs),
    kCompleted,  // the fan-in was reached; the result is written into the packet
  };

  using HeaderWords = wire::internal::HeaderWords;

  // Datapath: which compiled copy of the per-packet path Process runs. The
  // vector ones are compiled for their instruction set (plus BMI, BMI2 and POPCNT)
  // with the value kernel and frame checks inlined; kDynamic calls the value
  // kernels through ValueKernels' pointers and runs anywhere.
  enum class Datapath : uint8_t { kDynamic, kAvx2, kAvx512 };
  static Datapath DatapathFor(ValueKernel kernel);

  // The per-packet path is one function per datapath (ProcessWith<Path>) with
  // the common case inline (claims, adds, completions); what is rare in steady
  // state (rejects, ECN marks, parameter and fp packets, collisions,
  // duplicates, flushes) is out of line. Header words travel by value (in registers); out-of-line
  // steps that need them after the pipeline wrote to the frame read them back
  // from it.
  template <class Path>
  Decision ProcessWith(std::span<uint8_t> frame, TimePoint now, uint32_t egress_queue_depth);
  Decision ProcessDynamic(std::span<uint8_t> frame, TimePoint now, uint32_t egress_queue_depth);
  Decision ProcessAvx2(std::span<uint8_t> frame, TimePoint now, uint32_t egress_queue_depth);
  Decision ProcessAvx512(std::span<uint8_t> frame, TimePoint now, uint32_t egress_queue_depth);
  template <class Path>
  void ProcessBurstWith(std::span<const std::span<uint8_t>> frames, TimePoint now,
                        uint32_t egress_queue_depth, std::span<Decision> decisions);
  void ProcessBurstDynamic(std::span<const std::span<uint8_t>> frames, TimePoint now,
                           uint32_t egress_queue_depth, std::span<Decision> decisions);
  void ProcessBurstAvx2(std::span<const std::span<uint8_t>> frames, TimePoint now,
                        uint32_t egress_queue_depth, std::span<Decision> decisions);
  void ProcessBurstAvx512(std::span<const std::span<uint8_t>> frames, TimePoint now,
                          uint32_t egress_queue_depth, std::span<Decision> decisions);

  // PrefetchFor: PrefetchAggregator, inline.
  void PrefetchFor(std::span<const uint8_t> frame) const;
  // Reject: the verdict for a frame that failed validation (kForward if it is
  // not ATP at all, else kMalformed), with its counters.
  Decision Reject(std::span<const uint8_t> frame);
  // MarkEcn: rule 1 on a frame.
  void MarkEcn(uint8_t* frame);
  // AckOrFp: rules 2 and 3.
  Decision AckOrFp(const uint8_t* frame, const JobEntry& job);
  // AggregateAt: rules 4-6 for a gradient packet of `job` at kLevel.
  template <AggregationLevel kLevel, class Path>
  AggregateStep AggregateAt(uint8_t* frame, HeaderWords h, const JobEntry& job, TimePoint now);
  // AfterCompletion: the verdict once `level` completed: a level-1 result
  // moves to level 2 (edge set, resend cleared) and, on a switch that is
  // level 2 for the job too, is aggregated there.
  template <class Path>
  Verdict AfterCompletion(uint8_t* frame, AggregationLevel level, const JobEntry& job,
                          TimePoint now);
  // Claim: rule 4 on free aggregator `i`.
  template <AggregationLevel kLevel, class Path>
  AggregateStep Claim(uint8_t* frame, const HeaderWords& h, size_t i, TimePoint now);
  // Collide: rule 5 for a frame of `job`.
  AggregateStep Collide(uint8_t* frame, uint16_t fan_flags, uint8_t job);
  // Duplicate: rule 6's duplicate on aggregator `i`.
  AggregateStep Duplicate(uint8_t* frame, uint16_t fan_flags, size_t i);
  // Complete: rule 6's completion: write aggregator `i` into the frame and release it.
  template <class Path>
  AggregateStep Complete(uint8_t* frame, size_t i);
  // CompleteWithAdd: rule 6's completion by a packet that adds `bitmap`: the
  // sum goes straight into the frame (Complete's result, one pass fewer).
  template <AggregationLevel kLevel, class Path>
  AggregateStep CompleteWithAdd(uint8_t* frame, size_t i, uint32_t bitmap);
  // Flush: rule 6's partial result: write aggregator `i` into the frame and release it.
  AggregateStep Flush(uint8_t* frame, size_t i);
  // WriteOut: value, this level's bitmap and ecn of aggregator `i` into the frame.
  template <class Path>
  void WriteOut(uint8_t* frame, size_t i);
  void Release(size_t i);
  // ScanOne: rule 7 for the aggregator under the scan cursor; advances it.
  void ScanOne(TimePoint now);

  AggregatorArray aggregators_;
  JobTable jobs_;
  ValueKernels kernels_;
  TimeDelta orphan_timeout_;
  uint32_t ecn_threshold_ = 0;
  uint16_t base_port_ = wire::kDefaultBasePort;
  uint32_t scan_per_packet_ = 0;
  PipelineMode mode_ = PipelineMode::kAggregating;
  // The JobEntry::levels bits this switch aggregates at in its mode: both, or
  // none in kForwardOnly.
  static constexpr uint8_t kBothLevels = 3;
  uint8_t levels_aggregated_ = kBothLevels;
  Datapath datapath_ = Datapath::kDynamic;
  bool prefetch_in_bursts_ = false;  // the array is at least kPrefetchFromBytes
  size_t aggregator_count_ = 0;      // aggregators_.size(), kept at hand for the scan
  size_t scan_cursor_ = 0;
  size_t in_use_ = 0;
  PipelineCounters counters_;
  // [job id]: only the rarer events (see PipelineJobCounters); job 0 unused.
  std::array<PipelineJobCounters, wire::kMaxJobId + 1> job_counters_{};
  // JobOf: the counters of the job that owns aggregator state `s` (not free).
  PipelineJobCounters& JobOf(const AggregatorState& s) { return job_counters_[s.job()]; }
};

}  // namespace atp::switch_emulator

#endif  // ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_H_
