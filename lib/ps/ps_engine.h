// lib/ps/ps_engine.h: the parameter-server engine (ATP-SPEC section 6).
//
// PsEngine finishes whatever aggregation the switches left undone: it adds the
// gradient packets of each (job, seq) until every worker of the job is
// covered, then multicasts the parameter packet. It rehashes aggregator indices
// after collisions, runs the float32 overflow path, and re-sends a completed
// seq's parameter packet to a worker that lost it.
//
//   PsConfig config;
//   config.jobs.push_back(protocol::JobShape::Uniform(/*job=*/7, /*racks=*/2, /*workers=*/4));
//   config.slots = 256;
//   ATP_ASSIGN_OR_RETURN(PsEngine engine, PsEngine::Create(std::move(config)));
//   for (const wire::AtpMessage& m : received) engine.OnGradient(m, now, multicast_sink);
//
// What it sends (every message to every worker of the message's job):
// - Parameter packet: job, seq, ack=1, edge=1, resend=0, fp=1 after the float
//   path; ecn = OR of the seq's accepted contributions (those discarded by the
//   float path and integer packets arriving on it included; duplicates not);
//   fanIn1 = racks and bitmap1 = every rack; fanIn0 = the largest rack's size
//   and bitmap0 = every worker of such a rack; aggregator = the index the
//   fragment used (its first contribution's). If a contribution reported a
//   collision: collision=1 and bitmap1 = RehashAggregatorIndex(job, seq,
//   aggregator) in its low 16 bits instead.
// - Overflow request: job, seq, ack=1, resend=1, fp=0, edge=1, empty bitmaps,
//   zero payload, aggregator as above. Sent when a contribution holds
//   INT32_MAX/INT32_MIN (a switch saturated), when the complete int64 sum
//   leaves the open int32 range (checked at completion, so the outcome does not
//   depend on arrival order), or when an fp row arrives for a seq still on the
//   integer path (unless that row completes the seq); and again when an
//   integer packet arrives for a seq on the float path naming a worker whose
//   fp row is still missing.
//
// Choices the spec leaves open: every queue's stream starts at position 0; a
// non-resend copy of a completed seq is a duplicate (only a resend re-sends
// the stored packet); fp rows are summed in double in worker order (rack-major),
// starting from the first row, and rounded once to float32.
//
// SkipReduce's contribution variant (docs/skipreduce.md): for the jobs in
// PsConfig::contribution_skipping_jobs a seq's contributor set is the one its
// packets declare in their fan-ins (JobLayout, Coverage), not the job's
// shape; float rows are stored by (contributing rack, contributor). A worker
// that contributed nothing to a seq and lost its parameter packet asks with
// a kPull control frame, which the host passes to OnPull.
//
// Orphans (ATP-SPEC invariant 5): a slot's live generation that no message has
// touched for longer than PsConfig::orphan_timeout (its workers died or the job
// was aborted) is released: the partial integer sums are forgotten, the float
// rows go back to the pool, and orphans_released counts it. Every message for
// the live generation touches it (contributions, duplicates, integer packets
// on the float path), so state a live worker still resends is kept. A released
// generation is still the slot's next one: a late resend simply starts it
// again, and since every worker keeps its fragment until acknowledged (and
// re-sends it as fp after an overflow request), the result stays exact. The
// slot's last completed parameter packet is kept (it is part of the idle size,
// and a worker that lost it needs it). Release happens lazily: when a message
// reaches a slot idle for longer than the timeout (before the message is
// handled), in a small scan step inside every OnGradient
// (PsConfig::orphan_scan_per_message), and in ScanOrphans, which the owner
// calls with its clock when no traffic arrives.
//
// Reports (docs/protocol.md "Failures, runs and restarts"): CollectWaiting
// names, per job and served queue, the fragment waited for longest (live, or
// under contribution skipping also pulled while incomplete) if longer than a
// given time, and the workers that have not contributed to it (the host
// turns that into a kStatus control frame, so that stalled workers can name
// who they wait for, and workers behind the job learn where it waits:
// docs/skipreduce.md; under declared fan-ins it names no one: Missing);
// every orphan release is summed per job into an
// AbandonReport (how many fragments, which workers never contributed) that
// the host takes and logs.
//
// The engine is pure: it reads no clock (callers pass `now`), does no I/O and
// allocates only at Create (and on the rare float path beyond
// PsConfig::fp_pool_buffers). It is not thread-safe: one thread drives it, or
// each thread drives its own engine for its own queues
// (PsConfig::shard_index / shard_count).
#ifndef ATP_LIB_PS_PS_ENGINE_H_
#define ATP_LIB_PS_PS_ENGINE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "atp/wire.h"
#include "lib/protocol/message_sink.h"
#include "lib/protocol/worker_set.h"
#include "lib/ps/fp_buffer_pool.h"
#include "lib/ps/job_layout.h"
#include "lib/ps/ps_config.h"
#include "lib/ps/ps_counters.h"
#include "lib/ps/run_tracker.h"
#include "lib/ps/slot_state.h"

