// lib/ps/recovery_plan.h: what a queue rebuilt from the workers' joins needs
// besides their resends (docs/protocol.md "Failures, runs and restarts").
//
// A worker resends every fragment it has no result of, and never one it has.
// So for each position t of the rebuilt window [lowest, lowest + slots):
//   - no worker has t's result: every worker resends it; the slot waits for t;
//   - every worker has it: nobody needs it; the slot waits for t + slots;
//   - some have it, others wait for it (a parameter packet of the dead PS
//     reached some workers only): the slot waits for t, and a worker that
//     has the packet replays it (kReplay), so that the others get the very
//     values the first ones got. The designated worker is the one with the
//     highest lowest unacknowledged position among those that have it (it
//     covers the longest run of positions, so the requests are few); a
//     position only some join cannot describe (beyond its kJoinAckedBits)
//     is asked of any worker that has it.
//
//   RecoveryPlan plan = PlanRecovery(decision, slots);
//   engine.RebuildQueue(job, queue, decision.lowest, decision.mode, plan.acked_by_all);
//   for (const ReplayRange& r : plan.replays) SendReplayRequest(r);
#ifndef ATP_LIB_PS_RECOVERY_PLAN_H_
#define ATP_LIB_PS_RECOVERY_PLAN_H_

#include <cstdint>
#include <vector>

#include "lib/ps/run_tracker.h"

namespace atp::ps {

// ReplayRange: positions [first, end) that `worker` (a global index; -1: any
// worker that has them) replays.
struct ReplayRange {
  uint64_t first = 0;
  uint64_t end = 0;
  int worker = -1;

  bool Contains(uint64_t position) const { return position >= first && position < end; }
  bool operator==(const ReplayRange&) const = default;
};

struct RecoveryPlan {
  // acked_by_all: positions of the window every worker has the result of,
  // ascending.
  std::vector<uint64_t> acked_by_all;
  // replays: positions some workers have the results of and others wait for,
  // ascending and disjoint.
  std::vector<ReplayRange> replays;
};

// PlanRecovery: the plan for `decision` (its joins) and a window of `slots`.
RecoveryPlan PlanRecovery(const RebuildDecision& decision, uint32_t slots);

}  // namespace atp::ps

#endif  // ATP_LIB_PS_RECOVERY_PLAN_H_
