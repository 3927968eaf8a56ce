// lib/sim/forwarding_switch.h: a switch that only forwards (the core, or any
// switch not on an aggregation path): unicast by destination address,
// multicast by group, never back out of the ingress port. Like any
// ECN-capable switch it marks IPv4 CE on a frame whose egress queue is longer
// than its threshold; it knows nothing of ATP headers (the PS host turns CE
// into the ATP `ecn` flag, as a transport echoes CE).
#ifndef ATP_LIB_SIM_FORWARDING_SWITCH_H_
#define ATP_LIB_SIM_FORWARDING_SWITCH_H_

#include <cstdint>
#include <string>

#include "lib/sim/forwarding_table.h"
#include "lib/sim/node.h"

namespace atp::sim {

struct ForwardingCounters {
  uint64_t received = 0;
  uint64_t ce_marked = 0;
  uint64_t forwarded = 0;  // frames queued on an egress link (multicast copies included)
  uint64_t no_route = 0;   // dropped: no route or empty group
};

class ForwardingSwitch : public Node {
 public:
  // ecn_threshold: frames are CE-marked when their egress queue holds more
  // frames than this.
  ForwardingSwitch(std::string name, uint32_t ecn_threshold)
      : Node(std::move(name)), ecn_threshold_(ecn_threshold) {}

  ForwardingTable& table() { return table_; }
  const ForwardingCounters& counters() const { return counters_; }

  void Receive(PacketPtr packet, int port, TimePoint now) override;

 private:
  void MaybeMarkCe(Packet& packet, uint32_t egress_depth);

  uint32_t ecn_threshold_;
  ForwardingTable table_;
  ForwardingCounters counters_;
};

}  // namespace atp::sim

#endif  // ATP_LIB_SIM_FORWARDING_SWITCH_H_
