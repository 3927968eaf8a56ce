// switch_emulator/pipeline/pipeline_config.h: what a switch pipeline is built
// from, and its per-reason counters.
//
//   PipelineConfig config;
//   config.aggregator_count = 4096;
//   config.orphan_timeout = TimeDelta::FromMilliseconds(10);
//   config.jobs.push_back({.job = 3, .levels = JobLevels::kLevel1, .multicast_group = 30});
//   absl::StatusOr<SwitchPipeline> pipeline = SwitchPipeline::Create(config);
#ifndef ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_CONFIG_H_
#define ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_CONFIG_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "atp/time.h"
#include "atp/wire.h"
#include "switch_emulator/pipeline/job_table.h"
#include "switch_emulator/pipeline/value_kernels.h"

namespace atp::switch_emulator {

// kDefaultAggregatorCount: a switch's aggregators unless configured (the
// pipeline's, atp-switchd's, the in-process fabric's): room for every slot
// of a job of 16 queues of the default 1024 slots (atp::kDefaultSlots), so
// that no default job collides with itself; and jobs, whose runs of slots
// start at hashed places, share aggregators about as rarely as they did at
// 256 slots in 4096 (12% of job pairs of one queue; 54% in 4096 at 1024
// slots; docs/protocol.md). 16384 aggregators take 4.8 MB.
inline constexpr size_t kDefaultAggregatorCount = 16384;

struct PipelineConfig {
  // Aggregators in the array, 1..kMaxAggregators. Header indices are 16 bits,
  // so in kDynamic mode only the first 65,536 are ever reachable.
  size_t aggregator_count = kDefaultAggregatorCount;
  // An aggregator untouched for longer than this is released (rule 7). > 0.
  TimeDelta orphan_timeout = TimeDelta::FromMilliseconds(10);
  // Rule 1: a packet is marked when Process's egress_queue_depth is greater
  // than this, in the same unit (the binding's choice; frames in the simulator
  // and atp-switchd).
  uint32_t ecn_threshold = 64;
  // ATP frames use UDP ports base_port .. base_port + 15. <= 65520.
  uint16_t base_port = wire::kDefaultBasePort;
  PartitionMode partition = PartitionMode::kDynamic;
  std::vector<JobConfig> jobs;
  // Aggregators the orphan scan visits inside every Process call, so a busy
  // switch keeps scanning with no help. 0: only ScanOrphans scans.
  uint32_t orphan_scan_per_packet = 1;
  ValueKernel kernel = ValueKernel::kAuto;
};

// Slots in PipelineCounters::malformed_by_reason, indexed by wire::DecodeError.
inline constexpr size_t kDecodeErrorSlots = 32;
static_assert(static_cast<size_t>(wire::DecodeError::kAmbiguousRack) < kDecodeErrorSlots);

// PipelineCounters: what happened to each packet, by reason. Plain counters,
// written only by the pipeline's thread; copy them out to export.
struct PipelineCounters {
  uint64_t packets = 0;                                           // Process calls
  uint64_t not_atp = 0;                                           // kForward: not an ATP frame
  uint64_t malformed = 0;                                         // kMalformed, all reasons
  std::array<uint64_t, kDecodeErrorSlots> malformed_by_reason{};  // [wire::DecodeError]
  uint64_t not_aggregated = 0;  // unknown job, forward-only mode, or a level not aggregated here
  uint64_t ecn_marked = 0;      // rule 1
  uint64_t acks = 0;            // rule 2: parameter packets multicast
  uint64_t acks_cleared = 0;    // rule 2: ... that released an aggregator
  uint64_t forwarded_fp = 0;    // rule 3
  uint64_t forwarded_control = 0;  // rule 3's flags, but a worker's control frame (a join,
                                   // a kOpBegin; lib/wire/control_message.h), not data
  uint64_t claimed = 0;         // rule 4: a free aggregator claimed
  uint64_t resend_to_ps = 0;    // rule 4: a resend that found a free aggregator
  uint64_t collisions = 0;      // rule 5: found another (job, seq, level)
  uint64_t aggregated = 0;      // rules 4, 6: data went into an aggregator (claims included)
  uint64_t duplicates = 0;      // rule 6: bitmap overlap
  uint64_t completed = 0;       // rule 6: fan-in reached (each level counts)
  uint64_t fed_to_level2 = 0;   // rule 6: level-1 completions fed into level 2 here
  uint64_t flushed = 0;         // rule 6: partial results flushed by a resend
  uint64_t orphaned = 0;        // rule 7
  uint64_t wipes = 0;           // WipeState calls
};

// PipelineJobCounters: what became of one job's gradients here, by reason.
// Counted only on the rarer events (a completion, a frame sent on to the PS,
// an orphan), never for a frame that is simply absorbed, so the per-packet
// path stays as it was. Sum over jobs: the PipelineCounters of the same name.
struct PipelineJobCounters {
  uint64_t completed = 0;       // rule 6: fan-in reached (each level counts)
  uint64_t collisions = 0;      // rule 5: to the PS, the aggregator held another seq
                                // (in ATP, "no free aggregator" is a collision)
  uint64_t resend_to_ps = 0;    // rule 4: a resend that found a free aggregator
  uint64_t flushed = 0;         // rule 6: a partial result flushed by a resend
  uint64_t forwarded_fp = 0;    // rule 3: float32 data, never aggregated
  uint64_t forwarded_control = 0;  // a worker's control frame toward the PS
  uint64_t not_aggregated = 0;  // forward-only mode, or a level not aggregated here
  uint64_t orphaned = 0;        // rule 7
};

}  // namespace atp::switch_emulator

#endif  // ATP_SWITCH_EMULATOR_PIPELINE_PIPELINE_CONFIG_H_
