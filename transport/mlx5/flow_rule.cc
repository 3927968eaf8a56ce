// transport/mlx5/flow_rule.cc: building a queue's steering rule.
#include "transport/mlx5/flow_rule.h"

#include <arpa/inet.h>

#include <cstddef>
#include <cstring>

namespace atp::transport::mlx5 {

// verbs walks the specs by their sizes: each must start where the previous
// one's `size` says.
static_assert(offsetof(UdpFlowRule, eth) == sizeof(ibv_flow_attr));
static_assert(offsetof(UdpFlowRule, ipv4) ==
              offsetof(UdpFlowRule, eth) + sizeof(ibv_flow_spec_eth));
static_assert(offsetof(UdpFlowRule, udp) ==
              offsetof(UdpFlowRule, ipv4) + sizeof(ibv_flow_spec_ipv4));
static_assert(sizeof(UdpFlowRule) == sizeof(ibv_flow_attr) + sizeof(ibv_flow_spec_eth) +
                                         sizeof(ibv_flow_spec_ipv4) +
                                         sizeof(ibv_flow_spec_tcp_udp));

UdpFlowRule BuildUdpFlowRule(const FlowRuleRequest& request) {
  UdpFlowRule rule;
  std::memset(&rule, 0, sizeof(rule));
  rule.attr.comp_mask = 0;
  rule.attr.type = IBV_FLOW_ATTR_NORMAL;
  rule.attr.size = sizeof(UdpFlowRule);
  rule.attr.priority = request.priority;
  rule.attr.num_of_specs = 3;
  rule.attr.port = request.port;
  rule.attr.flags = 0;

  const bool with_address = request.match == FlowMatch::kAddressAndPort;

  rule.eth.type = IBV_FLOW_SPEC_ETH;
  rule.eth.size = sizeof(ibv_flow_spec_eth);
  rule.eth.val.ether_type = htons(wire::kEtherTypeIpv4);
  rule.eth.mask.ether_type = 0xFFFF;
  if (with_address) {
    std::memcpy(rule.eth.val.dst_mac, request.dst_mac.bytes.data(), 6);
    std::memset(rule.eth.mask.dst_mac, 0xFF, 6);
  }

  rule.ipv4.type = IBV_FLOW_SPEC_IPV4;
  rule.ipv4.size = sizeof(ibv_flow_spec_ipv4);
  if (with_address) {
    rule.ipv4.val.dst_ip = htonl(request.dst_ip.value);
    rule.ipv4.mask.dst_ip = 0xFFFFFFFF;
  }

  rule.udp.type = IBV_FLOW_SPEC_UDP;
  rule.udp.size = sizeof(ibv_flow_spec_tcp_udp);
  rule.udp.val.dst_port = htons(request.udp_port);
  rule.udp.mask.dst_port = 0xFFFF;
  return rule;
}

}  // namespace atp::transport::mlx5
