// examples/atp_sim/skip_scenarios.h: atp-sim's SkipReduce scenario (issue
// 11): allreduce over logical ring, halving-doubling and tree topologies with
// k reduce steps skipped, beside ATP on the same links (the seed's section
// 6.1, figure 16).
#ifndef ATP_EXAMPLES_ATP_SIM_SKIP_SCENARIOS_H_
#define ATP_EXAMPLES_ATP_SIM_SKIP_SCENARIOS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "examples/atp_sim/scenario_table.h"
#include "examples/atp_sim/scenarios.h"

namespace atp::sim_tool {

// SkipTopologies: kFull: 256 nodes, a 1 MiB tensor; kSmall: 16 nodes,
// 256 KiB. Rows: per topology and skipped steps, the fraction of the
// gradient skipped and the simulated and theoretical speedups; then ATP.
absl::StatusOr<ScenarioTable> SkipTopologies(Scale scale, uint64_t seed);

}  // namespace atp::sim_tool

#endif  // ATP_EXAMPLES_ATP_SIM_SKIP_SCENARIOS_H_
