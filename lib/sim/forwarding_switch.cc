#include "lib/sim/forwarding_switch.h"

#include <algorithm>

#include "lib/sim/addressing.h"
#include "lib/wire/frame_view.h"

namespace atp::sim {

void ForwardingSwitch::MaybeMarkCe(Packet& packet, uint32_t egress_depth) {
  if (egress_depth <= ecn_threshold_) return;
  wire::FrameView view(packet.bytes.data());
  if ((view.ip_tos() & 0x03) == 0) return;  // not ECN-capable
  view.MarkCongestionExperienced();
  ++counters_.ce_marked;
}

void ForwardingSwitch::Receive(PacketPtr packet, int port, TimePoint) {
  ++counters_.received;
  const uint32_t dst = DstIpOf(*packet);
  if (IsGroupIp(dst)) {
    const std::span<const int> ports = table_.GroupPorts(GroupOfIp(dst));
    uint32_t depth = 0;
    for (int p : ports) depth = std::max(depth, this->port(p)->QueueDepth());
    MaybeMarkCe(*packet, depth);
    const int queued = SendToPorts(std::move(packet), ports, port);
    if (queued == 0) ++counters_.no_route;
    counters_.forwarded += static_cast<uint64_t>(queued);
    return;
  }
  const int out = table_.Lookup(dst);
  if (out == ForwardingTable::kNoRoute || out == port) {
    ++counters_.no_route;
    return;
  }
  MaybeMarkCe(*packet, this->port(out)->QueueDepth());
  counters_.forwarded += this->port(out)->Send(std::move(packet)) == SendResult::kQueued;
}

}  // namespace atp::sim
