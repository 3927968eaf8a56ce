// lib/sim/atp_switch_node.h: an ATP switch: the real switch pipeline
// (switch_emulator/pipeline) bound to simulated ports.
//
// For each frame the node finds the egress the frame would take (the group's
// ports for a parameter packet, the route toward the destination otherwise),
// gives the pipeline that queue's depth for ECN marking, and acts on its
// Decision: kToPs and kForward follow the route, kMulticast goes to the ports
// of Decision::multicast_group, kAbsorbed and kMalformed end there. With
// aggregators in use it also scans for orphans periodically, as a switch's
// idle loop would, so they are freed even when traffic stops. Frames the
// pipeline leaves alone (kForward: jobs this switch does not aggregate) get
// the CE marking any ECN-capable switch gives them.
#ifndef ATP_LIB_SIM_ATP_SWITCH_NODE_H_
#define ATP_LIB_SIM_ATP_SWITCH_NODE_H_

#include <array>
#include <cstdint>
#include <string>

#include "lib/sim/forwarding_table.h"
#include "lib/sim/node.h"
#include "lib/sim/simulator.h"
#include "switch_emulator/pipeline/pipeline.h"

namespace atp::sim {

struct AtpSwitchCounters {
  uint64_t received = 0;
  std::array<uint64_t, 5> by_verdict{};  // [switch_emulator::Verdict]
  uint64_t forwarded = 0;                // frames queued on egress links (copies included)
  uint64_t no_route = 0;
  uint64_t orphan_scans = 0;
  uint64_t ce_marked = 0;  // kForward frames CE-marked by the node

  uint64_t verdict(switch_emulator::Verdict v) const {
    return by_verdict[static_cast<size_t>(v)];
  }
};

class AtpSwitchNode : public Node, public Actor {
 public:
  // `sim` outlives the node. `orphan_scan_period`: how often the idle scan
  // runs while aggregators are in use (a quarter of the orphan timeout is a
  // good choice). `ecn_threshold`: the pipeline's, for CE on kForward frames.
  AtpSwitchNode(std::string name, Simulator* sim, switch_emulator::SwitchPipeline pipeline,
                TimeDelta orphan_scan_period, uint32_t ecn_threshold);
  ~AtpSwitchNode() override;

  ForwardingTable& table() { return table_; }
  switch_emulator::SwitchPipeline& pipeline() { return pipeline_; }
  const switch_emulator::SwitchPipeline& pipeline() const { return pipeline_; }
  const AtpSwitchCounters& counters() const { return counters_; }

  // AggregatorsOwnedBy: aggregators now claimed by `job` (a linear scan).
  size_t AggregatorsOwnedBy(uint8_t job) const;

  void Receive(PacketPtr packet, int port, TimePoint now) override;
  // Act: the periodic orphan scan.
  void Act(TimePoint now) override;

 private:
  // EgressDepth: the depth of the queue the frame will leave by (the deepest
  // of a group's ports for a parameter packet).
  uint32_t EgressDepth(const Packet& packet, uint32_t dst) const;
  void Route(PacketPtr packet, int in_port, uint32_t dst);
  void MaybeScheduleScan(TimePoint now);

  Simulator* sim_;
  switch_emulator::SwitchPipeline pipeline_;
  TimeDelta scan_period_;
  uint32_t ecn_threshold_;
  ForwardingTable table_;
  AtpSwitchCounters counters_;
};

}  // namespace atp::sim

#endif  // ATP_LIB_SIM_ATP_SWITCH_NODE_H_
