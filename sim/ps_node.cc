#include "sim/ps_node.h"

#include <algorithm>
#include <utility>

#include "atp/status_macros.h"
#include "sim/addressing.h"

namespace atp::sim {

absl::StatusOr<std::unique_ptr<PsNode>> PsNode::Create(std::string name, Simulator* sim,
                                                       PacketPool* pool, ps::PsConfig config,
                                                       uint32_t ip, uint16_t base_port) {
  // A quarter of the timeout, as the switches scan (at least 1 us).
  const TimeDelta period =
      config.orphan_timeout.IsInfinite()
          ? TimeDelta::Infinite()
          : std::max(config.orphan_timeout / 4, TimeDelta::FromMicroseconds(1));
  ATP_ASSIGN_OR_RETURN(ps::PsEngine engine, ps::PsEngine::Create(std::move(config)));
  return std::unique_ptr<PsNode>(
      new PsNode(std::move(name), sim, pool, std::move(engine), period, ip, base_port));
}

PsNode::PsNode(std::string name, Simulator* sim, PacketPool* pool, ps::PsEngine engine,
               TimeDelta scan_period, uint32_t ip, uint16_t base_port)
    : Node(std::move(name)),
      sim_(sim),
      pool_(pool),
      engine_(std::move(engine)),
      ip_(ip),
      base_port_(base_port),
      scan_period_(scan_period) {
  tx_fields_.src_ip.value = ip;
  tx_fields_.src_mac = MacOf(ip);
  tx_fields_.ip_tos = wire::kTosEct0;
}

void PsNode::Receive(PacketPtr packet, int, TimePoint now) {
  ++counters_.frames_received;
  if (wire::DecodeFrame(packet->bytes, base_port_, &rx_fields_, &rx_message_.payload) !=
      wire::DecodeError::kOk) {
    ++counters_.decode_errors;
    return;
  }
  packet.reset();
  rx_message_.header = rx_fields_.header;
  if (rx_fields_.ip_tos == wire::kTosCe && !rx_message_.header.ecn) {
    rx_message_.header.ecn = true;
    ++counters_.ce_to_ecn;
  }
  engine_.OnGradient(rx_message_, now, sink_);
  MaybeScheduleScan(now);
}

PsNode::~PsNode() { sim_->Unschedule(this); }

void PsNode::MaybeScheduleScan(TimePoint now) {
  if (engine_.live_slots() > 0 && !scan_period_.IsInfinite() && scheduled_time().IsInfinite()) {
    sim_->Schedule(this, now + scan_period_);
  }
}

void PsNode::Act(TimePoint now) {
  ++counters_.orphan_scans;
  engine_.ScanOrphans(now, engine_.total_slots());
  MaybeScheduleScan(now);
}

void PsNode::Sink::Send(const wire::AtpMessage& message) {
  PsNode& node = *node_;
  const uint32_t group = GroupIp(message.header.job);
  node.tx_fields_.dst_ip.value = group;
  node.tx_fields_.dst_mac = MacOf(group);
  node.tx_fields_.header = message.header;
  PacketPtr packet = node.pool_->Allocate();
  wire::EncodeFrame(node.tx_fields_, message.payload, node.base_port_, packet->frame());
  ++node.counters_.frames_sent;
  node.port(0)->Send(std::move(packet));
}

}  // namespace atp::sim
