// sim/collectives/schedule.h: allreduce over three logical topologies
// (ring, halving-doubling, tree) as lists of steps of point-to-point
// transfers, with SkipReduce's skipping of the first k reduce steps, and
// what skipping leaves out of the result (the seed's section 6.1).
//
// Pure: no simulator. collective_run.h plays a schedule on simulated links.
//
//   ATP_ASSIGN_OR_RETURN(CollectiveSchedule s,
//                        BuildSchedule(LogicalTopology::kRing, 16, 1 << 20, /*skipped=*/2));
//   s.skipped_fraction;  // 2/16 of the contributions
//
// Skipping, per topology (N nodes, L = log2 N):
// - ring: N-1 reduce-scatter + N-1 all-gather steps of S/N bytes each;
//   skipping k reduce-scatter steps (atp/skip_reduce.h's SkipPlan) drops k/N
//   of the contributions and k of 2(N-1) equal steps: both linear in k.
// - halving-doubling (Rabenseifner): L reduce-scatter steps exchanging S/2,
//   S/4, .., S/N with the partner at distance N/2, N/4, .., 1, then L
//   all-gather steps back. Skipping the first k keeps each node's half
//   without the partner's contribution: 1 - 2^-k of the contributions are
//   dropped, and S(1 - 2^-k) of 2S(1 - 1/N) bytes are saved: both
//   logarithmic in k, alike.
// - tree (binomial): L reduce steps, each sending the whole tensor from the
//   nodes at odd multiples of 2^i to their parents, then L broadcast steps.
//   Skipping the first k levels drops 1 - 2^-k of the contributions but
//   saves only k of 2L equal steps: the two do not match.
#ifndef ATP_SIM_COLLECTIVES_SCHEDULE_H_
#define ATP_SIM_COLLECTIVES_SCHEDULE_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace atp::sim {

enum class LogicalTopology : uint8_t { kRing, kHalvingDoubling, kTree };

std::string_view LogicalTopologyName(LogicalTopology topology);

struct Transfer {
  int source = 0;
  int destination = 0;
  uint64_t bytes = 0;
};

// CollectiveStep: transfers that may run at once; a node starts its part of
// step i+1 when it has received everything step i sends it.
struct CollectiveStep {
  bool reduce = false;  // a reduce(-scatter) step (else all-gather / broadcast)
  std::vector<Transfer> transfers;
};

struct CollectiveSchedule {
  LogicalTopology topology = LogicalTopology::kRing;
  int nodes = 0;
  uint64_t tensor_bytes = 0;
  int reduce_steps = 0;   // reduce steps of the full algorithm
  int skipped_steps = 0;  // the first skipped_steps reduce steps do not run
  // skipped_fraction: contributions left out of every result (0..1).
  double skipped_fraction = 0.0;
  // theory_speedup: full algorithm's bandwidth time / this schedule's, with
  // every byte costing the same and latency ignored.
  double theory_speedup = 1.0;
  std::vector<CollectiveStep> steps;  // the steps that run
};

// ReduceSteps: the reduce steps of `topology` on `nodes` nodes (N-1 for the
// ring, log2 N otherwise).
int ReduceSteps(LogicalTopology topology, int nodes);

// BuildSchedule: InvalidArgument unless nodes >= 2 (a power of two for
// halving-doubling and tree), tensor_bytes >= nodes and 0 <= skipped <=
// ReduceSteps.
absl::StatusOr<CollectiveSchedule> BuildSchedule(LogicalTopology topology, int nodes,
                                                 uint64_t tensor_bytes, int skipped);

}  // namespace atp::sim

#endif  // ATP_SIM_COLLECTIVES_SCHEDULE_H_
