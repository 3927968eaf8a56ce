// lib/ps/ps_config.h: the configuration of one parameter-server engine
// (ATP-SPEC section 6): the jobs it serves, the window slots per queue (the
// same value every worker of those jobs uses), and which queues it owns.
//
//   atp::ps::PsConfig config;
//   config.jobs.push_back(atp::protocol::JobShape::Uniform(/*job=*/7, 2, 4));
//   config.slots = 256;
//   ATP_RETURN_IF_ERROR(config.Validate());
#ifndef ATP_LIB_PS_PS_CONFIG_H_
#define ATP_LIB_PS_PS_CONFIG_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "atp/time.h"
#include "atp/wire.h"
#include "lib/protocol/job_shape.h"
#include "lib/protocol/skipped_generations.h"

namespace atp::ps {

// kMaxSlots: the largest window-slot count the PS accepts. ATP-SPEC section 3
// needs slots far below 2^19 for serial-number arithmetic on 20-bit positions;
// this bound also caps the engine's memory (about 1 KiB per slot and queue).
inline constexpr uint32_t kMaxSlots = 1u << 16;
static_assert(kMaxSlots < (1u << (wire::kQueueShift - 1)),
              "slots must stay far below half the position space");

struct PsConfig {
  // jobs: the shape of every job this engine serves (distinct job ids).
  std::vector<protocol::JobShape> jobs;
  // slots: window slots per queue, a power of two in 1..kMaxSlots; must equal
  // the workers' value, since slot = position mod slots on both sides.
  uint32_t slots = 256;
  // shard_index / shard_count: a job with several PS hosts sends queue q to PS
  // number q mod shard_count (ATP-SPEC section 3); this engine keeps state only
  // for the queues with q mod shard_count == shard_index. The same split can
  // give each PS I/O thread its own engine.
  uint32_t shard_index = 0;
  uint32_t shard_count = 1;
  // fp_pool_buffers: buffers for the overflow (float32) path kept allocated
  // while idle. A seq on that path holds one buffer (4 bytes x 62 values per
  // worker of the largest job); more concurrent float seqs than this allocate
  // on that rare path and free again when they complete.
  uint32_t fp_pool_buffers = 2;
  // orphan_timeout: a slot's live generation (partial integer sums, or the
  // float rows and pool buffer of the overflow path) that no message has
  // touched for longer than this is released: its workers died or gave up
  // (ATP-SPEC invariant 5). Every message for the live generation touches it,
  // duplicates and resends included, so a worker that still waits for the
  // seq keeps it as long as it resends more often than this. Must exceed the
  // workers' maximum retransmission timeout plus a round trip (see
  // docs/protocol.md); the default is twice JobOptions::max_retransmission_timeout's
  // default. Positive; TimeDelta::Infinite() never releases.
  TimeDelta orphan_timeout = TimeDelta::FromSeconds(2);
  // orphan_scan_per_message: slots the orphan scan visits inside every
  // OnGradient call (besides ScanOrphans), so that a busy engine whose owner
  // never calls ScanOrphans still frees orphans. 0: only ScanOrphans scans.
  uint32_t orphan_scan_per_message = 1;
  // waiting_report_interval: for the host (PsShard::ReportWaiting): how long a
  // fragment stays incomplete before the PS names the workers it waits for,
  // and how often it repeats that per job and queue. Positive;
  // TimeDelta::Infinite() never reports.
  TimeDelta waiting_report_interval = TimeDelta::FromSeconds(1);
  // contribution_skipping_jobs: ids (of `jobs`) whose gradient packets may
  // declare fewer contributors than the shape (SkipReduce's contribution
  // variant, SkipVariant::kContributions): the PS then takes a seq's
  // contributor set from its packets' fan-ins and completes when that set is
  // covered (JobLayout, "declared fan-ins"). The PS cannot compute the set
  // itself (it does not know which operation a position belongs to), so it
  // trusts the senders: a worker or switch that declares too few contributors
  // ends the seq early with a partial sum. Packets of one seq must agree.
  std::vector<uint8_t> contribution_skipping_jobs;
  // contribution_history: for those jobs, the completed parameter packets
  // kept per slot (the last one and older generations) to answer pulls and
  // resends. A worker may fall behind the job at the positions it leaves out
  // (the others do not wait for it), and is answered only while its position
  // is among the slot's last contribution_history generations; the workers'
  // keep-alives bound how far behind (lib/protocol/skipped_generations.h), so
  // protocol::kContributionHistoryNeeded (5) .. 64. Memory: this many 308-byte
  // packets per served queue and slot of each such job.
  uint32_t contribution_history = protocol::kContributionHistoryNeeded;

  // Validate: at least one job, every JobShape valid, job ids distinct, slots
  // a power of two in range, shard_count 1..16 and shard_index below it,
  // orphan_timeout positive. The message names the offending field.
  absl::Status Validate() const;

  // ServedQueues: how many of the 16 queues this engine owns.
  uint32_t ServedQueues() const;
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_PS_CONFIG_H_