namespace atp::ps {

// WaitingReport: the oldest incomplete fragment of one job and queue.
struct WaitingReport {
  uint8_t job = 0;
  uint32_t queue = 0;
  uint32_t position = 0;         // its 20-bit position
  protocol::WorkerSet missing;   // global (rack-major) indices not yet contributed
  uint8_t fan_in0 = 1;           // the job's shape, for the control frame's header
  uint8_t fan_in1 = 1;
};

// AbandonReport: partial state of one job released as orphans since the last
// TakeAbandoned.
struct AbandonReport {
  uint8_t job = 0;
  uint64_t fragments = 0;                 // live generations released
  protocol::WorkerSet never_contributed;  // union over them of who had not contributed
  uint32_t first_queue = 0;               // the first one released
  uint32_t first_position = 0;
};

class PsEngine {
 public:
  // Create: validates `config` and allocates all per-slot state (about 1 KiB
  // per job, served queue and slot).
  static absl::StatusOr<PsEngine> Create(PsConfig config);

  PsEngine(PsEngine&&) = default;
  PsEngine& operator=(PsEngine&&) = default;
  PsEngine(const PsEngine&) = delete;
  PsEngine& operator=(const PsEngine&) = delete;

  // OnGradient: handles one decoded message addressed to the PS. Parameter
  // packets and overflow requests it causes are passed to `sink` before it
  // returns; the caller multicasts each to every worker of its job. Every
  // message is counted in counters() (see PsCounters). `now` stamps the
  // slot's live generation and drives the orphan scan; it must not go
  // backwards by more than the orphan timeout.
  void OnGradient(const wire::AtpMessage& message, TimePoint now, protocol::MessageSink& sink);

  // ScanOrphans: visits the next `budget` slots (a cursor wraps around every
  // job's slots; at most one full pass per call) and releases each live
  // generation untouched for longer than PsConfig::orphan_timeout. Returns how
  // many it released. Costs nothing when no slot is live. Call it from the
  // owner's idle loop: with no traffic, OnGradient's own scan step does not run.
  size_t ScanOrphans(TimePoint now, size_t budget);

  // OnPull: a kPull control frame (lib/wire/control_message.h; the host has
  // decoded it): a worker that did not contribute to (queue, position) of
  // its job (SkipReduce's contribution variant) lost the parameter packet.
  // For a completed position the stored packet goes to `sink` again (as a
  // resend would get it); for a live one nothing: its completion will be
  // multicast. Counted in pulls_answered / pulls_ignored. A position among
  // the slot's older generations kept for the job (contribution_history) is
  // answered with its packet too. A pull for the slot's next generation
  // marks that position as waited for since `now` (if not already), until it
  // completes or its queue is rebuilt: CollectWaiting reports it even while
  // nothing of it is live (the job waits for its only contributors, and the
  // others pull).
  void OnPull(const wire::AtpMessage& pull, TimePoint now, protocol::MessageSink& sink);

  // OrphanScanBudget: the budget that makes ScanOrphans, called once every
  // `interval`, visit every slot within a quarter of the orphan timeout (so an
  // orphan is released at most orphan_timeout * 5 / 4 + interval after its
  // last message). At least 1.
  size_t OrphanScanBudget(TimeDelta interval) const;

  // CollectWaiting: appends, for every job and served queue with a fragment
  // waited for at least `older_than` (live, i.e. partially aggregated, or
  // pulled while incomplete: OnPull), a report on the one waited for
  // longest. Visits every slot: call it about once per report interval, not
  // per packet. Nothing when no slot is live or pulled.
  void CollectWaiting(TimePoint now, TimeDelta older_than, std::vector<WaitingReport>& out) const;

  // TakeAbandoned: appends one report per job that released orphans since the
  // last call, and forgets them.
  void TakeAbandoned(std::vector<AbandonReport>& out);

