// switch_emulator/daemon/stats.h: what atp-switchd counts, per port and per
// reason, and how it is exported (the stats JSON of docs/switchd.md, and a
// one-line summary for logs).
//
//   SwitchdStats s = daemon->Stats();
//   ATP_RETURN_IF_ERROR(WriteStatsJson("/tmp/tor0.json", s));   // atomic (rename)
//   std::fprintf(stderr, "%s\n", SummaryLine(s, &previous).c_str());
#ifndef ATP_SWITCH_EMULATOR_DAEMON_STATS_H_
#define ATP_SWITCH_EMULATOR_DAEMON_STATS_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "switch_emulator/host/switch_host_stats.h"

namespace atp::switchd {

// ToJson: the stats JSON: {"name", "uptime_s", "ports": [{"name",
// "rx_frames", "tx_frames", "rx_bad_frames", "tx_dropped", ...}], "pipeline":
// {every PipelineCounters field, "malformed_by_reason": {name: n}},
// "aggregators_in_use", "routing": {"unroutable", "no_multicast_ports", ...}}.
nlohmann::json ToJson(const SwitchdStats& stats);

// WriteStatsJson: writes ToJson(stats) to `path` atomically (a temporary file
// beside it, then rename), so a reader never sees half a file.
absl::Status WriteStatsJson(const std::string& path, const SwitchdStats& stats);

// SummaryLine: one line for the log: totals and, given the previous
// snapshot, rates since then.
std::string SummaryLine(const SwitchdStats& now, const SwitchdStats* before);

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_DAEMON_STATS_H_
