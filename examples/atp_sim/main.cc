// atp-sim: runs one simulated ATP experiment and reports it (see --help).
#include <chrono>
#include <ctime>
#include <cstdio>
#include <string>

#include "examples/atp_sim/command_line.h"
#include "examples/atp_sim/options.h"
#include "examples/atp_sim/report.h"
#include "examples/atp_sim/scenarios.h"
#include "lib/sim/experiment.h"

int main(int argc, char** argv) {
  using atp::sim_tool::kExitUsage;
  atp::sim_tool::ParseCommandLineOrExit(argc, argv);
  absl::StatusOr<atp::sim_tool::Options> options = atp::sim_tool::OptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "atp-sim: %s (see atp-sim --help)\n",
                 std::string(options.status().message()).c_str());
    return kExitUsage;
  }
  if (!options->scenario.empty()) {
    absl::StatusOr<atp::sim_tool::ScenarioTable> table = atp::sim_tool::RunScenario(
        options->scenario, options->scale, options->experiment.seed);
    if (!table.ok()) {
      std::fprintf(stderr, "atp-sim: %s\n", std::string(table.status().message()).c_str());
      return kExitUsage;
    }
    const std::string text = options->format == atp::sim_tool::OutputFormat::kJson
                                 ? atp::sim_tool::FormatScenarioJson(*table)
                                 : atp::sim_tool::FormatScenarioText(*table);
    std::fputs(text.c_str(), stdout);
    return table->exact ? 0 : 1;
  }
  auto experiment = atp::sim::Experiment::Create(options->experiment);
  if (!experiment.ok()) {
    std::fprintf(stderr, "atp-sim: %s\n", std::string(experiment.status().message()).c_str());
    return kExitUsage;
  }
  // The wall clock is read here, outside the simulation, only to report speed.
  // CPU time is reported too: on a shared machine the wall clock also counts
  // time other processes held the core.
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  const atp::sim::ExperimentResult result = (*experiment)->Run();
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double frames = static_cast<double>(result.frame_deliveries);
  const atp::sim_tool::Performance performance{
      .wall_seconds = wall,
      .cpu_seconds = cpu,
      .frames_per_wall_second = wall > 0 ? frames / wall : 0.0,
      .frames_per_cpu_second = cpu > 0 ? frames / cpu : 0.0};
  const std::string text =
      options->format == atp::sim_tool::OutputFormat::kJson
          ? atp::sim_tool::FormatJson(options->experiment, result, performance)
          : atp::sim_tool::FormatTable(options->experiment, result, performance);
  std::fputs(text.c_str(), stdout);
  return result.exact ? 0 : 1;
}
