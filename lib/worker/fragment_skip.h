// lib/worker/fragment_skip.h: what SkipReduce leaves out of one piece of an
// operation on ATP (docs/skipreduce.md, "SkipReduce on in-network
// aggregation"), in either variant of SkipOptions::variant.
//
// An operation of F fragments is cut into N slices (SliceRange(F, N, j), N =
// the job's workers). Every worker computes the same plan from the same
// SkipOptions, so all agree without talking:
//
// - kWholeFragments: the plan drops k of the slices (SkipPlan::SliceDropped).
//   Every worker leaves out the same fragments: they take no queue position
//   (the positions of the others stay dense, ATP-SPEC section 3), nothing is
//   sent for them, the switches and the PS never see them, and their result
//   is zero. The PS needs no knowledge of the skipping at all.
// - kContributions: every fragment takes its position and is aggregated, but
//   only the N - k workers SkipPlan::ContributionIncluded names for its slice
//   send it (the ring's rule: slice j lacks workers j - shift .. j - shift +
//   k - 1). A contributor's header declares the fragment's contributor set
//   (SliceRole): fanIn0 = its rack's contributors, bitmap0 = its index among
//   them, fanIn1 = the racks with a contributor, bitmap1 = its rack's index
//   among those; the switches aggregate it unchanged and the PS completes on
//   the declared set. A non-contributor sends nothing, waits for the
//   parameter packet like any worker, and asks for a lost one with a kPull
//   control frame (lib/wire/control_message.h) instead of a resend. Except
//   for liveness: after leaving out kMaxSkippedGenerations consecutive
//   generations of a window slot a worker sends the next one as a keep-alive
//   contribution of zeros, declared like any contribution (keep_alive_runs.h,
//   lib/protocol/skipped_generations.h); the results are unchanged.
//
//   FragmentSkip skip{.plan = plan, .op_fragments = F, .first_fragment = piece_first};
//   if (skip.Dropped(i)) { /* fragment i of the piece: not sent, zero */ }
//   std::vector<SliceRole> roles = skip.Roles(shape, rack, worker_in_rack);
#ifndef ATP_LIB_WORKER_FRAGMENT_SKIP_H_
#define ATP_LIB_WORKER_FRAGMENT_SKIP_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "atp/skip_reduce.h"
#include "lib/protocol/job_shape.h"

namespace atp::worker {

// SliceRole: one worker's part in the fragments of one slice under
// kContributions, and the header fields it sends them with.
struct SliceRole {
  bool contributes = true;
  uint8_t fan_in0 = 0;   // contributors in this worker's rack
  uint32_t bitmap0 = 0;  // 1 << this worker's index among them
  uint8_t fan_in1 = 0;   // racks with at least one contributor
  uint32_t bitmap1 = 0;  // 1 << this rack's index among those
};

// DeclaredRole: the role of worker (rack, worker_in_rack) of `shape` in a
// fragment that the workers `sends` names send (int worker -> bool, workers
// numbered rack-major, as the ring's ranks and the PS's rows).
template <typename Sends>
SliceRole DeclaredRole(const protocol::JobShape& shape, int rack, int worker_in_rack,
                       const Sends& sends) {
  SliceRole role;
  int first = 0;  // the first worker of rack r, rack-major
  int racks_before = 0;
  int racks_contributing = 0;
  for (int r = 0; r < shape.racks(); ++r) {
    int contributors = 0;
    for (int w = 0; w < shape.workers_in_rack(r); ++w) {
      if (!sends(first + w)) continue;
      if (r == rack && w < worker_in_rack) ++role.fan_in0;  // index among them, for now
      ++contributors;
    }
    if (r == rack) {
      role.contributes = sends(first + worker_in_rack);
      role.bitmap0 = uint32_t{1} << role.fan_in0;
      role.fan_in0 = static_cast<uint8_t>(contributors);
      racks_before = racks_contributing;
    }
    if (contributors > 0) ++racks_contributing;
    first += shape.workers_in_rack(r);
  }
  role.fan_in1 = static_cast<uint8_t>(racks_contributing);
  role.bitmap1 = uint32_t{1} << racks_before;
  return role;
}

struct FragmentSkip {
  // plan: none (the default) skips nothing.
  std::optional<SkipPlan> plan;
  // op_fragments: F, the fragments of the whole operation (not the piece).
  uint64_t op_fragments = 0;
  // first_fragment: the piece's first fragment, counted in the operation.
  uint64_t first_fragment = 0;

  bool Skips() const { return plan.has_value() && plan->skipped_reduce_scatter_steps() > 0; }
  bool SkipsContributions() const {
    return Skips() && plan->variant() == SkipVariant::kContributions;
  }

  // Slice: the slice of fragment `fragment` of the piece (0-based).
  int Slice(uint64_t fragment) const {
    return SliceOf(static_cast<size_t>(op_fragments), plan->ranks(),
                   static_cast<size_t>(first_fragment + fragment));
  }

  // Dropped: fragment `fragment` of the piece (0-based) is left out whole
  // (kWholeFragments only).
  bool Dropped(uint64_t fragment) const {
    if (!Skips() || SkipsContributions()) return false;
    return plan->SliceDropped(Slice(fragment));
  }

  // Roles: kContributions only: the role of worker (rack, worker_in_rack) of
  // `shape` in every slice, indexed by slice (plan->ranks() entries; the
  // shape's total workers must equal plan->ranks()). Workers are numbered
  // rack-major, as the ring's ranks and the PS's rows.
  std::vector<SliceRole> Roles(const protocol::JobShape& shape, int rack,
                               int worker_in_rack) const {
    std::vector<SliceRole> roles(static_cast<size_t>(plan->ranks()));
    for (int slice = 0; slice < plan->ranks(); ++slice) {
      roles[static_cast<size_t>(slice)] =
          DeclaredRole(shape, rack, worker_in_rack,
                       [&](int worker) { return plan->ContributionIncluded(slice, worker); });
    }
    return roles;
  }
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_FRAGMENT_SKIP_H_
