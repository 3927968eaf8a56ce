#include "lib/ps/run_tracker.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <bit>
#include <cstdint>

#include "lib/ps/incarnation_mix.h"

namespace atp::ps {

namespace {

// Probes: the two bits (of an IncarnationFilter's kBits) that stand for
// `incarnation`: two bytes of its mix.
constexpr uint64_t kBits = 256;
std::array<uint64_t, 2> Probes(uint64_t incarnation) {
  static_assert(std::has_single_bit(kBits) && kBits <= 256);  // a byte each, masked
  const uint64_t x = MixIncarnation(incarnation);
  return {x & (kBits - 1), (x >> 8) & (kBits - 1)};
}

}  // namespace

RunTracker::RunTracker(int workers, uint32_t served_queues) : queues_(served_queues) {
  for (QueueState& q : queues_) {
    q.synced.assign(static_cast<size_t>(workers), 0);
    q.superseded.assign(static_cast<size_t>(workers), 0);
    q.joins.assign(static_cast<size_t>(workers), Join{});
    q.seen_before_run.assign(static_cast<size_t>(workers), IncarnationFilter{});
    q.replaced_since_run.assign(static_cast<size_t>(workers), IncarnationFilter{});
  }
}

// The redo: why a new run's decision may be taken again, and by which joins.
//
// The window. Worker A of a running job (A1, B1 synchronized) restarts
// alone as A2: its join makes the queue Unsynchronized, and A2 dies. Within
// kJoinLifetime of A2's join a whole new run starts (A3, B3). If B3's join
// comes while A2's is still fresh and young, {A2, B3} are all new and decide
// kNewRun with A2; A3's join then mixes A3 with the synchronized B3, which
// is a worker restarted alone by the rules, and the new run stays held back
// for good. At that decision nothing tells A2 from A3 (the first of a new
// run to join looks like a lone restart until the others come), so the
// decision is taken and redone afterwards.
//
// The rule (MayRedo). When every worker has a fresh join (made since the
// last decision, within kJoinLifetime) and the set mixes synchronized
// incarnations ("stayers", B3) and others ("newcomers", A3), it is decided
// again as kNewRun if
//   (a) no join of the set has a result (lowest_unacked and acked_end are 0),
//       and every stayer's join came while the queue was held back (after
//       the arrival that made it Unsynchronized, without a break since):
//       from that arrival on the PS takes no gradient on the queue, so
//       nothing of the synchronized run completes after it, and a stayer's
//       later join tells where it stays. The run never moved, so deciding
//       again loses nothing the PS completed for it, and every newcomer
//       joins at the start of the streams, as a new run's worker does. A
//       run that moved keeps the old rule: a newcomer is a worker restarted
//       alone. A fresh join at 0 from before the hold proves nothing: the
//       run that made it at its start may have done its whole work since
//       (a new run's first join beside it would decide that run again, with
//       its worker's scale: a false mismatch);
//   (b) no newcomer's incarnation was seen at its worker (a join, or a
//       kOpBegin through OnOtherIncarnation) up to the last run decision
//       (kFreshPs, kNewRun or a redo: the decisions that set `synced`; a
//       kResync only confirms them). This covers every incarnation that
//       ever was part of a decision and every one the PS saw before it: a
//       late join of the run before the decision, or of the dead A2 after
//       a redo replaced it, is never let in. Such a join is no redo's, and
//       a redo with it would, for one, check the new run's scale against the
//       old run's worker and fail the new run as a mismatch. An incarnation
//       older than the decision that the PS never saw (a lone restart whose
//       every frame was lost, its join delayed past the decision) is not
//       covered: it passes as a newcomer;
//   (c) the joins agree on io_threads and scale, so that the redo's new-run
//       check (PsShard::CheckNewRun) never fails the job: a stayer may be
//       a worker that died since (its last join late, beside the next
//       run's first), and the next run may have changed its configuration.
// The newcomers' joins are fresh, so newer than the decision; the stayers'
// are newer than the hold, later still.
//
// The interleavings, with A1, B1 synchronized and D the decision with A2:
//   - A3 joins before B3: A3 replaces A2 as A's latest, and {A3, B3} is a new
//     run at once. No redo.
//   - A3 joins after B3 (the window): D = kNewRun {A2, B3}. The queue is
//     synchronized with them until A3's join (or kOpBegin) comes, then held
//     back, and the PS asks for joins (held-back gradients and kOpBegins,
//     at most every 20 ms); B3's answer (after A3's join) and A3's join,
//     both at 0, make the redo {A3, B3}.
//   - The dead A2 never joins again: it need not; the redo is made with the
//     fresh joins only, and A2's is no longer fresh after D.
//   - The PS asks for joins between D and A3's join: B3 answers alone, and
//     nothing is decided (A's latest is A2's, not fresh). A3's join then
//     completes a set, but B3's answer came before the hold: nothing yet,
//     and the next request's answers make the redo.
//   - A late join of B1 (the run before D) after D: B1 was seen before D,
//     so it is no newcomer for a redo; the queue is held back until B3
//     answers the next join request ({A?, B3}: kResync, or the redo). Also
//     when B1's join is at 0 (its first, delayed), where (a) alone would let
//     it in: this is the reverted first attempt's flaw (a scale mismatch
//     named against the previous run's worker). If it comes after A3's
//     join, {A3, B1} are all new, which would decide a new run with B1 (and
//     check A3's scale against it): B1 is B's superseded incarnation (D
//     replaced it), so nothing is decided, and B3's answer makes the redo.
//     The same holds for the late join of a run's worker while the next run
//     joins, redo or not.
//   - A late join of A2 after D and before A3's: A2 is D's, so a stayer; with
//     B3's fresh join it makes a kResync, which changes nothing (both at 0)
//     and keeps D the last run decision: A3 is still welcome later.
//   - A late join of A2 after A3's: it replaces A3 as A's latest (A3 goes to
//     replaced_since_run, not to seen_before_run) and ends the hold; {A2, B3}
//     resync. A3's next kOpBegin or join is still a newcomer unseen before D
//     and holds the queue back again; with B3's answer after it, the redo.
//   - A late join of A2 after the redo: A2 was part of D, barred; the queue
//     is held back until A3 answers the next join request (kResync).
//   - The PS asks for joins after the redo (a waiting report, a gradient
//     outside the window): {A3, B3} are the synchronized run, a kResync.
//   - The new run moved before A3's join reached the PS (a gradient of index
//     A, from A2 late or from A3 ahead of its join, completed a position
//     with B3's): B3's answer has a result, so no redo, and the queue stays
//     held back (the job fails on its stall timeout, as before the redo).
//     A result that completed then and reached B3 only after its answer was
//     sent is not in that answer: it is the case of docs/protocol.md
//     "Results that arrive after a join" (the slot waits for B3, which
//     never resends it; a waiting report, a kResync, and a replay from B3).
//   - Several workers restarted alone and died (A2, C2), then a new run:
//     the redo waits for every newcomer (A3 and C3) and is one decision.
//   - A worker of a rightly decided run restarts alone before anything of
//     the run completed (A2 of {A2, B2} dies at 0, A3 joins beside B2 at
//     0): redone as a new run too. Nothing was lost, A3's streams start where
//     B2's stand, and the kOpBegin ledger starts over as for any new run
//     (the workers declare their pieces again).
//   - kFreshPs: a restarted PS took its first decision with A2; the redo is
//     made as kNewRun (no worker in it has a result the PS must keep).
//   - A run {A2, B2} at 0 ends and the next starts: B3 joins first (held),
//     then A2's last join comes (its answer to the PS's request, sent as it
//     shut down): {A2, B3} mix a stayer and a newcomer, after the hold, at
//     0. With one configuration it is redone with A2 (nothing can complete
//     without A2's gradients), and A3's join later makes the redo {A3, B3}.
//     With another (the new run changed scale or io_threads), (c) refuses
//     it: held back until A3's join and B3's answer to the PS's next
//     request, all new: a new run.
//   - A3's kOpBegin before the first decision of a fresh PS, after A2's
//     join ({A2, B3} decided kFreshPs): A3 counts as seen before that
//     decision, so no redo takes it; held back (as before redos existed).
// A newcomer the filter holds by chance (a false positive) is refused: the
// queue stays held back, as it did before redos existed; never the reverse.
// The all-new path keeps only one superseded incarnation per worker, exact
// (a false positive there would stall a new run for good, and a run of 1,024
// workers would meet one): a set made only of late joins of runs replaced
// two or more run decisions ago (each within kJoinLifetime) still makes a
// new run of its own, as before, and the run it replaced then makes none
// (its incarnations are the superseded ones): held back, it fails on its
// stall timeout.
std::optional<RebuildDecision> RunTracker::OnJoin(uint32_t queue_index, int worker,
                                                  uint64_t incarnation,
                                                  const protocol::JoinBody& join, TimePoint now) {
  if (queue_index >= queues_.size()) return std::nullopt;
  QueueState& q = queues_[queue_index];
  if (worker < 0 || static_cast<size_t>(worker) >= q.joins.size()) return std::nullopt;
  SetLatest(q, static_cast<size_t>(worker), Join{incarnation, join, true, now});
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
  if (!all_new && !all_synced && !MayRedo(q)) return std::nullopt;
  if (all_new && q.any_synced) {
    // No new run with the late join of a process a run decision replaced
    // (the run before the one the PS serves): it is gone.
    for (size_t w = 0; w < q.joins.size(); ++w) {
      if (q.joins[w].incarnation == q.superseded[w]) return std::nullopt;
    }
  }
  RebuildDecision decision;
  // A redo (mixed, MayRedo) is a new run's decision: q.any_synced holds.
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
    if (decision.mode != RebuildMode::kResync) {
      // A run decision: everything seen so far is older than it.
      if (q.synced[w] != 0 && q.synced[w] != q.joins[w].incarnation) {
        q.superseded[w] = q.synced[w];
      }
      q.seen_before_run[w].Merge(q.replaced_since_run[w]);
      q.seen_before_run[w].Add(q.joins[w].incarnation);
      q.replaced_since_run[w].Clear();
    }
    q.synced[w] = q.joins[w].incarnation;
  }
  q.any_synced = true;
  q.others = 0;
  q.held_since = 0;
  return decision;
}

