// transport/mlx5/flow_rule.h: the ibv_create_flow rule that steers a queue's
// UDP destination port to its receive QP. Pure (no device): the rule is a
// struct of verbs specs, unit-tested field by field. Private to
// transport/mlx5.
//
// The rule is an ibv_flow_attr followed by three specs, in the order verbs
// parses them (each spec's `size` leads to the next): Ethernet (destination
// MAC unless port-only; EtherType IPv4), IPv4 (destination address unless
// port-only), UDP (destination port). Values and masks are in network byte
// order; a zero mask matches anything.
//
//   UdpFlowRule rule = BuildUdpFlowRule({.port = 1, .udp_port = 50000 + q, ...});
//   ibv_flow* flow = ibv_create_flow(rx_qp, &rule.attr);
#ifndef ATP_TRANSPORT_MLX5_FLOW_RULE_H_
#define ATP_TRANSPORT_MLX5_FLOW_RULE_H_

#include <infiniband/verbs.h>

#include <cstdint>

#include "atp/wire.h"
#include "transport/mlx5/mlx5_device.h"

namespace atp::transport::mlx5 {

// UdpFlowRule: what ibv_create_flow reads (attr first, the specs after it).
// Not packed: every member's size is a multiple of 4, so there is no padding
// between them (flow_rule.cc asserts it) and &attr is properly aligned.
struct UdpFlowRule {
  ibv_flow_attr attr;
  ibv_flow_spec_eth eth;
  ibv_flow_spec_ipv4 ipv4;
  ibv_flow_spec_tcp_udp udp;
};

// FlowRuleRequest: one queue's rule.
struct FlowRuleRequest {
  uint8_t port = 1;  // device port, 1-based
  uint16_t priority = 0;
  uint16_t udp_port = 0;  // the queue's destination port, host order
  FlowMatch match = FlowMatch::kAddressAndPort;
  wire::MacAddress dst_mac;  // kAddressAndPort: this node
  wire::Ipv4Address dst_ip;  // kAddressAndPort: this node (host order)
};

UdpFlowRule BuildUdpFlowRule(const FlowRuleRequest& request);

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_FLOW_RULE_H_
