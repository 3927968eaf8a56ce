// examples/atp_sim/scenarios.h: atp-sim's named scenarios (--scenario NAME):
// the paper's experiments (ATP, NSDI'21, section 6), each a set of simulated
// runs summed up in one table beside the paper's number.
//
//   ATP_ASSIGN_OR_RETURN(ScenarioTable table, RunScenario("loss-sweep", Scale::kSmall, 1));
//   std::fputs(FormatScenarioText(table).c_str(), stdout);
#ifndef ATP_EXAMPLES_ATP_SIM_SCENARIOS_H_
#define ATP_EXAMPLES_ATP_SIM_SCENARIOS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "examples/atp_sim/scenario_table.h"
#include "sim/topology.h"

namespace atp::sim_tool {

// Scale: kFull, the sizes bench/results/simulator.md reports (seconds of
// wall time each); kSmall, the same experiment on smaller tensors (what ctest
// runs: well under a second or two each).
enum class Scale : uint8_t { kSmall, kFull };

struct ScenarioInfo {
  std::string_view name;
  std::string_view summary;
};

// Scenarios: every named scenario, in --help order.
std::span<const ScenarioInfo> Scenarios();

// ScenarioNames: "a, b, c" (for --help and error messages).
std::string ScenarioNames();

// RunScenario: NotFoundError for an unknown name; InvalidArgumentError if a
// run could not be built. `seed` seeds every run's workload and filters;
// `ps` is every run's PS model (ignored by skip-topologies, which has no PS).
absl::StatusOr<ScenarioTable> RunScenario(std::string_view name, Scale scale, uint64_t seed,
                                          const sim::PsModel& ps = {});

}  // namespace atp::sim_tool

#endif  // ATP_EXAMPLES_ATP_SIM_SCENARIOS_H_