  // OutOfWindow: a job and queue that received gradients outside the PS's
  // window (stale or ahead) since the last TakeOutOfWindow.
  struct OutOfWindow {
    uint8_t job = 0;
    uint32_t queue = 0;
  };
  bool has_out_of_window() const { return any_out_of_window_; }
  void TakeOutOfWindow(std::vector<OutOfWindow>& out);

  // RebuildQueue: sets every slot of `job`'s `queue` (served here) to wait for
  // its position in [lowest, lowest + slots) (RunTracker), or for the next
  // one (position + slots) when every worker has the result of that
  // position (`acked_by_all`, ascending; RecoveryPlan). kFreshPs and
  // kResync: a slot already waiting for its target (its stored packet the
  // position before it), or that the PS completed at or past it, is kept.
  // kNewRun: only a slot waiting for its target with no partial sums is
  // kept; the others belong to another run (positions restart at 0), even
  // a stored packet of the target itself. Any slot not kept forgets its
  // live state, stored packet and history and waits for the target. Returns
  // the slots changed. Unknown job or queue: 0.
  size_t RebuildQueue(uint8_t job, uint32_t queue, uint64_t lowest, RebuildMode mode,
                      std::span<const uint64_t> acked_by_all = {});
  // OnReplay: `packet` is a parameter packet an earlier PS completed (its
  // header and payload as a worker received them), replayed by that worker
  // after a restart (lib/protocol/replay_message.h). If its slot waits for
  // exactly that position, the packet becomes the slot's completed one (the
  // live state, if any, is dropped) and goes to `sink`, so that every
  // worker still waiting for it gets the same values; true. Otherwise (not a
  // result of a job and queue served here, or the slot waits for another
  // position) nothing changes; false. Counted in replays_applied /
  // replays_ignored.
  bool OnReplay(const wire::AtpMessage& packet, protocol::MessageSink& sink);
  // WaitsFor: the slot of `position` (20-bit) of `job`'s `queue` waits for
  // that very position (it is the slot's next generation).
  bool WaitsFor(uint8_t job, uint32_t queue, uint32_t position) const;
  // job_layout: the layout of a job served here, or null.
  const JobLayout* job_layout(uint8_t job) const {
    return job_index_[job] < 0 ? nullptr : &jobs_[static_cast<size_t>(job_index_[job])].layout;
  }
  // served_index: the index of a served queue among this engine's queues.
  uint32_t served_index(uint32_t queue) const { return queue / config_.shard_count; }
  uint32_t served_queues() const { return config_.ServedQueues(); }
  bool ServesQueue(uint32_t queue) const {
    return queue < wire::kMaxQueues && queue % config_.shard_count == config_.shard_index;
  }

  const PsCounters& counters() const { return counters_; }

  // fp_buffers_in_use: float-path buffers held by seqs still on that path; 0
  // once they complete (the memory the engine holds beyond its idle size).
  size_t fp_buffers_in_use() const { return fp_pool_.in_use(); }

  // live_slots: slots whose live generation holds state (integer sums or
  // float rows); 0 once every started seq completed or was released.
  size_t live_slots() const { return live_slots_; }
  // total_slots: every slot of every job this engine serves.
  size_t total_slots() const { return touched_.size(); }

  uint32_t slots() const { return slots_; }

 private:
  struct JobState {
    JobLayout layout;
    uint16_t out_of_window = 0;               // bit q: queue q saw stale or ahead gradients
    wire::AtpHeader parameter_template;       // the fields every parameter packet shares
    std::vector<SlotState> slots;             // [served queue * slots + slot]
    std::vector<wire::AtpMessage> completed;  // same index: last completed parameter packet
    // history: declared fan-ins only: the slot's last contribution_history
    // completed packets, [index * history + generation % history].
    std::vector<wire::AtpMessage> history;
  };

  PsEngine(const PsConfig& config, size_t fp_floats_per_buffer);

  // The live generation of slot `index` of `job`, by the path it is on.
  void OnIntegerOrIdle(JobState& job, size_t index, const wire::AtpMessage& message,
                       const Contributors& who, protocol::MessageSink& sink);
  void OnFloatPath(JobState& job, size_t index, const wire::AtpMessage& message,
                   const Contributors& who, protocol::MessageSink& sink);

