#include "lib/sim/atp_switch_node.h"

#include <algorithm>

#include "lib/sim/addressing.h"
#include "lib/sim/packet_filter.h"
#include "lib/wire/frame_view.h"

namespace atp::sim {

using switch_emulator::Decision;
using switch_emulator::Verdict;

AtpSwitchNode::AtpSwitchNode(std::string name, Simulator* sim,
                             switch_emulator::SwitchPipeline pipeline,
                             TimeDelta orphan_scan_period, uint32_t ecn_threshold)
    : Node(std::move(name)),
      sim_(sim),
      pipeline_(std::move(pipeline)),
      scan_period_(orphan_scan_period > TimeDelta::Zero() ? orphan_scan_period
                                                          : TimeDelta::FromMilliseconds(1)),
      ecn_threshold_(ecn_threshold) {}

AtpSwitchNode::~AtpSwitchNode() { sim_->Unschedule(this); }

size_t AtpSwitchNode::AggregatorsOwnedBy(uint8_t job) const {
  const auto& array = pipeline_.aggregators();
  size_t owned = 0;
  for (size_t i = 0; i < array.size(); ++i) {
    const auto& state = array.state(i);
    owned += !state.is_free() && state.job() == job;
  }
  return owned;
}

uint32_t AtpSwitchNode::EgressDepth(const Packet& packet, uint32_t dst) const {
  if (IsGroupIp(dst) || ClassOf(packet) == TrafficClass::kParameterPackets) {
    uint32_t depth = 0;
    for (int p : table_.GroupPorts(GroupOfIp(dst))) depth = std::max(depth, port(p)->QueueDepth());
    return depth;
  }
  const int out = table_.Lookup(dst);
  return out == ForwardingTable::kNoRoute ? 0 : port(out)->QueueDepth();
}

void AtpSwitchNode::Route(PacketPtr packet, int in_port, uint32_t dst) {
  if (IsGroupIp(dst)) {
    const int queued = SendToPorts(std::move(packet), table_.GroupPorts(GroupOfIp(dst)), in_port);
    if (queued == 0) ++counters_.no_route;
    counters_.forwarded += static_cast<uint64_t>(queued);
    return;
  }
  const int out = table_.Lookup(dst);
  if (out == ForwardingTable::kNoRoute || out == in_port) {
    ++counters_.no_route;
    return;
  }
  counters_.forwarded += port(out)->Send(std::move(packet)) == SendResult::kQueued;
}

void AtpSwitchNode::Receive(PacketPtr packet, int port, TimePoint now) {
  ++counters_.received;
  const uint32_t dst = DstIpOf(*packet);
  const uint32_t depth = EgressDepth(*packet, dst);
  const Decision decision = pipeline_.Process(packet->bytes, now, depth);
  ++counters_.by_verdict[static_cast<size_t>(decision.verdict)];
  switch (decision.verdict) {
    case Verdict::kAbsorbed:
    case Verdict::kMalformed:
      break;
    case Verdict::kToPs:
      Route(std::move(packet), port, dst);
      break;
    case Verdict::kForward: {
      wire::FrameView view(packet->bytes.data());
      if (depth > ecn_threshold_ && (view.ip_tos() & 0x03) != 0 && (view.ip_tos() & 0x03) != 3) {
        view.MarkCongestionExperienced();
        ++counters_.ce_marked;
      }
      Route(std::move(packet), port, dst);
      break;
    }
    case Verdict::kMulticast: {
      const int queued =
          SendToPorts(std::move(packet), table_.GroupPorts(decision.multicast_group), port);
      if (queued == 0) ++counters_.no_route;
      counters_.forwarded += static_cast<uint64_t>(queued);
      break;
    }
  }
  MaybeScheduleScan(now);
}

void AtpSwitchNode::MaybeScheduleScan(TimePoint now) {
  if (pipeline_.aggregators_in_use() > 0 && scheduled_time().IsInfinite()) {
    sim_->Schedule(this, now + scan_period_);
  }
}

void AtpSwitchNode::Act(TimePoint now) {
  ++counters_.orphan_scans;
  pipeline_.ScanOrphans(now, pipeline_.aggregators().size());
  MaybeScheduleScan(now);
}

}  // namespace atp::sim
