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
//   RunTracker tracker(/*workers=*/4, /*served_queues=*/16);
//   if (auto d = tracker.OnJoin(q, worker, incarnation, join, now)) Rebuild(*d);
//
// Memory: one join (192 bytes) per worker and served queue, allocated
// at construction.
#ifndef ATP_LIB_PS_RUN_TRACKER_H_
#define ATP_LIB_PS_RUN_TRACKER_H_

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
  // kJoinLifetime before `now`.
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
  // without a join to decide with. True when it did.
  bool OnOtherIncarnation(uint32_t queue_index, int worker, uint64_t incarnation);

  // Unsynchronized: served queue `queue_index` had a decision, and some
  // worker's latest join since (or kOpBegin: OnOtherIncarnation) names
  // another incarnation than the one that decision was made with: a new run is joining (until every worker has),
  // or a worker restarted alone. What the PS holds of the queue is then
  // another run's, as seen by that worker.
  bool Unsynchronized(uint32_t queue_index) const;

 private:
  struct Join {
    uint64_t incarnation = 0;
    protocol::JoinBody body;
    bool fresh = false;  // joined since the last decision
    TimePoint at;        // when
  };
  struct QueueState {
    std::vector<uint64_t> synced;  // per worker: 0 = none
    std::vector<Join> joins;       // per worker
    bool any_synced = false;
  };
  std::vector<QueueState> queues_;
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_RUN_TRACKER_H_
