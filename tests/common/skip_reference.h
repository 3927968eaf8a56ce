// tests/common/skip_reference.h: SkipReduce's whole-fragment variant on ATP
// (OpOptions::skip), written from its definition for tests to compare with,
// independently of SkipPlan::SliceDropped and SliceOf: an operation's F
// fragments are cut into N slices, the first F mod N one fragment longer;
// slices (shift + i) mod N, i < k, are dropped; the shift is 0 (static) or
// the agreed RandomShift(seed, iteration, tensor) (random). And the
// contribution variant: every fragment of slice j sums every worker but
// (j - shift + i) mod N, i < k (the ring's rule), workers numbered rack-major.
#ifndef ATP_TESTS_COMMON_SKIP_REFERENCE_H_
#define ATP_TESTS_COMMON_SKIP_REFERENCE_H_

#include <cstdint>
#include <set>
#include <vector>

#include "atp/skip_reduce.h"

namespace atp::testing {

inline std::set<uint64_t> ReferenceDroppedFragments(uint64_t fragments, int n,
                                                    const SkipOptions& skip) {
  std::set<uint64_t> dropped;
  if (skip.mode == SkipMode::kNone || skip.variant == SkipVariant::kContributions) return dropped;
  const int shift =
      skip.mode == SkipMode::kRandom ? RandomShift(skip.seed, skip.iteration, skip.tensor, n) : 0;
  std::set<int> dropped_slices;
  for (int i = 0; i < skip.reduce_scatter_steps; ++i) dropped_slices.insert((shift + i) % n);
  uint64_t next = 0;
  for (int slice = 0; slice < n; ++slice) {
    const uint64_t length =
        fragments / static_cast<uint64_t>(n) +
        (static_cast<uint64_t>(slice) < fragments % static_cast<uint64_t>(n) ? 1 : 0);
    if (dropped_slices.contains(slice)) {
      for (uint64_t f = next; f < next + length; ++f) dropped.insert(f);
    }
    next += length;
  }
  return dropped;
}

// ReferenceContributors: for each of the operation's `fragments` fragments,
// the workers (0..n-1) whose contribution it sums under the contribution
// variant.
inline std::vector<std::set<int>> ReferenceContributors(uint64_t fragments, int n,
                                                        const SkipOptions& skip) {
  const int k = skip.mode == SkipMode::kNone ? 0 : skip.reduce_scatter_steps;
  const int shift =
      skip.mode == SkipMode::kRandom ? RandomShift(skip.seed, skip.iteration, skip.tensor, n) : 0;
  std::vector<std::set<int>> contributors;
  for (int slice = 0; slice < n; ++slice) {
    std::set<int> skipped;
    for (int i = 0; i < k; ++i) skipped.insert(((slice - shift + i) % n + n) % n);
    std::set<int> in;
    for (int w = 0; w < n; ++w) {
      if (!skipped.contains(w)) in.insert(w);
    }
    const uint64_t length =
        fragments / static_cast<uint64_t>(n) +
        (static_cast<uint64_t>(slice) < fragments % static_cast<uint64_t>(n) ? 1 : 0);
    for (uint64_t f = 0; f < length; ++f) contributors.push_back(in);
  }
  return contributors;
}

}  // namespace atp::testing

#endif  // ATP_TESTS_COMMON_SKIP_REFERENCE_H_
