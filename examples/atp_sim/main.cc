// atp-sim: runs one simulated ATP experiment and reports it (see --help).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <ctime>
#include <cstdio>
#include <string>

#include "examples/atp_sim/options.h"
#include "examples/atp_sim/report.h"
#include "examples/atp_sim/scenarios.h"
#include "examples/atp_sim/visibility.h"
#include "sim/experiment.h"
#include "lib/tool/command_line.h"

namespace {

constexpr char kUsage[] =
    "atp-sim: simulates ATP in-network aggregation (workers, PS and ATP switches running the\n"
    "real libatp engines on a deterministic discrete-event network) and checks that every\n"
    "result is exact.\n"
    "\n"
    "usage: atp-sim [--flag=value ...]\n"
    "       atp-sim --scenario=NAME [--scale=full|small] [--seed=S] [--json]\n"
    "  e.g. atp-sim --workers=4 --racks=2 --loss=0.001 --tensor_mb=4 --iterations=3\n"
    "       atp-sim --scenario=loss-sweep --scale=small\n"
    "\n"
    "Flags may also be written with dashes (--tensor-mb) and as '--flag value'.\n"
    "Exit status: 0 every result exact; 1 a result was wrong or a job did not finish;\n"
    "2 bad command line.\n";

// Usage: kUsage and the scenarios, for --help.
std::string Usage() {
  std::string usage = std::string(kUsage) + "\nscenarios (--scenario=NAME):\n";
  for (const atp::sim_tool::ScenarioInfo& info : atp::sim_tool::Scenarios()) {
    std::string name(info.name);
    name.resize(std::max<size_t>(name.size(), 20), ' ');
    usage += "  " + name + " " + std::string(info.summary) + "\n";
  }
  return usage;
}

}  // namespace

int main(int argc, char** argv) {
  constexpr int kExitUsage = atp::tool::kExitBadUsage;
  atp::tool::ParseCommandLineOrExit(argc, argv, "atp-sim", {"examples/atp_sim/"}, Usage());
  absl::StatusOr<atp::sim_tool::Options> options = atp::sim_tool::OptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "atp-sim: %s (see atp-sim --help)\n",
                 std::string(options.status().message()).c_str());
    return kExitUsage;
  }
  absl::StatusOr<atp::sim_tool::VisibilityOptions> visibility_options =
      atp::sim_tool::VisibilityOptionsFromFlags();
  if (!visibility_options.ok()) {
    std::fprintf(stderr, "atp-sim: %s\n", std::string(visibility_options.status().message()).c_str());
    return kExitUsage;
  }
  if (!visibility_options->pcap.empty() || !visibility_options->plot.empty()) {
    // Captures and plots read links and switches of both halves as the run
    // goes: one thread.
    if (options->partitions_chosen && options->experiment.topology.partitions == 2) {
      std::fprintf(stderr, "atp-sim: --partitions=2 does not go with --pcap or --plot\n");
      return kExitUsage;
    }
    options->experiment.topology.partitions = 1;
  }
  if (!options->scenario.empty() && !visibility_options->pcap.empty()) {
    std::fprintf(stderr, "atp-sim: --pcap records one experiment, not a --scenario\n");
    return kExitUsage;
  }
  if (!options->scenario.empty()) {
    absl::StatusOr<atp::sim_tool::ScenarioTable> table = atp::sim_tool::RunScenario(
        options->scenario, options->scale, options->experiment.seed,
        options->experiment.topology.ps_model);
    if (!table.ok()) {
      std::fprintf(stderr, "atp-sim: %s\n", std::string(table.status().message()).c_str());
      return kExitUsage;
    }
    const std::string text = options->format == atp::sim_tool::OutputFormat::kJson
                                 ? atp::sim_tool::FormatScenarioJson(*table)
                                 : atp::sim_tool::FormatScenarioText(*table);
    std::fputs(text.c_str(), stdout);
    if (!visibility_options->plot.empty()) {
      if (absl::Status s = atp::sim_tool::PlotScenarioTable(*table, *visibility_options); !s.ok()) {
        std::fprintf(stderr, "atp-sim: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
    return table->exact ? 0 : 1;
  }
  auto experiment = atp::sim::Experiment::Create(options->experiment);
  if (!experiment.ok()) {
    std::fprintf(stderr, "atp-sim: %s\n", std::string(experiment.status().message()).c_str());
    return kExitUsage;
  }
  atp::sim_tool::SimVisibility visibility(*std::move(visibility_options));
  if (absl::Status s = visibility.Attach(**experiment); !s.ok()) {
    std::fprintf(stderr, "atp-sim: %s\n", std::string(s.message()).c_str());
    return kExitUsage;
  }
  // The wall clock is read here, outside the simulation, only to report speed.
  // CPU time is reported too: on a shared machine the wall clock also counts
  // time other processes held the core.
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  const atp::sim::ExperimentResult result = (*experiment)->Run();
  if (absl::Status s = visibility.Finish(); !s.ok()) {
    std::fprintf(stderr, "atp-sim: %s\n", std::string(s.message()).c_str());
    return 1;
  }
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
