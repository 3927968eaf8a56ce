// transport/dpdk/flow_steering.h: steering by UDP destination port with
// rte_flow: one rule per queue, ETH / IPV4 / UDP(dst = base_port + q) ->
// QUEUE q. Private to transport/dpdk.
#ifndef ATP_TRANSPORT_DPDK_FLOW_STEERING_H_
#define ATP_TRANSPORT_DPDK_FLOW_STEERING_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/dpdk/dpdk_headers.h"

namespace atp::transport::internal {

// FlowRule: the attribute, pattern and actions of one queue's rule, with the
// storage they point into (so it must not be copied once built: the pointers
// would dangle; BuildFlowRule returns it by filling one in place).
struct FlowRule {
  rte_flow_attr attr{};
  rte_flow_item_udp udp_spec{};
  rte_flow_item_udp udp_mask{};
  rte_flow_action_queue queue{};
  std::array<rte_flow_item, 4> pattern{};
  std::array<rte_flow_action, 2> actions{};

  FlowRule() = default;
  FlowRule(const FlowRule&) = delete;
  FlowRule& operator=(const FlowRule&) = delete;
};

// BuildFlowRule: fills `rule` with the ingress rule sending UDP destination
// port `udp_port` to RX queue `queue`. Pure.
void BuildFlowRule(uint16_t udp_port, uint16_t queue, FlowRule* rule);

// ProbeFlowSteering: whether port `port_id` accepts the rule of queue
// `queue` (rte_flow_validate); the error says why not.
absl::Status ProbeFlowSteering(uint16_t port_id, uint16_t base_port, uint16_t queue);

// InstallFlowSteering: one rule per queue on a started port. On failure the
// rules already made are destroyed and the error says which one failed.
absl::StatusOr<std::vector<rte_flow*>> InstallFlowSteering(uint16_t port_id, uint16_t base_port,
                                                           uint32_t num_queues);

// RemoveFlowSteering: destroys the rules (errors ignored: the port is closing).
void RemoveFlowSteering(uint16_t port_id, std::vector<rte_flow*>& flows);

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_FLOW_STEERING_H_
