// lib/ps/run_tracker.h: which run of a job the PS serves, per queue, from the
// workers' joins (docs/protocol.md "Failures, runs and restarts").
//
// A run is one Worker per worker of the job, each with its random
// incarnation; its streams start at position 0. The tracker remembers, per
// served queue, the incarnations the PS last synchronized with and the
// latest join of every worker. When every worker has joined the queue since
// the last decision, the queue's generations are rebuilt from the joins:
//   - nothing was synchronized before (a fresh or restarted PS): kFreshPs,
//     rebuild forward only (the PS keeps what it completed since it started);
//   - the PS had synchronized other incarnations (a new run): kNewRun, reset;
//   - every join is of the synchronized incarnations (the run the PS serves
//     joined again, when the PS asked because the queue stalled or saw
//     frames outside its window): kResync, forward only like kFreshPs. The
//     joins are newer than the last decision's, so a result of the dead PS
//     that reached a worker after its first join is now in the plan.
// If only some incarnations are new (one worker restarted alone) nothing is
// rebuilt, and the queue is Unsynchronized: the PS holds its gradients back
// and the job stalls. A join decides only while it is at most kJoinLifetime
// old: the join of a worker that restarted alone and died since must not
// make a new run's decision with the new run's other workers (the living
// answer the PS's join requests within a round trip).
//
// One exception, a redo (run_tracker.cc has the whole argument): a whole new
// run that starts within that second can still be decided with such a dead
// worker's join. When its own worker for that index joins, the mixed set is
// decided again as a new run (kNewRun) if no join in it has any result, the
// synchronized workers' joins came while the queue was held back (so their
// run never moved, and cannot since: redoing loses nothing), and every
// other incarnation in it was never seen at its worker up to the last
// decision that set the synchronized incarnations: a late join of an older
// run, or of any incarnation that ever was part of a decision, is never let
// back in. Those incarnations are kept in Bloom filters: a redo may be
// refused that was due (the queue stays held back, as without the redo),
// never made that was not. Nor does a late join of the run that the last
// run decision replaced make a new run with the next run's joins (that
// worker's previous synchronized incarnation is kept, exactly).
//
//   RunTracker tracker(/*workers=*/4, /*served_queues=*/16);
//   if (auto d = tracker.OnJoin(q, worker, incarnation, join, now)) Rebuild(*d);
//
// Memory: one join (216 bytes), two incarnations (8 bytes each) and two
// incarnation filters (32 bytes each) per worker and served queue, 296 bytes,
// allocated at construction.
#ifndef ATP_LIB_PS_RUN_TRACKER_H_
#define ATP_LIB_PS_RUN_TRACKER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "atp/time.h"
#include "lib/protocol/join_message.h"

namespace atp::ps {

enum class RebuildMode : uint8_t {
  kFreshPs,  // forward only: slots the PS already holds at or past the target stay
  kNewRun,   // every slot not already at its target is reset to it
  kResync,   // forward only, as kFreshPs: the synchronized run joined again
};

struct RebuildDecision {
  RebuildMode mode = RebuildMode::kFreshPs;
  uint64_t lowest = 0;   // the lowest unacknowledged position over the workers
  uint64_t highest = 0;  // the highest one
  // joins[w]: worker w's join that completed the decision (where its stream
  // stands and which results it holds: lib/ps/recovery_plan.h).
  std::vector<protocol::JoinBody> joins;
};

class RunTracker {
 public:
  // kJoinLifetime: how long a join counts toward a decision.
  static constexpr TimeDelta kJoinLifetime = TimeDelta::FromSeconds(1);

  RunTracker(int workers, uint32_t served_queues);

  // OnJoin: worker `worker`'s join for served queue index `queue_index`
  // (queue / shard_count), received at `now`. A decision when the queue must
  // be rebuilt: every worker has joined since the last one, each at most
  // kJoinLifetime before `now`, and their incarnations are all new, all the
  // synchronized ones, or make a redo (kNewRun; the header).
  std::optional<RebuildDecision> OnJoin(uint32_t queue_index, int worker, uint64_t incarnation,
                                        const protocol::JoinBody& join, TimePoint now = {});

