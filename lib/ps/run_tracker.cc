#include "lib/ps/run_tracker.h"

#include <algorithm>

namespace atp::ps {

RunTracker::RunTracker(int workers, uint32_t served_queues) : queues_(served_queues) {
  for (QueueState& q : queues_) {
    q.synced.assign(static_cast<size_t>(workers), 0);
    q.joins.assign(static_cast<size_t>(workers), Join{});
  }
}

std::optional<RebuildDecision> RunTracker::OnJoin(uint32_t queue_index, int worker,
                                                  uint64_t incarnation,
                                                  const protocol::JoinBody& join, TimePoint now) {
  if (queue_index >= queues_.size()) return std::nullopt;
  QueueState& q = queues_[queue_index];
  if (worker < 0 || static_cast<size_t>(worker) >= q.joins.size()) return std::nullopt;
  q.joins[static_cast<size_t>(worker)] = Join{incarnation, join, true, now};
  bool all_new = true;
  bool all_synced = true;
  for (size_t w = 0; w < q.joins.size(); ++w) {
    // Wait for everyone, each recently: an older join may be of a process
    // gone since (it will not answer the PS's next join request).
    if (!q.joins[w].fresh || now - q.joins[w].at > kJoinLifetime) return std::nullopt;
    all_new &= q.joins[w].incarnation != q.synced[w];
    all_synced &= q.joins[w].incarnation == q.synced[w];
  }
  // Everyone joined: decide, and start over.
  for (Join& j : q.joins) j.fresh = false;
  if (!all_new && !all_synced) return std::nullopt;
  RebuildDecision decision;
  decision.mode = all_synced     ? RebuildMode::kResync
                  : q.any_synced ? RebuildMode::kNewRun
                                 : RebuildMode::kFreshPs;
  decision.lowest = q.joins[0].body.lowest_unacked;
  decision.highest = decision.lowest;
  decision.joins.reserve(q.joins.size());
  for (size_t w = 0; w < q.joins.size(); ++w) {
    const protocol::JoinBody& body = q.joins[w].body;
    decision.lowest = std::min(decision.lowest, body.lowest_unacked);
    decision.highest = std::max(decision.highest, body.lowest_unacked);
    decision.joins.push_back(body);
    q.synced[w] = q.joins[w].incarnation;
  }
  q.any_synced = true;
  return decision;
}

bool RunTracker::Joined(uint32_t queue_index, int worker, uint64_t incarnation) const {
  if (queue_index >= queues_.size()) return false;
  const QueueState& q = queues_[queue_index];
  if (worker < 0 || static_cast<size_t>(worker) >= q.joins.size()) return false;
  return q.joins[static_cast<size_t>(worker)].incarnation == incarnation;
}

bool RunTracker::SynchronizedWith(uint32_t queue_index, int worker, uint64_t incarnation) const {
  if (queue_index >= queues_.size()) return false;
  const QueueState& q = queues_[queue_index];
  if (worker < 0 || static_cast<size_t>(worker) >= q.synced.size()) return false;
  return q.synced[static_cast<size_t>(worker)] == incarnation;
}

bool RunTracker::OnOtherIncarnation(uint32_t queue_index, int worker, uint64_t incarnation) {
  if (queue_index >= queues_.size()) return false;
  QueueState& q = queues_[queue_index];
  if (!q.any_synced || worker < 0 || static_cast<size_t>(worker) >= q.joins.size()) return false;
  Join& latest = q.joins[static_cast<size_t>(worker)];
  if (incarnation == q.synced[static_cast<size_t>(worker)] || incarnation == latest.incarnation) {
    return false;
  }
  // No body to decide with: the worker's join (asked for) brings one.
  latest = Join{incarnation, protocol::JoinBody{}, /*fresh=*/false, TimePoint{}};
  return true;
}

bool RunTracker::Unsynchronized(uint32_t queue_index) const {
  if (queue_index >= queues_.size()) return false;
  const QueueState& q = queues_[queue_index];
  if (!q.any_synced) return false;
  for (size_t w = 0; w < q.joins.size(); ++w) {
    if (q.joins[w].incarnation != q.synced[w]) return true;
  }
  return false;
}

}  // namespace atp::ps
