// sim/collectives/schedule.cc: see schedule.h.
#include "sim/collectives/schedule.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "atp/skip_reduce.h"

namespace atp::sim {
namespace {

int Log2(int nodes) { return std::countr_zero(static_cast<unsigned>(nodes)); }

uint64_t TotalBytes(const std::vector<CollectiveStep>& steps) {
  // Per node on the busiest node's path: the steps' largest transfer.
  uint64_t total = 0;
  for (const CollectiveStep& step : steps) {
    uint64_t largest = 0;
    for (const Transfer& t : step.transfers) largest = std::max(largest, t.bytes);
    total += largest;
  }
  return total;
}

void BuildRing(const SkipPlan& plan, CollectiveSchedule& s) {
  const int n = s.nodes;
  auto slice_bytes = [&](int slice) {
    const ElementRange r = SliceRange(s.tensor_bytes, n, slice);
    return static_cast<uint64_t>(r.size);
  };
  for (int step = 0; step < n - 1; ++step) {
    if (!plan.ReduceScatterStepRuns(step)) continue;
    CollectiveStep cs{.reduce = true, .transfers = {}};
    for (int r = 0; r < n; ++r) {
      cs.transfers.push_back(
          {r, (r + 1) % n, slice_bytes(plan.ReduceScatterSendSlice(r, step))});
    }
    s.steps.push_back(std::move(cs));
  }
  for (int step = 0; step < n - 1; ++step) {
    CollectiveStep cs{.reduce = false, .transfers = {}};
    for (int r = 0; r < n; ++r) {
      cs.transfers.push_back({r, (r + 1) % n, slice_bytes(plan.AllGatherSendSlice(r, step))});
    }
    s.steps.push_back(std::move(cs));
  }
}

void BuildHalvingDoubling(CollectiveSchedule& s) {
  const int n = s.nodes;
  const int levels = Log2(n);
  for (int i = 0; i < levels; ++i) {  // distance n/2, n/4, .., 1; bytes S/2 .. S/N
    if (i < s.skipped_steps) continue;
    CollectiveStep cs{.reduce = true, .transfers = {}};
    const int distance = n >> (i + 1);
    for (int r = 0; r < n; ++r) cs.transfers.push_back({r, r ^ distance, s.tensor_bytes >> (i + 1)});
    s.steps.push_back(std::move(cs));
  }
  for (int i = levels - 1; i >= 0; --i) {  // the mirror image
    CollectiveStep cs{.reduce = false, .transfers = {}};
    const int distance = n >> (i + 1);
    for (int r = 0; r < n; ++r) cs.transfers.push_back({r, r ^ distance, s.tensor_bytes >> (i + 1)});
    s.steps.push_back(std::move(cs));
  }
}

void BuildTree(CollectiveSchedule& s) {
  const int n = s.nodes;
  const int levels = Log2(n);
  for (int i = 1; i <= levels; ++i) {  // level i: odd multiples of 2^(i-1) send up
    if (i <= s.skipped_steps) continue;
    CollectiveStep cs{.reduce = true, .transfers = {}};
    const int half = 1 << (i - 1);
    for (int r = half; r < n; r += 2 * half) cs.transfers.push_back({r, r - half, s.tensor_bytes});
    s.steps.push_back(std::move(cs));
  }
  for (int i = levels; i >= 1; --i) {  // broadcast back down
    CollectiveStep cs{.reduce = false, .transfers = {}};
    const int half = 1 << (i - 1);
    for (int r = half; r < n; r += 2 * half) cs.transfers.push_back({r - half, r, s.tensor_bytes});
    s.steps.push_back(std::move(cs));
  }
}

}  // namespace

std::string_view LogicalTopologyName(LogicalTopology topology) {
  switch (topology) {
    case LogicalTopology::kRing:
      return "ring";
    case LogicalTopology::kHalvingDoubling:
      return "halving-doubling";
    case LogicalTopology::kTree:
      return "tree";
  }
  return "?";
}

int ReduceSteps(LogicalTopology topology, int nodes) {
  return topology == LogicalTopology::kRing ? nodes - 1 : Log2(nodes);
}

absl::StatusOr<CollectiveSchedule> BuildSchedule(LogicalTopology topology, int nodes,
                                                 uint64_t tensor_bytes, int skipped) {
  const std::string name(LogicalTopologyName(topology));
  if (nodes < 2) return absl::InvalidArgumentError(absl::StrCat(name, ": ", nodes, " nodes"));
  if (topology != LogicalTopology::kRing && !std::has_single_bit(static_cast<unsigned>(nodes))) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", nodes, " nodes is not a power of two"));
  }
  if (tensor_bytes < static_cast<uint64_t>(nodes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": a tensor of ", tensor_bytes, " bytes on ", nodes, " nodes"));
  }
  const int reduce_steps = ReduceSteps(topology, nodes);
  if (skipped < 0 || skipped > reduce_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", skipped, " skipped steps outside 0..", reduce_steps));
  }
  CollectiveSchedule s;
  s.topology = topology;
  s.nodes = nodes;
  s.tensor_bytes = tensor_bytes;
  s.reduce_steps = reduce_steps;
  s.skipped_steps = skipped;
  if (topology == LogicalTopology::kRing) {
    SkipOptions options;
    options.mode = skipped > 0 ? SkipMode::kStatic : SkipMode::kNone;
    options.reduce_scatter_steps = skipped;
    absl::StatusOr<SkipPlan> plan = SkipPlan::Create(options, nodes);
    if (!plan.ok()) return plan.status();
    s.skipped_fraction = plan->SkippedFraction();
    BuildRing(*plan, s);
  } else {
    s.skipped_fraction = 1.0 - std::ldexp(1.0, -skipped);
    if (topology == LogicalTopology::kHalvingDoubling) {
      BuildHalvingDoubling(s);
    } else {
      BuildTree(s);
    }
  }
  absl::StatusOr<CollectiveSchedule> full =
      skipped == 0 ? absl::StatusOr<CollectiveSchedule>(s)
                   : BuildSchedule(topology, nodes, tensor_bytes, 0);
  if (!full.ok()) return full.status();
  s.theory_speedup = static_cast<double>(TotalBytes(full->steps)) /
                     static_cast<double>(TotalBytes(s.steps));
  return s;
}

}  // namespace atp::sim
