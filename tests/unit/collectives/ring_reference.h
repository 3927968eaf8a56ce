// tests/unit/collectives/ring_reference.h: an independent reference for
// SkipReduce on a ring: it runs the seed's Algorithm 2 literally on sets of
// contributor ranks (each rank's slices start as {rank}; a reduce-scatter
// step unions what arrives into the receiver's slice, an all-gather step
// replaces it), with the slice indices shifted as random SkipReduce says.
// Tests compare SkipPlan's closed forms and the real ring's numbers with it.
#ifndef ATP_TESTS_UNIT_COLLECTIVES_RING_REFERENCE_H_
#define ATP_TESTS_UNIT_COLLECTIVES_RING_REFERENCE_H_

#include <set>
#include <vector>

namespace atp::ring_reference {

// RingOutcome: contributors[rank][slice], the ranks whose values rank `rank`
// holds summed in slice `slice` at the end (empty: the slice is zero there).
struct RingOutcome {
  std::vector<std::vector<std::set<int>>> contributors;
};

inline int ModN(int value, int n) { return ((value % n) + n) % n; }

// SimulateRing: N ranks, k reduce-scatter steps skipped (the first k), g
// all-gather steps skipped (the last g), slice indices shifted by `shift`.
inline RingOutcome SimulateRing(int n, int k, int g, int shift) {
  std::vector<std::vector<std::set<int>>> held(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    held[r].assign(static_cast<size_t>(n), std::set<int>{r});
  }
  // Reduce-scatter: every rank sends at once, then every rank reduces.
  for (int s = k; s <= n - 2; ++s) {
    std::vector<std::set<int>> in_flight(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) in_flight[ModN(r + 1, n)] = held[r][ModN(r - s + shift, n)];
    for (int r = 0; r < n; ++r) {
      std::set<int>& slice = held[r][ModN(r - s - 1 + shift, n)];
      slice.insert(in_flight[r].begin(), in_flight[r].end());
    }
  }
  // What each rank owns now; everything else is stale until all-gather.
  std::vector<std::vector<bool>> fresh(static_cast<size_t>(n), std::vector<bool>(n, false));
  for (int r = 0; r < n; ++r) fresh[r][ModN(r + 1 + shift, n)] = true;
  for (int t = 0; t < n - 1 - g; ++t) {
    std::vector<std::set<int>> in_flight(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) in_flight[ModN(r + 1, n)] = held[r][ModN(r + 1 + shift - t, n)];
    for (int r = 0; r < n; ++r) {
      const int slice = ModN(r + shift - t, n);
      held[r][slice] = in_flight[r];
      fresh[r][slice] = true;
    }
  }
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < n; ++j) {
      if (!fresh[r][j]) held[r][j].clear();
    }
  }
  return RingOutcome{std::move(held)};
}

}  // namespace atp::ring_reference

#endif  // ATP_TESTS_UNIT_COLLECTIVES_RING_REFERENCE_H_
