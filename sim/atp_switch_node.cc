#include "sim/atp_switch_node.h"

#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "sim/addressing.h"

namespace atp::sim {
namespace {

// Check: the tables and ports the topology builds are valid by construction;
// a failure here is a bug in the simulator, not an input error.
void Check(const absl::Status& status) {
  if (!status.ok()) std::abort();
}

std::unique_ptr<switchd::SwitchHost> MakeHost(std::string name,
                                              switch_emulator::SwitchPipeline pipeline,
                                              uint32_t ecn_threshold, uint16_t base_port) {
  switchd::SwitchHostOptions options;
  options.name = std::move(name);
  options.pipeline.ecn_threshold = ecn_threshold;
  options.pipeline.base_port = base_port;
  options.max_burst = 32;
  // Each scan visits every aggregator; the node runs one per scan period.
  options.orphan_scan_budget = pipeline.aggregators().size() > 0 ? pipeline.aggregators().size() : 1;
  options.orphan_scan_interval = TimeDelta::Zero();
  options.orphan_scan_spread = false;
  options.depth_at_each_frame = true;  // a link's depth at the frame, as a switch sees it
  auto host = switchd::SwitchHost::Create(std::move(options), {}, std::move(pipeline));
  Check(host.status());
  return *std::move(host);
}

}  // namespace

void SwitchTables::AddRoute(uint32_t ip, int port) {
  Check(host_->routes().Set(wire::Ipv4Address{ip}, 32, static_cast<uint32_t>(port)));
}

void SwitchTables::SetDefaultPort(int port) {
  Check(host_->routes().Set(wire::Ipv4Address{0}, 0, static_cast<uint32_t>(port)));
}

void SwitchTables::AddGroupMember(uint32_t group, int port) {
  Check(host_->multicast().AddMember(wire::Ipv4Address{GroupIp(group)}, static_cast<uint32_t>(port)));
}

AtpSwitchNode::AtpSwitchNode(std::string name, Simulator* sim, PacketPool* pool,
                             switch_emulator::SwitchPipeline pipeline,
                             TimeDelta orphan_scan_period, uint32_t ecn_threshold,
                             uint16_t base_port)
    : Node(name),
      sim_(sim),
      frames_(pool),
      base_port_(base_port),
      scan_period_(orphan_scan_period > TimeDelta::Zero() ? orphan_scan_period
                                                          : TimeDelta::FromMilliseconds(1)),
      host_(MakeHost(std::move(name), std::move(pipeline), ecn_threshold, base_port)),
      tables_(host_.get()) {}

AtpSwitchNode::~AtpSwitchNode() { sim_->Unschedule(this); }

size_t AtpSwitchNode::AggregatorsOwnedBy(uint8_t job) const {
  const auto& array = pipeline().aggregators();
  size_t owned = 0;
  for (size_t i = 0; i < array.size(); ++i) {
    const auto& state = array.state(i);
    owned += !state.is_free() && state.job() == job;
  }
  return owned;
}

void AtpSwitchNode::SyncPorts() {
  while (sim_ports_.size() < static_cast<size_t>(port_count())) {
    const int index = static_cast<int>(sim_ports_.size());
    transport::DeviceAddress address;
    sim_ports_.push_back(std::make_unique<SimPort>(&frames_, port(index), address, base_port_));
    Check(host_->AddPort({absl::StrCat(name(), "/", index), sim_ports_.back().get()}));
  }
}

void AtpSwitchNode::Receive(PacketPtr packet, int port, TimePoint now) {
  if (sim_ports_.size() != static_cast<size_t>(port_count())) SyncPorts();
  sim_ports_[static_cast<size_t>(port)]->Deliver(std::move(packet));
  host_->PollPort(static_cast<uint32_t>(port), now);
  MaybeScheduleScan(now);
}

void AtpSwitchNode::MaybeScheduleScan(TimePoint now) {
  if (pipeline().aggregators_in_use() > 0 && scheduled_time().IsInfinite()) {
    sim_->Schedule(this, now + scan_period_);
  }
}

void AtpSwitchNode::Act(TimePoint now) {
  host_->ScanOrphansIfDue(now);
  MaybeScheduleScan(now);
}

}  // namespace atp::sim
