// tests/transport/mlx5/flow_rule_test.cc: the steering rule of a queue's UDP
// port, as ibv_create_flow will read it.
#include "transport/mlx5/flow_rule.h"

#include <arpa/inet.h>

#include <cstring>

#include "gtest/gtest.h"
#include "tests/transport/mlx5/mlx5_test_util.h"

namespace atp::transport::mlx5 {
namespace {

FlowRuleRequest Request(FlowMatch match) {
  FlowRuleRequest request;
  request.port = 1;
  request.priority = 2;
  request.udp_port = 50003;
  request.match = match;
  request.dst_mac = testing::NodeB().mac;
  request.dst_ip = testing::NodeB().ipv4;
  return request;
}

// Specs: the specs as verbs walks them: from after the attr, by each `size`.
std::vector<ibv_flow_spec_type> WalkSpecs(const UdpFlowRule& rule) {
  std::vector<ibv_flow_spec_type> types;
  const auto* p = reinterpret_cast<const uint8_t*>(&rule.attr) + sizeof(ibv_flow_attr);
  for (int i = 0; i < rule.attr.num_of_specs; ++i) {
    ibv_flow_spec_type type;
    uint16_t size;
    std::memcpy(&type, p, sizeof(type));
    std::memcpy(&size, p + sizeof(type), sizeof(size));
    types.push_back(type);
    p += size;
  }
  EXPECT_EQ(p, reinterpret_cast<const uint8_t*>(&rule) + rule.attr.size)
      << "the specs end where attr.size says";
  return types;
}

TEST(UdpFlowRule, SpecsAreEthernetIpv4UdpInTheOrderVerbsWalksThem) {
  const UdpFlowRule rule = BuildUdpFlowRule(Request(FlowMatch::kAddressAndPort));
  EXPECT_EQ(rule.attr.type, IBV_FLOW_ATTR_NORMAL);
  EXPECT_EQ(rule.attr.size, sizeof(UdpFlowRule));
  EXPECT_EQ(rule.attr.num_of_specs, 3);
  EXPECT_EQ(rule.attr.port, 1);
  EXPECT_EQ(rule.attr.priority, 2);
  EXPECT_EQ(rule.attr.flags, 0u);
  EXPECT_EQ(WalkSpecs(rule), (std::vector<ibv_flow_spec_type>{IBV_FLOW_SPEC_ETH, IBV_FLOW_SPEC_IPV4,
                                                              IBV_FLOW_SPEC_UDP}));
}

TEST(UdpFlowRule, MatchesTheQueuePortAndThisNodeInNetworkByteOrder) {
  const UdpFlowRule rule = BuildUdpFlowRule(Request(FlowMatch::kAddressAndPort));
  EXPECT_EQ(rule.udp.val.dst_port, htons(50003));
  EXPECT_EQ(rule.udp.mask.dst_port, 0xFFFF);
  EXPECT_EQ(rule.udp.mask.src_port, 0) << "any source port";
  EXPECT_EQ(rule.ipv4.val.dst_ip, htonl(0x0A000002));  // 10.0.0.2
  EXPECT_EQ(rule.ipv4.mask.dst_ip, 0xFFFFFFFFu);
  EXPECT_EQ(rule.ipv4.mask.src_ip, 0u);
  EXPECT_EQ(std::memcmp(rule.eth.val.dst_mac, testing::NodeB().mac.bytes.data(), 6), 0);
  const uint8_t all_ones[6] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(std::memcmp(rule.eth.mask.dst_mac, all_ones, 6), 0);
  EXPECT_EQ(rule.eth.val.ether_type, htons(0x0800));
  EXPECT_EQ(rule.eth.mask.ether_type, 0xFFFF);
  const uint8_t zeros[6] = {};
  EXPECT_EQ(std::memcmp(rule.eth.mask.src_mac, zeros, 6), 0);
  EXPECT_EQ(rule.eth.mask.vlan_tag, 0);
}

TEST(UdpFlowRule, PortOnlyMatchesAnyDestinationAddress) {
  const UdpFlowRule rule = BuildUdpFlowRule(Request(FlowMatch::kPortOnly));
  const uint8_t zeros[6] = {};
  EXPECT_EQ(std::memcmp(rule.eth.mask.dst_mac, zeros, 6), 0);
  EXPECT_EQ(rule.ipv4.mask.dst_ip, 0u);
  EXPECT_EQ(rule.eth.mask.ether_type, 0xFFFF) << "still IPv4 only";
  EXPECT_EQ(rule.udp.val.dst_port, htons(50003));
  EXPECT_EQ(rule.udp.mask.dst_port, 0xFFFF);
}

TEST(UdpFlowRule, EachQueueGetsItsOwnPort) {
  for (uint16_t q = 0; q < 16; ++q) {
    FlowRuleRequest request = Request(FlowMatch::kAddressAndPort);
    request.udp_port = static_cast<uint16_t>(wire::kDefaultBasePort + q);
    EXPECT_EQ(ntohs(BuildUdpFlowRule(request).udp.val.dst_port), wire::kDefaultBasePort + q);
  }
}

}  // namespace
}  // namespace atp::transport::mlx5
