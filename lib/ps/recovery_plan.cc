#include "lib/ps/recovery_plan.h"

#include <algorithm>
#include <optional>

namespace atp::ps {

RecoveryPlan PlanRecovery(const RebuildDecision& decision, uint32_t slots) {
  RecoveryPlan plan;
  const size_t workers = decision.joins.size();
  // Past every worker's lowest unacknowledged position and acked_end, no
  // worker has any result.
  uint64_t any_end = decision.lowest;
  for (const protocol::JoinBody& join : decision.joins) {
    any_end = std::max({any_end, join.lowest_unacked, join.acked_end});
  }
  const uint64_t end = std::min<uint64_t>(any_end, decision.lowest + slots);
  for (uint64_t t = decision.lowest; t < end; ++t) {
    size_t have = 0;
    bool unknown = false;
    int best = -1;  // the worker with the result and the highest lowest unacknowledged
    for (size_t w = 0; w < workers; ++w) {
      const std::optional<bool> result = decision.joins[w].HasResult(t);
      if (!result.has_value()) {
        unknown = true;
      } else if (*result) {
        ++have;
        if (best < 0 || decision.joins[w].lowest_unacked >
                            decision.joins[static_cast<size_t>(best)].lowest_unacked) {
          best = static_cast<int>(w);
        }
      }
    }
    if (have == workers) {
      plan.acked_by_all.push_back(t);
      continue;
    }
    if (have == 0 && !unknown) continue;
    const int designee = have > 0 ? best : -1;
    if (!plan.replays.empty() && plan.replays.back().end == t &&
        plan.replays.back().worker == designee) {
      plan.replays.back().end = t + 1;
    } else {
      plan.replays.push_back(ReplayRange{t, t + 1, designee});
    }
  }
  return plan;
}

}  // namespace atp::ps