bool RunTracker::MayRedo(const QueueState& q) {
  const protocol::JoinBody& first = q.joins[0].body;
  for (size_t w = 0; w < q.joins.size(); ++w) {
    const Join& join = q.joins[w];
    // (c): one configuration (what PsShard::CheckNewRun holds a new run's
    // workers to): a redo never fails the job.
    if (join.body.io_threads != first.io_threads ||
        std::bit_cast<uint64_t>(join.body.scale) != std::bit_cast<uint64_t>(first.scale)) {
      return false;
    }
    // (a): no result anywhere, and each stayer's answer from the hold.
    if (join.body.lowest_unacked != 0 || join.body.acked_end != 0) return false;
    if (join.incarnation == q.synced[w]) {
      if (join.arrival <= q.held_since) return false;
    } else if (q.seen_before_run[w].MayContain(join.incarnation)) {
      return false;  // (b)
    }
  }
  return true;
}

void RunTracker::SetLatest(QueueState& q, size_t w, const Join& latest) {
  Join& slot = q.joins[w];
  if (slot.incarnation != 0 && slot.incarnation != latest.incarnation) {
    q.replaced_since_run[w].Add(slot.incarnation);
  }
  const bool was_other = slot.incarnation != q.synced[w];
  const bool is_other = latest.incarnation != q.synced[w];
  slot = latest;
  slot.arrival = ++q.arrivals;
  if (is_other && !was_other) ++q.others;
  if (was_other && !is_other) --q.others;
  if (q.others == 0) {
    q.held_since = 0;
  } else if (q.held_since == 0) {
    q.held_since = slot.arrival;
  }
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
  if (worker < 0 || static_cast<size_t>(worker) >= q.joins.size()) return false;
  const auto w = static_cast<size_t>(worker);
  Join& latest = q.joins[w];
  if (!q.any_synced) {
    // Seen before the first decision: never a redo's newcomer after it.
    if (incarnation != latest.incarnation) q.replaced_since_run[w].Add(incarnation);
    return false;
  }
  if (incarnation == q.synced[w] || incarnation == latest.incarnation) return false;
  // No body to decide with: the worker's join (asked for) brings one.
  SetLatest(q, w, Join{incarnation, protocol::JoinBody{}, /*fresh=*/false, TimePoint{}});
  return true;
}

bool RunTracker::Unsynchronized(uint32_t queue_index) const {
  if (queue_index >= queues_.size()) return false;
  const QueueState& q = queues_[queue_index];
  return q.any_synced && q.others > 0;
}

void RunTracker::IncarnationFilter::Add(uint64_t incarnation) {
  static_assert(sizeof(bits_) * 8 == kBits);
  for (const uint64_t bit : Probes(incarnation)) bits_[bit / 64] |= uint64_t{1} << (bit % 64);
}

bool RunTracker::IncarnationFilter::MayContain(uint64_t incarnation) const {
  for (const uint64_t bit : Probes(incarnation)) {
    if ((bits_[bit / 64] & (uint64_t{1} << (bit % 64))) == 0) return false;
  }
  return true;
}

void RunTracker::IncarnationFilter::Merge(const IncarnationFilter& other) {
  for (size_t i = 0; i < bits_.size(); ++i) bits_[i] |= other.bits_[i];
}

}  // namespace atp::ps
