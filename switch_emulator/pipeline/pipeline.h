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
// A binding with a burst of frames hides cache misses on large arrays by
// calling PrefetchAggregator(frame[i + 8]) before Process(frame[i]).
//
// Thread safety: none; one pipeline per thread (a switch core owns it).
#ifndef ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_H_
#define ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_H_

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

namespace atp::wire {
class FrameView;
}  // namespace atp::wire

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

  void SetMode(PipelineMode mode) { mode_ = mode; }
  PipelineMode mode() const { return mode_; }

  const PipelineCounters& counters() const { return counters_; }
  size_t aggregators_in_use() const { return in_use_; }
  // aggregators: read-only view, for tests and statistics.
  const AggregatorArray& aggregators() const { return aggregators_; }
  ValueKernel kernel() const { return kernels_.kind; }

 private:
  SwitchPipeline(const PipelineConfig& config, JobTable jobs, ValueKernels kernels);

  // AggregateStep: the outcome of rules 4-6 at one level. Its first two values
  // are Verdict's.
  enum class AggregateStep : uint8_t {
    kAbsorbed = static_cast<uint8_t>(Verdict::kAbsorbed),
    kToPs = static_cast<uint8_t>(Verdict::kToPs),
    kCompleted,  // the fan-in was reached; the result is written into the packet
  };

  // Aggregate: rules 4-6 for a gradient packet of `job` at `level`; a level-1
  // completion then moves to level 2 (edge set, resend cleared) and, on a
  // switch that is level 2 for the job too, is aggregated there.
  Verdict Aggregate(wire::FrameView& p, const JobEntry& job, AggregationLevel level, TimePoint now);
  AggregateStep AggregateAt(wire::FrameView& p, const JobEntry& job, AggregationLevel level,
                            TimePoint now);
  // Complete: rule 6's completion: write aggregator `i` into p and release it.
  AggregateStep Complete(wire::FrameView& p, size_t i);
  // Flush: rule 6's partial result: write aggregator `i` into p and release it.
  AggregateStep Flush(wire::FrameView& p, size_t i);
  // WriteOut: value, this level's bitmap and ecn of aggregator `i` into p.
  void WriteOut(wire::FrameView& p, size_t i);
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
  size_t scan_cursor_ = 0;
  size_t in_use_ = 0;
  PipelineCounters counters_;
};

}  // namespace atp::switch_emulator

#endif  // ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_H_
