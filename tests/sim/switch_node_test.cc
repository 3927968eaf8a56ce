// Tests of the simulated switches: routing, multicast, ECN marking
// (sim/atp_switch_node.h: the product's switch host over simulated
// ports).
#include <memory>

#include "gtest/gtest.h"
#include "sim/addressing.h"
#include "sim/atp_switch_node.h"
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

// SwitchNode: an AtpSwitchNode aggregating no job (what the core is),
// ECN threshold `threshold`.
std::unique_ptr<AtpSwitchNode> SwitchNode(Simulator* sim, PacketPool* pool, uint32_t threshold) {
  switch_emulator::PipelineConfig pc;
  pc.aggregator_count = 16;
  pc.ecn_threshold = threshold;
  auto pipeline = switch_emulator::SwitchPipeline::Create(pc);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  return std::make_unique<AtpSwitchNode>("core", sim, pool, *std::move(pipeline),
                                         TimeDelta::FromMilliseconds(1), threshold,
                                         wire::kDefaultBasePort);
}

// A forwarding switch (the switch host, no job) with three ports to three
// collectors. (These were the tests of the simulator's own forwarding switch,
// which the host replaced: same assertions, read from the host's counters.)
struct ThreePortSwitch {
  Simulator sim;
  PacketPool pool;
  Collector sinks[3];
  std::vector<std::unique_ptr<Link>> links;
  std::unique_ptr<AtpSwitchNode> sw = SwitchNode(&sim, &pool, /*threshold=*/2);  // goes first

  ThreePortSwitch() {
    for (int i = 0; i < 3; ++i) {
      links.push_back(std::make_unique<Link>(
          &sim, &pool, LinkConfig{.bandwidth_bps = 10e9, .queue_capacity_packets = 64}, "l"));
      links.back()->Connect(&sinks[i], i);
      sw->AddPort(links.back().get());
    }
    sw->table().AddRoute(HostIp(1, 0), 1);
    sw->table().SetDefaultPort(2);
    sw->table().AddGroupMember(7, 0);
    sw->table().AddGroupMember(7, 1);
    sw->table().AddGroupMember(7, 2);
  }

  switchd::SwitchdStats stats() const { return sw->host().Collect(); }
  uint64_t forwarded() const {
    uint64_t n = 0;
    for (const switchd::PortStats& p : stats().ports) n += p.counters.tx_frames;
    return n;
  }
  uint64_t no_route() const {
    const switchd::RoutingCounters r = stats().routing;
    return r.unroutable + r.hairpin + r.no_multicast_ports;
  }
};

TEST(ForwardingSwitchTest, RoutesUnicastByAddressWithADefault) {
  ThreePortSwitch t;
  t.sw->Receive(FrameTo(t.pool, HostIp(1, 0)), 0, t.sim.Now());
  t.sw->Receive(FrameTo(t.pool, HostIp(9, 9)), 0, t.sim.Now());
  t.sim.RunUntilIdle();
  EXPECT_EQ(t.sinks[0].arrivals.size(), 0u);
  EXPECT_EQ(t.sinks[1].arrivals.size(), 1u);
  EXPECT_EQ(t.sinks[2].arrivals.size(), 1u);
  EXPECT_EQ(t.forwarded(), 2u);
}

TEST(ForwardingSwitchTest, NeverSendsBackOutOfTheIngressPort) {
  ThreePortSwitch t;
  t.sw->Receive(FrameTo(t.pool, HostIp(1, 0)), 1, t.sim.Now());  // route points back
  t.sw->Receive(FrameTo(t.pool, GroupIp(7), TrafficClass::kParameterPackets), 2, t.sim.Now());
  t.sim.RunUntilIdle();
  EXPECT_EQ(t.no_route(), 1u);
  EXPECT_EQ(t.sinks[0].arrivals.size(), 1u);
  EXPECT_EQ(t.sinks[1].arrivals.size(), 1u);
  EXPECT_EQ(t.sinks[2].arrivals.size(), 0u);
  EXPECT_EQ(t.pool.outstanding(), 0u);
}

TEST(ForwardingSwitchTest, MarksCeOnlyAboveTheThresholdAndFramesStayValid) {
  ThreePortSwitch t;
  for (int i = 0; i < 5; ++i) t.sw->Receive(FrameTo(t.pool, HostIp(1, 0)), 0, t.sim.Now());
  // Depths seen: 0, 1, 2 (not marked), 3, 4 (marked).
  EXPECT_EQ(t.stats().routing.ce_marked, 2u);
  t.sim.RunUntilIdle();
  ASSERT_EQ(t.sinks[1].arrivals.size(), 5u);
  for (const auto& a : t.sinks[1].arrivals) EXPECT_EQ(a.decode, wire::DecodeError::kOk);
}

// The ATP switch is atp-switchd's host over simulated ports: a job it does
// not aggregate is routed like any frame and marked CE past the threshold
// (the depth being the egress link's at that frame), by the host.
TEST(AtpSwitchNodeTest, RunsTheSwitchHostAndMarksForwardedFramesPastTheThreshold) {
  Simulator sim;
  PacketPool pool;
  switch_emulator::PipelineConfig pc;
  pc.aggregator_count = 16;
  pc.ecn_threshold = 2;
  auto pipeline = switch_emulator::SwitchPipeline::Create(pc);
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  Collector sinks[3];
  std::vector<std::unique_ptr<Link>> links;
  {
    AtpSwitchNode sw("tor", &sim, &pool, *std::move(pipeline), TimeDelta::FromMilliseconds(1),
                     /*ecn_threshold=*/2, wire::kDefaultBasePort);
    for (int i = 0; i < 3; ++i) {
      links.push_back(std::make_unique<Link>(
          &sim, &pool, LinkConfig{.bandwidth_bps = 10e9, .queue_capacity_packets = 64}, "l"));
      links.back()->Connect(&sinks[i], i);
      sw.AddPort(links.back().get());
    }
    sw.table().AddRoute(HostIp(1, 0), 1);
    sw.table().SetDefaultPort(2);
    for (int i = 0; i < 5; ++i) sw.Receive(FrameTo(pool, HostIp(1, 0)), 0, sim.Now());
    sw.Receive(FrameTo(pool, HostIp(1, 0)), 1, sim.Now());  // the route points back: dropped
    const switchd::SwitchdStats stats = sw.host().Collect();
    // Depths seen: 0, 1, 2 (not marked), 3, 4 (marked).
    EXPECT_EQ(stats.routing.ce_marked, 2u);
    EXPECT_EQ(stats.routing.hairpin, 1u);
    EXPECT_EQ(stats.ports[1].counters.tx_frames, 5u);
    EXPECT_EQ(stats.pipeline.not_aggregated, 6u);  // no job here
    sim.RunUntilIdle();
  }
  ASSERT_EQ(sinks[1].arrivals.size(), 5u);
  int ce = 0;
  for (const auto& a : sinks[1].arrivals) {
    EXPECT_EQ(a.decode, wire::DecodeError::kOk);
    ce += a.ip_tos == wire::kTosCe;
  }
  EXPECT_EQ(ce, 2);
  EXPECT_EQ(pool.outstanding(), 0u);
}

}  // namespace
}  // namespace atp::sim
