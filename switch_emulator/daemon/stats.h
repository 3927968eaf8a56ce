// switch_emulator/daemon/stats.h: what atp-switchd counts, per port and per
// reason, and how it is exported (the stats JSON of docs/switchd.md, and a
// one-line summary for logs).
//
//   SwitchdStats s = daemon->Stats();
//   ATP_RETURN_IF_ERROR(WriteStatsJson("/tmp/tor0.json", s));   // atomic (rename)
//   std::fprintf(stderr, "%s\n", SummaryLine(s, &previous).c_str());
#ifndef ATP_SWITCH_EMULATOR_DAEMON_STATS_H_
#define ATP_SWITCH_EMULATOR_DAEMON_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "atp/transport.h"
#include "nlohmann/json.hpp"
#include "switch_emulator/pipeline/pipeline_config.h"

namespace atp::switchd {

// PortCounters: what the daemon did with one port's frames.
struct PortCounters {
  uint64_t rx_frames = 0;                // frames received (RxBurst)
  uint64_t rx_malformed = 0;             // ... that the pipeline refused as malformed
  uint64_t tx_frames = 0;                // frames the port took (TxBurst), copies included
  uint64_t tx_copies = 0;                // multicast copies made for this port
  uint64_t tx_dropped_backpressure = 0;  // the port refused them after every retry
  uint64_t tx_dropped_no_buffer = 0;     // no buffer for a multicast copy

  uint64_t tx_dropped() const { return tx_dropped_backpressure + tx_dropped_no_buffer; }
};

// RoutingCounters: frames that went nowhere, and why.
struct RoutingCounters {
  uint64_t unroutable = 0;          // unicast: no route, or not IPv4
  uint64_t no_multicast_ports = 0;  // multicast: unknown group, or its only port is the ingress
  uint64_t hairpin = 0;             // unicast: the route points back out of the ingress port
  uint64_t multicast = 0;           // frames replicated to a group (each counted once)
};

struct PortStats {
  std::string name;
  std::string backend;  // the transport's ("dpdk", "kernel_udp", "loopback")
  uint32_t queues = 0;
  PortCounters counters;
  transport::QueueStats transport;  // summed over the port's queues
  uint64_t tx_held = 0;             // frames its queues still held at the last flush
};

struct SwitchdStats {
  std::string name;
  double uptime_s = 0;
  std::vector<PortStats> ports;
  switch_emulator::PipelineCounters pipeline;
  uint64_t aggregators_in_use = 0;
  uint64_t aggregators = 0;
  RoutingCounters routing;
  uint64_t poll_rounds = 0;
};

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
