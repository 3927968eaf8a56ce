// transport/dpdk/flow_steering.cc
#include "transport/dpdk/flow_steering.h"

#include "absl/strings/str_cat.h"
#include "transport/dpdk/status.h"

namespace atp::transport::internal {
namespace {

absl::Status FlowError(int ret, const rte_flow_error& error, const std::string& what) {
  return RteErrorStatus(
      ret, absl::StrCat(what, " (", error.message != nullptr ? error.message : "no detail", ")"));
}

}  // namespace

void BuildFlowRule(uint16_t udp_port, uint16_t queue, FlowRule* rule) {
  rule->attr = rte_flow_attr{};
  rule->attr.ingress = 1;
  rule->udp_spec = rte_flow_item_udp{};
  rule->udp_spec.hdr.dst_port = rte_cpu_to_be_16(udp_port);
  rule->udp_mask = rte_flow_item_udp{};
  rule->udp_mask.hdr.dst_port = rte_cpu_to_be_16(0xFFFF);
  rule->queue.index = queue;
  rule->pattern[0] = rte_flow_item{RTE_FLOW_ITEM_TYPE_ETH, nullptr, nullptr, nullptr};
  rule->pattern[1] = rte_flow_item{RTE_FLOW_ITEM_TYPE_IPV4, nullptr, nullptr, nullptr};
  rule->pattern[2] = rte_flow_item{RTE_FLOW_ITEM_TYPE_UDP, &rule->udp_spec, nullptr, &rule->udp_mask};
  rule->pattern[3] = rte_flow_item{RTE_FLOW_ITEM_TYPE_END, nullptr, nullptr, nullptr};
  rule->actions[0] = rte_flow_action{RTE_FLOW_ACTION_TYPE_QUEUE, &rule->queue};
  rule->actions[1] = rte_flow_action{RTE_FLOW_ACTION_TYPE_END, nullptr};
}

absl::Status ProbeFlowSteering(uint16_t port_id, uint16_t base_port, uint16_t queue) {
  FlowRule rule;
  BuildFlowRule(static_cast<uint16_t>(base_port + queue), queue, &rule);
  rte_flow_error error{};
  const int ret =
      rte_flow_validate(port_id, &rule.attr, rule.pattern.data(), rule.actions.data(), &error);
  if (ret != 0) return FlowError(ret, error, absl::StrCat("rte_flow_validate on port ", port_id));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<rte_flow*>> InstallFlowSteering(uint16_t port_id, uint16_t base_port,
                                                           uint32_t num_queues) {
  std::vector<rte_flow*> flows;
  for (uint32_t q = 0; q < num_queues; ++q) {
    FlowRule rule;
    BuildFlowRule(static_cast<uint16_t>(base_port + q), static_cast<uint16_t>(q), &rule);
    rte_flow_error error{};
    rte_flow* flow =
        rte_flow_create(port_id, &rule.attr, rule.pattern.data(), rule.actions.data(), &error);
    if (flow == nullptr) {
      absl::Status status = FlowError(rte_errno, error,
                                      absl::StrCat("rte_flow_create (UDP port ", base_port + q,
                                                   " -> queue ", q, ") on port ", port_id));
      RemoveFlowSteering(port_id, flows);
      return status;
    }
    flows.push_back(flow);
  }
  return flows;
}

void RemoveFlowSteering(uint16_t port_id, std::vector<rte_flow*>& flows) {
  for (rte_flow* flow : flows) {
    rte_flow_error error{};
    (void)rte_flow_destroy(port_id, flow, &error);
  }
  flows.clear();
}

}  // namespace atp::transport::internal
