// The parts of the DPDK backend that need no EAL: flow rules, offload and
// buffer choices, the peer table.
#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/mpsc_ring.h"
#include "transport/dpdk/flow_steering.h"
#include "transport/dpdk/peer_table.h"
#include "transport/dpdk/port_config.h"

namespace atp::transport::internal {
namespace {

TEST(DpdkFlowRule, MatchesTheUdpDestinationPortAndNamesTheQueue) {
  FlowRule rule;
  BuildFlowRule(50003, 3, &rule);
  EXPECT_EQ(rule.attr.ingress, 1u);
  EXPECT_EQ(rule.attr.egress, 0u);
  EXPECT_EQ(rule.pattern[0].type, RTE_FLOW_ITEM_TYPE_ETH);
  EXPECT_EQ(rule.pattern[1].type, RTE_FLOW_ITEM_TYPE_IPV4);
  ASSERT_EQ(rule.pattern[2].type, RTE_FLOW_ITEM_TYPE_UDP);
  EXPECT_EQ(rule.pattern[3].type, RTE_FLOW_ITEM_TYPE_END);
  const auto* spec = static_cast<const rte_flow_item_udp*>(rule.pattern[2].spec);
  const auto* mask = static_cast<const rte_flow_item_udp*>(rule.pattern[2].mask);
  ASSERT_EQ(spec, &rule.udp_spec) << "the pattern points into the rule itself";
  EXPECT_EQ(rte_be_to_cpu_16(spec->hdr.dst_port), 50003) << "network byte order";
  EXPECT_EQ(mask->hdr.dst_port, 0xFFFF) << "the whole port, nothing else";
  EXPECT_EQ(mask->hdr.src_port, 0);
  EXPECT_EQ(rule.actions[0].type, RTE_FLOW_ACTION_TYPE_QUEUE);
  EXPECT_EQ(static_cast<const rte_flow_action_queue*>(rule.actions[0].conf)->index, 3);
  EXPECT_EQ(rule.actions[1].type, RTE_FLOW_ACTION_TYPE_END);
}

TEST(DpdkTxOffloads, FastFreeWhenOfferedAndNeverMultiSegments) {
  EXPECT_EQ(SelectTxOffloads(0), 0u);
  EXPECT_EQ(SelectTxOffloads(RTE_ETH_TX_OFFLOAD_MULTI_SEGS), 0u);
  EXPECT_EQ(SelectTxOffloads(RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE |
                             RTE_ETH_TX_OFFLOAD_IPV4_CKSUM),
            RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE);
}

TEST(DpdkRxBuffers, KernelInterfacesAndNicsGetWholeMtuBuffers) {
  EXPECT_GE(RxFrameRoom("net_memif"), kFrameBytes);
  EXPECT_GE(RxFrameRoom("net_ring"), kFrameBytes);
  EXPECT_GE(RxFrameRoom("net_af_packet"), 1514u);
  EXPECT_GE(RxFrameRoom("net_af_xdp"), 1514u);
  EXPECT_GE(RxFrameRoom("mlx5_pci"), 1514u);
}

TEST(DpdkRxBuffers, DriversThatPostBuffersGetAReserveBeyondTheApplicationsShare) {
  EXPECT_EQ(RxDriverReserve("net_ring", 1024, 1024), 0u) << "passes the sender's mbufs";
  EXPECT_EQ(RxDriverReserve("net_memif", 1024, 1024), 0u) << "allocates when it receives";
  EXPECT_EQ(RxDriverReserve("net_af_packet", 1024, 1024), 0u);
  EXPECT_GE(RxDriverReserve("net_af_xdp", 1024, 512), 2048u + 512u) << "fill ring + TX copies";
  EXPECT_GE(RxDriverReserve("net_mlx5", 1024, 1024), 1024u) << "a NIC's posted descriptors";
}

TEST(DpdkPeerTable, KnowsEachNodesQueueCountAndRefusesDuplicates) {
  PeerTable table;
  const wire::Ipv4Address ip = *wire::Ipv4Address::Parse("10.0.0.9");
  ASSERT_TRUE(table.Add(DpdkPeer{{ip, DefaultMacFor(ip)}, 4}).ok());
  EXPECT_EQ(table.QueuesOf(ip.value), 4u);
  EXPECT_EQ(table.QueuesOf(ip.value + 1), 0u);
  EXPECT_EQ(table.Add(DpdkPeer{{ip, DefaultMacFor(ip)}, 2}).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(table.Add(DpdkPeer{{{ip.value + 1}, {}}, 17}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MpscRing, HoldsExactlyItsCapacityInOrder) {
  MpscRing<int> ring(8);
  const int values[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(ring.Push(values, 10), 8u) << "a partial push when it does not all fit";
  EXPECT_EQ(ring.Push(values, 1), 0u) << "full";
  int out[10] = {};
  EXPECT_EQ(ring.Pop(out, 3), 3u);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[2], 2);
  EXPECT_EQ(ring.Push(values + 8, 2), 2u) << "room again, wrapping around";
  EXPECT_EQ(ring.Pop(out, 10), 7u);
  const int want[7] = {3, 4, 5, 6, 7, 8, 9};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(out[i], want[i]);
  EXPECT_EQ(ring.Pop(out, 10), 0u) << "empty";
}

TEST(MpscRing, ManyLapsKeepOrder) {
  MpscRing<uint32_t> ring(4);
  uint32_t next_in = 0;
  uint32_t next_out = 0;
  for (int round = 0; round < 1000; ++round) {
    uint32_t values[3] = {next_in, next_in + 1, next_in + 2};
    next_in += static_cast<uint32_t>(ring.Push(values, 3));
    uint32_t out[2];
    const size_t n = ring.Pop(out, 2);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], next_out++);
  }
  EXPECT_GT(next_out, 1000u);
}

TEST(MpscRing, ProducersOnTheirThreadsEachKeepTheirOrderAndLoseNothing) {
  constexpr uint32_t kProducers = 3;
  constexpr uint32_t kPerProducer = 50000;
  MpscRing<uint32_t> ring(64);
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&ring, p] {
      // Value = producer << 24 | sequence, pushed in runs of up to 5.
      for (uint32_t i = 0; i < kPerProducer;) {
        uint32_t run[5];
        const uint32_t n = std::min<uint32_t>(5, kPerProducer - i);
        for (uint32_t k = 0; k < n; ++k) run[k] = (p << 24) | (i + k);
        const size_t pushed = ring.Push(run, n);
        i += static_cast<uint32_t>(pushed);
        if (pushed == 0) std::this_thread::yield();
      }
    });
  }
  uint32_t next[kProducers] = {};
  uint32_t total = 0;
  bool in_order = true;
  while (total < kProducers * kPerProducer) {
    uint32_t out[16];
    const size_t n = ring.Pop(out, 16);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t p = out[i] >> 24;
      if (p >= kProducers || (out[i] & 0xFFFFFF) != next[p]) in_order = false;
      if (p < kProducers) ++next[p];
    }
    total += static_cast<uint32_t>(n);
    if (n == 0) std::this_thread::yield();
  }
  for (std::thread& t : producers) t.join();
  EXPECT_TRUE(in_order);
  for (uint32_t p = 0; p < kProducers; ++p) EXPECT_EQ(next[p], kPerProducer);
}

}  // namespace
}  // namespace atp::transport::internal
