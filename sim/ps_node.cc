#include "sim/ps_node.h"

#include <utility>

#include "atp/status_macros.h"
#include "lib/host/ps_shard.h"
#include "sim/addressing.h"

namespace atp::sim {
namespace {

transport::DeviceAddress AddressOf(uint32_t ip) {
  transport::DeviceAddress address;
  address.ipv4.value = ip;
  address.mac = MacOf(ip);
  return address;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsNode>> PsNode::Create(std::string name, Simulator* sim,
                                                       PacketPool* pool, ps::PsConfig config,
                                                       uint32_t ip, uint16_t base_port,
                                                       TimeDelta packet_service) {
  if (packet_service < TimeDelta::Zero()) {
    return absl::InvalidArgumentError("PsNode: packet_service must be >= 0");
  }
  host::PsDestinations destinations;
  for (const protocol::JobShape& job : config.jobs) {
    destinations[job.job] = {AddressOf(GroupIp(job.job))};
  }
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<host::PsShard> shard,
                       host::PsShard::Create(std::move(config), std::move(destinations),
                                                AddressOf(ip), base_port));
  std::unique_ptr<PsNode> node(
      new PsNode(std::move(name), sim, pool, ip, base_port, packet_service));
  node->loop_ = std::make_unique<host::PsIoLoop>(
      std::move(shard), std::vector<transport::Queue*>{&node->nic_}, base_port,
      /*max_burst=*/32);
  return node;
}

PsNode::PsNode(std::string name, Simulator* sim, PacketPool* pool, uint32_t ip,
               uint16_t base_port, TimeDelta packet_service)
    : Node(std::move(name)),
      sim_(sim),
      ip_(ip),
      frames_(pool),
      nic_(&frames_, nullptr, AddressOf(ip), base_port),
      packet_service_(packet_service) {}

PsNode::~PsNode() { sim_->Unschedule(this); }

ParameterServerStats PsNode::statistics() const {
  loop_->Publish();
  return loop_->statistics();
}

void PsNode::Receive(PacketPtr packet, int, TimePoint now) {
  if (packet_service_ == TimeDelta::Zero()) {
    nic_.Deliver(std::move(packet));
    Step(now);
    return;
  }
  // The server is idle: this frame's service starts now.
  if (waiting_.empty()) head_done_ = now + packet_service_;
  waiting_.push_back(std::move(packet));
  sim_->Schedule(this, head_done_);
}

void PsNode::Act(TimePoint now) {
  if (!waiting_.empty()) Serve(now);
  Step(now);
}

void PsNode::Serve(TimePoint now) {
  while (!waiting_.empty() && head_done_ <= now) {
    nic_.Deliver(waiting_.pop_front());
    // The next frame arrived while this one was served: it starts at once.
    head_done_ = waiting_.empty() ? TimePoint::Infinite() : head_done_ + packet_service_;
  }
}

void PsNode::Step(TimePoint now) {
  if (!nic_.attached()) nic_.Attach(port(0));
  sim_->Schedule(this, loop_->Step(now).deadline);
  if (!waiting_.empty()) sim_->Schedule(this, head_done_);
}

}  // namespace atp::sim
