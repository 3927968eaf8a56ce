// switch_emulator/host/switch_host_stats.h: what a switch host counts, per
// port and per reason (atp-switchd exports it as its stats JSON,
// switch_emulator/daemon/stats.h).
#ifndef ATP_SWITCH_EMULATOR_HOST_SWITCH_HOST_STATS_H_
#define ATP_SWITCH_EMULATOR_HOST_SWITCH_HOST_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "atp/transport.h"
#include "switch_emulator/pipeline/pipeline_config.h"

namespace atp::switchd {

// PortCounters: what the daemon did with one port's frames.
struct PortCounters {
  uint64_t rx_frames = 0;                // frames received (RxBurst)
  uint64_t rx_malformed = 0;             // ... that the pipeline refused as malformed
  // ... refused at this ingress port (IngressAdmission, docs/security.md):
  uint64_t rx_refused_parameter_port = 0;  // parameter packets of a job whose PS is not behind it
  uint64_t rx_refused_gradient_port = 0;   // gradients of a job whose workers are not behind it
  uint64_t tx_frames = 0;                // frames the port took (TxBurst), copies included
  uint64_t tx_copies = 0;                // multicast copies made for this port
  uint64_t tx_dropped_backpressure = 0;  // the port refused them after every retry
  uint64_t tx_dropped_no_buffer = 0;     // no buffer for a multicast copy

  uint64_t tx_dropped() const { return tx_dropped_backpressure + tx_dropped_no_buffer; }
  uint64_t rx_refused() const { return rx_refused_parameter_port + rx_refused_gradient_port; }
};

// RoutingCounters: frames that went nowhere, and why.
struct RoutingCounters {
  uint64_t unroutable = 0;          // unicast: no route, or not IPv4
  uint64_t no_multicast_ports = 0;  // multicast: unknown group, or its only port is the ingress
  uint64_t hairpin = 0;             // unicast: the route points back out of the ingress port
  uint64_t multicast = 0;           // frames replicated to a group (each counted once)
  uint64_t ce_marked = 0;           // forwarded frames (jobs not aggregated here) marked CE
};

struct PortStats {
  std::string name;
  std::string backend;  // the transport's ("dpdk", "kernel_udp", "loopback")
  uint32_t queues = 0;
  PortCounters counters;
  transport::QueueStats transport;  // summed over the port's queues
  uint64_t tx_held = 0;             // frames its queues still held at the last flush
};

// JobStats: one job of the pipeline's table and what became of its gradients.
struct JobStats {
  uint8_t job = 0;
  switch_emulator::PipelineJobCounters counters;
};

struct SwitchdStats {
  std::string name;
  double uptime_s = 0;
  std::vector<PortStats> ports;
  switch_emulator::PipelineCounters pipeline;
  std::vector<JobStats> jobs;  // the pipeline's jobs, in configuration order
  uint64_t aggregators_in_use = 0;
  uint64_t aggregators = 0;
  RoutingCounters routing;
  uint64_t poll_rounds = 0;
};

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_HOST_SWITCH_HOST_STATS_H_
