// lib/worker/fragment_skip.h: which fragments of one piece of an operation
// SkipReduce leaves out on ATP (the whole-fragment variant of
// docs/skipreduce.md, "SkipReduce on in-network aggregation").
//
// An operation of F fragments is cut into N slices (SliceRange(F, N, j), N =
// the job's workers) and the plan drops k of them (SkipPlan::SliceDropped).
// Every worker computes the same plan from the same SkipOptions, so every
// worker leaves out the same fragments: they take no queue position (the
// positions of the others stay dense, ATP-SPEC section 3), nothing is sent
// for them, the switches and the PS never see them, and their result is zero.
// The PS needs no knowledge of the skipping at all.
//
//   FragmentSkip skip{.plan = plan, .op_fragments = F, .first_fragment = piece_first};
//   if (skip.Dropped(i)) { /* fragment i of the piece: not sent, zero */ }
#ifndef ATP_LIB_WORKER_FRAGMENT_SKIP_H_
#define ATP_LIB_WORKER_FRAGMENT_SKIP_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "atp/skip_reduce.h"

namespace atp::worker {

struct FragmentSkip {
  // plan: none (the default) skips nothing.
  std::optional<SkipPlan> plan;
  // op_fragments: F, the fragments of the whole operation (not the piece).
  uint64_t op_fragments = 0;
  // first_fragment: the piece's first fragment, counted in the operation.
  uint64_t first_fragment = 0;

  // Dropped: fragment `fragment` of the piece (0-based) is left out.
  bool Dropped(uint64_t fragment) const {
    if (!plan.has_value() || plan->skipped_reduce_scatter_steps() == 0) return false;
    return plan->SliceDropped(SliceOf(static_cast<size_t>(op_fragments), plan->ranks(),
                                      static_cast<size_t>(first_fragment + fragment)));
  }
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_FRAGMENT_SKIP_H_
