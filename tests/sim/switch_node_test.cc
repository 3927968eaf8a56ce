// Tests of the simulated switches: routing, multicast, ECN marking
// (lib/sim/forwarding_switch.h, lib/sim/atp_switch_node.h).
#include <memory>

#include "gtest/gtest.h"
#include "lib/sim/addressing.h"
#include "lib/sim/forwarding_switch.h"
#include "lib/wire/frame_view.h"
#include "tests/sim/sim_test_util.h"

namespace atp::sim {
namespace {

using testing::Collector;

// Frame from host (0, 1) to `dst`.
PacketPtr FrameTo(PacketPool& pool, uint32_t dst, TrafficClass kind = TrafficClass::kGradients) {
  wire::FrameFields fields;
  fields.src_ip.value = HostIp(0, 1);
  fields.dst_ip.value = dst;
  fields.header.job = 1;
  fields.header.seq = 5;
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  fields.header.ack = kind == TrafficClass::kParameterPackets;
  PacketPtr packet = pool.Allocate();
  wire::EncodeFrame(fields, wire::Payload{}, wire::kDefaultBasePort, packet->frame());
  return packet;
}

// A ForwardingSwitch with three ports to three collectors.
struct ThreePortSwitch {
  Simulator sim;
  PacketPool pool;
  ForwardingSwitch sw{"core", /*ecn_threshold=*/2};
  Collector sinks[3];
  std::vector<std::unique_ptr<Link>> links;

  ThreePortSwitch() {
    for (int i = 0; i < 3; ++i) {
      links.push_back(std::make_unique<Link>(
          &sim, &pool, LinkConfig{.bandwidth_bps = 10e9, .queue_capacity_packets = 64}, "l"));
      links.back()->Connect(&sinks[i], i);
      sw.AddPort(links.back().get());
    }
    sw.table().AddRoute(HostIp(1, 0), 1);
    sw.table().SetDefaultPort(2);
    sw.table().AddGroupMember(7, 0);
    sw.table().AddGroupMember(7, 1);
    sw.table().AddGroupMember(7, 2);
  }
};

TEST(ForwardingSwitchTest, RoutesUnicastByAddressWithADefault) {
  ThreePortSwitch t;
  t.sw.Receive(FrameTo(t.pool, HostIp(1, 0)), 0, t.sim.Now());
  t.sw.Receive(FrameTo(t.pool, HostIp(9, 9)), 0, t.sim.Now());
  t.sim.RunUntilIdle();
  EXPECT_EQ(t.sinks[0].arrivals.size(), 0u);
  EXPECT_EQ(t.sinks[1].arrivals.size(), 1u);
  EXPECT_EQ(t.sinks[2].arrivals.size(), 1u);
  EXPECT_EQ(t.sw.counters().forwarded, 2u);
}

TEST(ForwardingSwitchTest, NeverSendsBackOutOfTheIngressPort) {
  ThreePortSwitch t;
  t.sw.Receive(FrameTo(t.pool, HostIp(1, 0)), 1, t.sim.Now());  // route points back
  t.sw.Receive(FrameTo(t.pool, GroupIp(7), TrafficClass::kParameterPackets), 2, t.sim.Now());
  t.sim.RunUntilIdle();
  EXPECT_EQ(t.sw.counters().no_route, 1u);
  EXPECT_EQ(t.sinks[0].arrivals.size(), 1u);
  EXPECT_EQ(t.sinks[1].arrivals.size(), 1u);
  EXPECT_EQ(t.sinks[2].arrivals.size(), 0u);
  EXPECT_EQ(t.pool.outstanding(), 0u);
}

TEST(ForwardingSwitchTest, MarksCeOnlyAboveTheThresholdAndFramesStayValid) {
  ThreePortSwitch t;
  for (int i = 0; i < 5; ++i) t.sw.Receive(FrameTo(t.pool, HostIp(1, 0)), 0, t.sim.Now());
  // Depths seen: 0, 1, 2 (not marked), 3, 4 (marked).
  EXPECT_EQ(t.sw.counters().ce_marked, 2u);
  t.sim.RunUntilIdle();
  ASSERT_EQ(t.sinks[1].arrivals.size(), 5u);
  for (const auto& a : t.sinks[1].arrivals) EXPECT_EQ(a.decode, wire::DecodeError::kOk);
}

}  // namespace
}  // namespace atp::sim
