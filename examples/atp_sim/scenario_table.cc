#include "examples/atp_sim/scenario_table.h"

#include <algorithm>
#include <cstddef>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace atp::sim_tool {
namespace {

std::string Text(const Cell& cell, int precision) {
  if (const auto* s = std::get_if<std::string>(&cell)) return *s;
  if (const auto* i = std::get_if<int64_t>(&cell)) return absl::StrCat(*i);
  return absl::StrFormat("%.*f", precision, std::get<double>(cell));
}

}  // namespace

std::string FormatScenarioText(const ScenarioTable& table) {
  std::string out = absl::StrCat("scenario ", table.name, ": ", table.title, "\n");
  for (const std::string& note : table.notes) absl::StrAppend(&out, "  ", note, "\n");
  absl::StrAppend(&out, "\n");
  std::vector<size_t> width(table.columns.size());
  for (size_t c = 0; c < table.columns.size(); ++c) width[c] = table.columns[c].size();
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], Text(row[c], table.precision).size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      absl::StrAppendFormat(&text, "%s%*s", c == 0 ? "" : "  ", static_cast<int>(width[c]),
                            cells[c]);
    }
    return text + "\n";
  };
  absl::StrAppend(&out, line(table.columns));
  for (const auto& row : table.rows) {
    std::vector<std::string> cells;
    for (const Cell& cell : row) cells.push_back(Text(cell, table.precision));
    absl::StrAppend(&out, line(cells));
  }
  absl::StrAppend(&out, "\npaper:      ", table.paper, "\n");
  absl::StrAppend(&out, "simulation: ", table.finding, "\n");
  absl::StrAppendFormat(&out, "%s: %d runs, %u frames over links, %.2f s of wall time\n",
                        table.exact ? "EXACT" : "NOT EXACT", table.runs, table.frames,
                        table.wall_seconds);
  return out;
}

std::string FormatScenarioJson(const ScenarioTable& table) {
  using nlohmann::json;
  json rows = json::array();
  for (const auto& row : table.rows) {
    json object = json::object();
    for (size_t c = 0; c < row.size() && c < table.columns.size(); ++c) {
      std::visit([&](const auto& value) { object[table.columns[c]] = value; }, row[c]);
    }
    rows.push_back(std::move(object));
  }
  json j = {
      {"scenario", table.name},
      {"title", table.title},
      {"paper", table.paper},
      {"finding", table.finding},
      {"notes", table.notes},
      {"rows", rows},
      {"runs", table.runs},
      {"frames_delivered", table.frames},
      {"wall_seconds", table.wall_seconds},
      {"exact", table.exact},
  };
  return j.dump(2) + "\n";
}

}  // namespace atp::sim_tool
