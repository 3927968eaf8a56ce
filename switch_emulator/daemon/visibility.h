// switch_emulator/daemon/visibility.h: atp-switchd's stats as Prometheus
// metrics, and the "is it aggregating?" line (docs/observability.md).
//
//   MetricsServer::Start(options, [&] { return SwitchdMetrics(daemon->Stats()); });
//   std::fprintf(stderr, "%s\n", AggregationLine(now, &previous).c_str());
#ifndef ATP_SWITCH_EMULATOR_DAEMON_VISIBILITY_H_
#define ATP_SWITCH_EMULATOR_DAEMON_VISIBILITY_H_

#include <string>
#include <vector>

#include "atp/metrics.h"
#include "switch_emulator/daemon/stats.h"

namespace atp::switchd {

// SwitchdMetrics: every counter of the stats JSON: per port
// atp_switch_frames_total{port,direction}, atp_switch_rx_malformed_total,
// atp_switch_rx_refused_total{port,reason},
// atp_switch_tx_copies_total, atp_switch_tx_dropped_total{reason},
// atp_switch_tx_held_frames, atp_switch_transport_<counter>_total; the
// pipeline's atp_switch_<counter>_total (atp_switch_aggregated_total, ...),
// atp_switch_malformed_total{reason}; per job of the pipeline's table
// atp_switch_job_completed_total{job}, atp_switch_job_to_ps_total{job,reason}
// and atp_switch_job_orphaned_total{job}; atp_switch_aggregators_in_use,
// atp_switch_aggregators; atp_switch_routing_<counter>_total;
// atp_switch_poll_rounds_total, atp_switch_uptime_seconds.
std::vector<Metric> SwitchdMetrics(const SwitchdStats& stats);

// AggregationLine: what became of the gradient frames since `before` (all
// of them when null): aggregated in this switch, and the reasons for the
// rest; a first line for all jobs together, then one line per job of the
// pipeline's table (complete aggregates among the frames sent on, and the
// reasons for the others). Lines are separated by '\n', no trailing one.
std::string AggregationLine(const SwitchdStats& now, const SwitchdStats* before);

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_DAEMON_VISIBILITY_H_
