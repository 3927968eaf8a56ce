// sim/atp_switch_node.h: an ATP switch in the simulator: the product's
// switch host (switch_emulator/host/switch_host.h, what atp-switchd runs)
// over simulated ports (sim/sim_port.h).
//
// A frame that arrives on port i is delivered to that port's SimPort and the
// host polls it at once (PollPort): the pipeline's verdict, routing by the
// host's tables, multicast, ECN (the host gives the pipeline the depth of the
// link the frame will leave by, and marks CE on frames it only forwards) are
// all the host's. With aggregators in use the node also runs the host's
// orphan scan periodically, as the daemon's idle rounds would, so they are
// freed even when traffic stops.
#ifndef ATP_SIM_ATP_SWITCH_NODE_H_
#define ATP_SIM_ATP_SWITCH_NODE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/node.h"
#include "sim/sim_port.h"
#include "sim/simulator.h"
#include "switch_emulator/host/switch_host.h"
#include "switch_emulator/pipeline/pipeline.h"

namespace atp::sim {

// SwitchTables: how the topology fills a switch's forwarding tables (the
// host's RouteTable and MulticastTable): hosts by address, a default port,
// and the member ports of each job's group (GroupIp(group)).
class SwitchTables {
 public:
  explicit SwitchTables(switchd::SwitchHost* host) : host_(host) {}
  void AddRoute(uint32_t ip, int port);
  void SetDefaultPort(int port);
  void AddGroupMember(uint32_t group, int port);

 private:
  switchd::SwitchHost* host_;
};

class AtpSwitchNode : public Node, public Actor {
 public:
  // `sim` and `pool` outlive the node. `orphan_scan_period`: how often the
  // idle scan runs while aggregators are in use (a quarter of the orphan
  // timeout is a good choice). `ecn_threshold`: the pipeline's, for CE on
  // kForward frames. The pipeline's jobs name GroupIp(job) as their group.
  AtpSwitchNode(std::string name, Simulator* sim, PacketPool* pool,
                switch_emulator::SwitchPipeline pipeline, TimeDelta orphan_scan_period,
                uint32_t ecn_threshold, uint16_t base_port);
  ~AtpSwitchNode() override;

  SwitchTables& table() { return tables_; }
  switch_emulator::SwitchPipeline& pipeline() { return host_->pipeline(); }
  const switch_emulator::SwitchPipeline& pipeline() const { return host_->pipeline(); }
  const switchd::SwitchHost& host() const { return *host_; }

  // AggregatorsOwnedBy: aggregators now claimed by `job` (a linear scan).
  size_t AggregatorsOwnedBy(uint8_t job) const;

  void Receive(PacketPtr packet, int port, TimePoint now) override;
  // Act: the periodic orphan scan.
  void Act(TimePoint now) override;

 private:
  // SyncPorts: a SimPort (and a host port) for each port the network added.
  void SyncPorts();
  void MaybeScheduleScan(TimePoint now);

  Simulator* sim_;
  PacketFramePool frames_;  // the ports' pools: a forwarded frame is not copied
  uint16_t base_port_;
  TimeDelta scan_period_;
  std::unique_ptr<switchd::SwitchHost> host_;
  SwitchTables tables_;
  std::vector<std::unique_ptr<SimPort>> sim_ports_;  // [port]
};

}  // namespace atp::sim

#endif  // ATP_SIM_ATP_SWITCH_NODE_H_
