// examples/atp_sim/scenario_table.h: what a named scenario (scenarios.h)
// reports: a titled table, the paper's number beside it, and whether every
// run in it was exact; printed as text or as one JSON object.
#ifndef ATP_EXAMPLES_ATP_SIM_SCENARIO_TABLE_H_
#define ATP_EXAMPLES_ATP_SIM_SCENARIO_TABLE_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace atp::sim_tool {

// Cell: one value of a row; doubles print with `precision` decimals in text.
using Cell = std::variant<std::string, int64_t, double>;

struct ScenarioTable {
  std::string name;                // the --scenario name
  std::string title;               // one line: what was run
  std::string paper;               // the paper's claim for this experiment
  std::string finding;             // the simulation's answer to that claim, one line
  std::vector<std::string> notes;  // how to read the columns
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;  // each as long as columns
  int precision = 2;
  bool exact = true;    // every run completed and every result was exact
  int runs = 0;         // experiments run
  uint64_t frames = 0;  // frame deliveries over all runs
  double wall_seconds = 0.0;
};

std::string FormatScenarioText(const ScenarioTable& table);
// FormatScenarioJson: {"scenario", "title", "paper", "finding", "rows": [{column: value}],
// "runs", "frames_delivered", "wall_seconds", "exact"}.
std::string FormatScenarioJson(const ScenarioTable& table);

}  // namespace atp::sim_tool

#endif  // ATP_EXAMPLES_ATP_SIM_SCENARIO_TABLE_H_