  // SynchronizedWith: the last decision on served queue `queue_index` was
  // made with `worker` as `incarnation`.
  bool SynchronizedWith(uint32_t queue_index, int worker, uint64_t incarnation) const;

  // Joined: `worker`'s latest join on served queue `queue_index` is of
  // `incarnation` (it belongs to the run the PS last heard from).
  bool Joined(uint32_t queue_index, int worker, uint64_t incarnation) const;

  // OnOtherIncarnation: `worker` sent a control frame other than a join
  // (a kOpBegin) as `incarnation` on served queue `queue_index`. Once the
  // queue had a decision, an incarnation that is neither the synchronized
  // one nor that of the worker's latest join is a run whose join is lost or
  // still on its way: it counts as that worker's latest (Unsynchronized),
  // without a join to decide with. True when it did. Before the queue's
  // first decision it changes nothing, but the incarnation is remembered as
  // seen (a redo never lets it in once that decision is taken).
  bool OnOtherIncarnation(uint32_t queue_index, int worker, uint64_t incarnation);

  // Unsynchronized: served queue `queue_index` had a decision, and some
  // worker's latest join since (or kOpBegin: OnOtherIncarnation) names
  // another incarnation than the one that decision was made with: a new run
  // is joining (until every worker has), or a worker restarted alone. What
  // the PS holds of the queue is then another run's, as seen by that worker.
  bool Unsynchronized(uint32_t queue_index) const;

 private:
  // IncarnationFilter: a set of incarnations as a 256-bit Bloom filter with
  // two probes. MayContain is true for every incarnation Add was given since
  // the last Clear, and may be true for others (about 1 in 270 after 8
  // given, 1 in 10 after 50).
  class IncarnationFilter {
   public:
    void Add(uint64_t incarnation);
    bool MayContain(uint64_t incarnation) const;
    void Merge(const IncarnationFilter& other);
    void Clear() { bits_ = {}; }

   private:
    std::array<uint64_t, 4> bits_{};
  };
  struct Join {
    uint64_t incarnation = 0;
    protocol::JoinBody body;
    bool fresh = false;    // joined since the last decision
    TimePoint at;          // when
    uint64_t arrival = 0;  // QueueState::arrivals when it came
  };
  struct QueueState {
    std::vector<uint64_t> synced;  // per worker: 0 = none
    // superseded[w]: what synced[w] was before the last run decision that
    // changed it (0 = none): a process replaced since, whose late join must
    // not make a new run (exact: no Bloom filter on that path).
    std::vector<uint64_t> superseded;
    std::vector<Join> joins;  // per worker
    // seen_before_run[w]: every incarnation worker w was seen as (a join or
    // a kOpBegin) up to the last run decision (kFreshPs or kNewRun, redos
    // included: the decisions that may change `synced`), the ones decided
    // with included. Never let into a redo.
    std::vector<IncarnationFilter> seen_before_run;
    // replaced_since_run[w]: the incarnations worker w was seen as since
    // then other than its latest (replaced by another's join or kOpBegin;
    // before the first decision, also one seen by a kOpBegin only): part of
    // seen_before_run from the next run decision on.
    std::vector<IncarnationFilter> replaced_since_run;
    bool any_synced = false;
    uint64_t arrivals = 0;  // joins, and kOpBegins that changed a latest, so far
    // others: how many workers' latest incarnation is not the synchronized
    // one (Unsynchronized once any_synced).
    size_t others = 0;
    // held_since: the arrival that made `others` non-zero, 0 while it is 0.
    // Nothing completes on a held-back queue after it (the PS takes no
    // gradient): a stayer's join that came later tells where its worker
    // stays until a decision.
    uint64_t held_since = 0;
  };
  // SetLatest: worker w's latest is now `latest` (a join, or a kOpBegin's
  // incarnation without one); an incarnation it replaces is remembered.
  static void SetLatest(QueueState& q, size_t w, const Join& latest);
  // MayRedo: q's fresh joins mix synchronized and other incarnations, and
  // may decide a new run again (run_tracker.cc).
  static bool MayRedo(const QueueState& q);
  std::vector<QueueState> queues_;
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_RUN_TRACKER_H_
