// sim/topology.h: describing and building a simulated ATP network.
//
// Worker racks 0..R-1 each have a ToR running the real switch pipeline. With
// one worker rack the PS hosts sit under the same ToR; with several, they get
// a rack of their own (rack R) and every ToR hangs off one forwarding-only
// core switch. For each job the ToRs of its worker racks aggregate at level 1
// and the PS's ToR at level 2 (two-level aggregation), unless
// TopologyConfig::aggregation says otherwise. Each job has its own PS host;
// its parameter packets go to multicast group = job id.
//
//   TopologyConfig config;
//   config.worker_racks = 2;
//   config.jobs.push_back(JobPlacement{.job = 1, .workers_per_rack = {2, 2}});
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<Network> net, BuildNetwork(config));
#ifndef ATP_SIM_TOPOLOGY_H_
#define ATP_SIM_TOPOLOGY_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "sim/link.h"
#include "sim/network.h"
#include "lib/worker/worker_queue_config.h"
#include "switch_emulator/pipeline/job_table.h"

namespace atp::sim {

// AggregationMode: which switches aggregate.
enum class AggregationMode : uint8_t {
  kTwoLevel,  // worker ToRs at level 1, the PS's ToR at level 2
  kRackOnly,  // worker ToRs only: the PS receives one frame per rack
  kNone,      // every switch forwards only: the PS does all the work
};

// PsPlacement: where the PS hosts go.
enum class PsPlacement : uint8_t {
  kAuto,         // one worker rack: under its ToR; several: a rack of their own
  kOwnRack,      // always a rack of their own (behind the core)
  kWorkerRack0,  // under worker rack 0's ToR (which is then also level 2)
};

struct SwitchSettings {
  // Aggregators per switch (each ToR has its own array).
  size_t aggregators = 4096;
  TimeDelta orphan_timeout = TimeDelta::FromMilliseconds(10);
  // A frame is ECN-marked when its egress queue holds more frames than this.
  uint32_t ecn_threshold = 64;
  // kStatic: each job a switch aggregates gets an equal slice of its array.
  switch_emulator::PartitionMode partition = switch_emulator::PartitionMode::kDynamic;
  uint32_t orphan_scan_per_packet = 1;
};

// JobPlacement: one job and how many of its workers each worker rack holds.
struct JobPlacement {
  uint8_t job = 1;                     // 1..255, distinct
  std::vector<int> workers_per_rack;   // one entry per worker rack; 0 = none there (0..32)
  TimePoint start_time;                // when its workers start (used by Experiment)
};

// PsModel: what a parameter server host costs, so that falling back to it
// (collisions, overflow, no aggregation) is not free. The defaults model a
// free PS: its link as fast as every host's, no processing time.
struct PsModel {
  // link_bps: the PS's link (its NIC, both directions), bits per second;
  // 0: host_link's bandwidth.
  double link_bps = 0;
  // packet_service: time the PS host spends on each frame it receives, one
  // at a time (a single core's decode, sum and bookkeeping); frames wait in
  // arrival order while it is busy. Zero: free.
  TimeDelta packet_service = TimeDelta::Zero();
};

struct TopologyConfig {
  int worker_racks = 1;  // 1..32
  std::vector<JobPlacement> jobs;
  PsPlacement ps_placement = PsPlacement::kAuto;
  AggregationMode aggregation = AggregationMode::kTwoLevel;
  // Host <-> ToR links (both directions; the host side's queue is its NIC).
  // 8192 frames is 2.7 MB per port, what a switch with a shared buffer of
  // tens of MB gives one congested port: enough to absorb the first window
  // of a 32-rack incast (see DISABLED_TimeoutResendsDoNotCollapseUnderIncast
  // for what happens with less).
  LinkConfig host_link{.bandwidth_bps = 100e9,
                       .propagation_delay = TimeDelta::FromMicroseconds(1),
                       .queue_capacity_packets = 8192};
  // ToR <-> core links.
  LinkConfig fabric_link{.bandwidth_bps = 100e9,
                         .propagation_delay = TimeDelta::FromMicroseconds(1),
                         .queue_capacity_packets = 8192};
  SwitchSettings switches;
  PsModel ps_model;
  // ps_orphan_timeout: every PS engine's PsConfig::orphan_timeout (partial
  // state untouched this long is released); zero: twice worker.max_rto, so
  // that a live worker's resends (at least one per 1.25 x max_rto, timer
  // jitter included) keep its state.
  TimeDelta ps_orphan_timeout;
  // worker: every worker queue engine's configuration; shape, rack,
  // worker_in_rack and queue are filled in per engine.
  worker::WorkerQueueConfig worker;
  uint32_t queues = 1;  // per worker, 1..16
  uint16_t base_port = wire::kDefaultBasePort;
  // partitions: 1, or 2 to simulate the network on two threads (network.h):
  // the first half of the worker racks (rounded up) and the core in one,
  // the other racks (the PS's included) in the other. Two need a core (two
  // or more physical racks) and fabric links with a delay (the window).
  int partitions = 1;
};

// SpreadEvenly: `workers` over `racks` racks, as even as possible (the first
// racks get one more).
std::vector<int> SpreadEvenly(int workers, int racks);

// BuildNetwork: validates `config` (InvalidArgumentError naming the field)
// and builds the network, idle at time zero.
absl::StatusOr<std::unique_ptr<Network>> BuildNetwork(const TopologyConfig& config);

}  // namespace atp::sim

#endif  // ATP_SIM_TOPOLOGY_H_