  // AddCoverage: adds `who` to the live generation's coverage; false (counted
  // as a duplicate or a shape mismatch) when it overlaps or disagrees with
  // the contributor set the seq's earlier packets declared.
  bool AddCoverage(const JobLayout& layout, SlotState& slot, const Contributors& who);
  // NoteContribution: records an accepted contribution's aggregator index (the
  // first one's), ecn and collision flags in the live generation.
  static void NoteContribution(SlotState& slot, const wire::AtpHeader& header);
  // StartFloatPath: drops the integer state of the live generation and gives it
  // a float row buffer.
  void StartFloatPath(SlotState& slot);
  // AddFloatRow: stores an fp packet's row (its coverage already added).
  void AddFloatRow(const JobLayout& layout, SlotState& slot, const wire::AtpMessage& message,
                   const Contributors& who);
  // SumFloatRowsOf: the live float generation's rows summed into `out`.
  static void SumFloatRowsOf(const JobLayout& layout, const SlotState& slot, wire::Payload& out);
  void SendOverflowRequest(const JobState& job, const SlotState& slot, uint32_t seq,
                           protocol::MessageSink& sink);

  // Complete: writes the live generation's parameter packet (header; the
  // caller has written the payload) into the job's stored packet, resets the
  // slot for its next generation and sends the packet.
  void Complete(JobState& job, size_t index, uint32_t seq, protocol::MessageSink& sink);
  // ClearHistory: forgets the older generations the job's history keeps for
  // slot `index` (nothing without a history).
  void ClearHistory(JobState& job, size_t index);
  // Recent: the completed packet of (queue, position) of `job` (slot
  // `index`) while the job's history keeps it, else nullptr.
  const wire::AtpMessage* Recent(const JobState& job, size_t index, uint32_t queue,
                                 uint32_t position) const;

  // ResetLive: the live generation back to idle, its float buffer (if any)
  // returned to the pool. Keeps completed_position and the stored packet.
  void ResetLive(SlotState& slot);
  // ReleaseOrphan: ResetLive for an orphan, counted; `flat` indexes touched_.
  void ReleaseOrphan(size_t flat);
  void NoteOutOfWindow(JobState& job, uint32_t queue) {
    job.out_of_window = static_cast<uint16_t>(job.out_of_window | (1u << queue));
    any_out_of_window_ = true;
  }
  // ForgetPull: the slot at `flat` (as touched_) no longer waits for a pulled
  // position (it completed, or the slot was rebuilt).
  void ForgetPull(size_t flat) {
    if (pulled_since_[flat].IsInfinite()) return;
    pulled_since_[flat] = TimePoint::Infinite();
    --pulled_slots_;
  }
  // Missing: the workers of `job` not covered in `slot`'s live generation;
  // none for a job with declared fan-ins (its bitmaps count contributors).
  static protocol::WorkerSet Missing(const JobState& job, const SlotState& slot);
  // QueueOfIndex: the queue number of a slot index of this engine.
  uint32_t QueueOfIndex(size_t index) const {
    return static_cast<uint32_t>(index / slots_) * config_.shard_count + config_.shard_index;
  }
  bool IsOrphan(TimePoint touched, TimePoint now) const {
    return !touched.IsInfinite() && now - touched > config_.orphan_timeout;
  }

  PsConfig config_;
  uint32_t slots_;
  uint32_t slot_mask_;
  std::array<int16_t, wire::kMaxJobId + 1> job_index_;  // job id -> jobs_ index, or -1
  std::vector<JobState> jobs_;
  FpBufferPool fp_pool_;
  PsCounters counters_;
  // Orphan tracking, dense so that the scan streams: touched_[job index *
  // slots_per_job_ + slot index] is the last message time of that slot's live
  // generation, or TimePoint::Infinite() while it is idle.
  size_t slots_per_job_ = 0;
  std::vector<TimePoint> touched_;
  // live_since_[same index]: when that live generation started (valid while
  // touched_ is finite).
  std::vector<TimePoint> live_since_;
  // pulled_since_[same index]: when a pull first asked for the slot's next
  // generation while it was incomplete, or TimePoint::Infinite() (reset when
  // it completes); pulled_slots_ counts the finite ones.
  std::vector<TimePoint> pulled_since_;
  size_t pulled_slots_ = 0;
  // abandoned_[job index]: orphans released since the last TakeAbandoned.
  std::vector<AbandonReport> abandoned_;
  size_t live_slots_ = 0;
  size_t scan_cursor_ = 0;
  bool any_out_of_window_ = false;
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_PS_ENGINE_H_
