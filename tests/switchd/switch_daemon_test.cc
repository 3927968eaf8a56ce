// The atp-switchd core over in-process ports: each port is one end of a
// private loopback "cable" whose other end is a node (a worker or a PS) that
// the test drives with raw frames made by the wire codec, or another switch.
// Three switches hold a job of 2 racks x 2 workers. The clock is a fake;
// every round is PollRound on the test's thread.
#include "switch_emulator/daemon/switch_daemon.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/transport/loopback.h"
#include "gtest/gtest.h"
#include "tests/unit/runtime/affinity_probe.h"

namespace atp::switchd {
namespace {

using transport::Device;
using transport::DeviceAddress;
using transport::EndpointId;
using transport::FrameRef;
using transport::kFrameBytes;
using wire::AtpHeader;
using wire::DecodeError;
using wire::FrameFields;
using wire::Payload;

using Bytes = std::array<uint8_t, kFrameBytes>;

constexpr uint16_t kBase = wire::kDefaultBasePort;
constexpr uint8_t kJob = 1;
constexpr uint8_t kOtherJob = 2;  // not aggregated here: only forwarded
constexpr size_t kAggregators = 64;
constexpr TimeDelta kOrphanTimeout = TimeDelta::FromMilliseconds(10);

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }
DeviceAddress Node(const char* ip) { return {Ip(ip), transport::DefaultMacFor(Ip(ip))}; }

// Cable: a wire with two endpoints, each frame going to the other one
// whatever its destination (a point-to-point link).
class Cable final : public transport::FrameProcessor {
 public:
  transport::WireDecision Process(std::span<uint8_t, kFrameBytes>, EndpointId from, TimePoint,
                                  const transport::LoopbackWire&) override {
    return {transport::WireAction::kSendTo, {&other_[from], 1}};
  }

 private:
  const std::array<EndpointId, 2> other_ = {1, 0};
};

struct Link {
  std::unique_ptr<Cable> cable;
  std::shared_ptr<transport::LoopbackWire> wire;
  std::unique_ptr<Device> switch_side;
  std::unique_ptr<Device> node;
};

Link MakeLink(const DeviceAddress& node, uint32_t queues) {
  Link link;
  link.cable = std::make_unique<Cable>();
  link.wire = transport::LoopbackWire::Create({.processor = link.cable.get()});
  transport::LoopbackEndpointOptions sw;
  sw.address = Node("10.255.0.1");
  sw.device.num_queues = queues;
  transport::LoopbackEndpointOptions n;
  n.address = node;
  n.device.num_queues = queues;
  link.switch_side = *link.wire->AddEndpoint(sw);
  link.node = *link.wire->AddEndpoint(n);
  return link;
}

Payload Values(int32_t base) {
  Payload p{};
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint32_t>(base + static_cast<int32_t>(i));
  return p;
}

// Gradient: worker `index` of rack `rack` (2 x 2), fragment at `position`.
AtpHeader Gradient(uint8_t job, uint32_t queue, uint32_t position, uint16_t aggregator, int rack,
                   int index) {
  AtpHeader h;
  h.job = job;
  h.seq = wire::MakeSeq(queue, position);
  h.bitmap0 = 1u << index;
  h.bitmap1 = 1u << rack;
  h.fan_in0 = 2;
  h.fan_in1 = 2;
  h.aggregator = aggregator;
  return h;
}

AtpHeader Parameter(uint8_t job, uint32_t position, uint16_t aggregator) {
  AtpHeader h;
  h.job = job;
  h.seq = wire::MakeSeq(0, position);
  h.ack = true;
  h.bitmap0 = 0;
  h.bitmap1 = 0;
  h.fan_in0 = 2;
  h.fan_in1 = 2;
  h.aggregator = aggregator;
  return h;
}

Bytes Encode(const DeviceAddress& from, const DeviceAddress& to, const AtpHeader& header,
             const Payload& payload) {
  FrameFields f;
  f.src_ip = from.ipv4;
  f.src_mac = from.mac;
  f.dst_ip = to.ipv4;
  f.dst_mac = to.mac;
  f.header = header;
  Bytes bytes{};
  wire::EncodeFrame(f, payload, kBase, bytes);
  return bytes;
}

// The topology: tor0 (workers w0, w1) and tor1 (w2, w3) aggregate level 1 and
// go up to torps, which aggregates level 2 and holds the PS port:
//
//   w0 w1      w2 w3
//    tor0       tor1        (level 1)
//       \       /
//         torps -- ps       (level 2)
class SwitchDaemonTest : public ::testing::Test {
 protected:
  enum NodeIndex : uint32_t { kW0, kW1, kW2, kW3, kPs, kNodes };
  enum SwitchIndex : uint32_t { kTor0, kTor1, kTorPs, kSwitches };

  void SetUp() override {
    const char* addresses[kNodes] = {"10.1.0.1", "10.1.0.2", "10.1.1.1", "10.1.1.2", "10.1.200.1"};
    for (uint32_t n = 0; n < kNodes; ++n) {
      nodes_[n] = Node(addresses[n]);
      node_links_[n] = MakeLink(nodes_[n], 2);  // gradients below use queues 0 and 1
    }
    for (Link& up : up_links_) up = MakeLink(Node("10.255.0.3"), 2);
    // tor0's fourth port, "probe": a host on the fabric that no route uses.
    probe_link_ = MakeLink(Node("10.1.0.66"), 2);
    const wire::Ipv4Address group = Ip("239.1.0.1");
    for (uint32_t t : {kTor0, kTor1}) {
      const uint32_t first = t == kTor0 ? kW0 : kW2;
      SwitchDaemonOptions options = Options(switch_emulator::JobLevels::kLevel1);
      ASSERT_TRUE(options.host.routes.Add(nodes_[first].ipv4, 32, 0).ok());
      ASSERT_TRUE(options.host.routes.Add(nodes_[first + 1].ipv4, 32, 1).ok());
      ASSERT_TRUE(options.host.routes.Add(Ip("0.0.0.0"), 0, 2).ok());
      ASSERT_TRUE(options.host.multicast.Add(group, {0, 1}).ok());
      ASSERT_TRUE(options.host.multicast.Add(Ip("239.1.0.9"), {0}).ok());
      if (restrict_ingress_) {
        // What atp-switchd derives from `ps: [10.1.200.1]` and the group.
        const uint32_t up[] = {2}, workers[] = {0, 1};
        ASSERT_TRUE(options.host.admission.Restrict(kJob, up, workers).ok());
      }
      std::vector<DaemonPort> ports = {{"w_a", node_links_[first].switch_side.get()},
                                       {"w_b", node_links_[first + 1].switch_side.get()},
                                       {"up", up_links_[t].switch_side.get()}};
      if (t == kTor0) ports.push_back({"probe", probe_link_.switch_side.get()});
      Create(t, std::move(options), std::move(ports));
    }
    SwitchDaemonOptions options = Options(switch_emulator::JobLevels::kLevel2);
    ASSERT_TRUE(options.host.routes.Add(Ip("10.1.0.0"), 24, 0).ok());
    ASSERT_TRUE(options.host.routes.Add(Ip("10.1.1.0"), 24, 1).ok());
    ASSERT_TRUE(options.host.routes.Add(nodes_[kPs].ipv4, 32, 2).ok());
    ASSERT_TRUE(options.host.multicast.Add(group, {0, 1}).ok());
    if (restrict_ingress_) {
      const uint32_t ps[] = {2}, racks[] = {0, 1};
      ASSERT_TRUE(options.host.admission.Restrict(kJob, ps, racks).ok());
    }
    Create(kTorPs, std::move(options),
           {{"r0", up_links_[kTor0].node.get()},
            {"r1", up_links_[kTor1].node.get()},
            {"ps", node_links_[kPs].switch_side.get()}});
  }

  SwitchDaemonOptions Options(switch_emulator::JobLevels levels) {
    SwitchDaemonOptions options;
    options.host.pipeline.aggregator_count = kAggregators;
    options.host.pipeline.orphan_timeout = kOrphanTimeout;
    options.host.pipeline.jobs.push_back(
        {.job = kJob, .levels = levels, .multicast_group = Ip("239.1.0.1").value});
    options.clock = [this] { return now_; };
    return options;
  }

  void Create(uint32_t t, SwitchDaemonOptions options, std::vector<DaemonPort> ports) {
    absl::StatusOr<std::unique_ptr<SwitchDaemon>> daemon =
        SwitchDaemon::Create(std::move(options), std::move(ports));
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    switches_[t] = *std::move(daemon);
  }

  void TearDown() override {
    Drain();
    for (auto& sw : switches_) sw.reset();
    std::vector<Device*> switch_ports;
    for (Link& link : node_links_) switch_ports.push_back(link.switch_side.get());
    switch_ports.push_back(probe_link_.switch_side.get());
    switch_ports.push_back(probe_link_.node.get());
    for (Link& link : up_links_) {
      switch_ports.push_back(link.switch_side.get());
      switch_ports.push_back(link.node.get());
    }
    for (Device* d : switch_ports) {
      if (d == nullptr) continue;
      for (uint32_t q = 0; q < d->num_queues(); ++q) {
        transport::Queue& queue = d->queue(q);
        EXPECT_EQ(queue.Flush(), 0u);
        EXPECT_EQ(queue.rx_pool().free_count(), queue.rx_pool().capacity()) << "a frame leaked";
        EXPECT_EQ(queue.tx_pool().free_count(), queue.tx_pool().capacity()) << "a copy leaked";
      }
    }
  }

  SwitchDaemon& sw(uint32_t t) { return *switches_[t]; }

  // Send: `bytes` from node `n` into its switch port.
  void Send(uint32_t n, const Bytes& bytes) {
    transport::Queue& q = node_links_[n].node->queue(0);
    FrameRef ref;
    ASSERT_EQ(q.tx_pool().AllocBurst({&ref, 1}), 1u);
    std::memcpy(ref.data, bytes.data(), kFrameBytes);
    ref.length = kFrameBytes;
    ASSERT_EQ(q.TxBurst({&ref, 1}), 1u);
    q.Flush();
  }

  // Rounds: three PollRounds of every switch at the current fake time (a
  // frame crosses at most three switches); the frames they received.
  size_t Rounds() {
    size_t received = 0;
    for (int i = 0; i < 3; ++i) {
      for (auto& s : switches_) received += s->PollRound(now_);
    }
    return received;
  }

  // Received: what node `n` got since the last call, all queues.
  std::vector<Bytes> Received(uint32_t n) {
    std::vector<Bytes> got;
    Device& d = *node_links_[n].node;
    for (uint32_t q = 0; q < d.num_queues(); ++q) {
      FrameRef frames[32];
      size_t count;
      while ((count = d.queue(q).RxBurst(frames)) > 0) {
        for (size_t i = 0; i < count; ++i) {
          Bytes b;
          std::memcpy(b.data(), frames[i].data, kFrameBytes);
          got.push_back(b);
        }
        transport::ReleaseFrames({frames, count});
      }
    }
    return got;
  }

  void Drain() {
    for (uint32_t n = 0; n < kNodes; ++n) Received(n);
  }

  // SendFromProbe: `bytes` into tor0's probe port.
  void SendFromProbe(const Bytes& bytes) {
    transport::Queue& q = probe_link_.node->queue(0);
    FrameRef ref;
    ASSERT_EQ(q.tx_pool().AllocBurst({&ref, 1}), 1u);
    std::memcpy(ref.data, bytes.data(), kFrameBytes);
    ref.length = kFrameBytes;
    ASSERT_EQ(q.TxBurst({&ref, 1}), 1u);
    q.Flush();
  }

  size_t TotalTx(uint32_t t) {
    size_t tx = 0;
    for (const PortStats& p : sw(t).Stats().ports) tx += p.counters.tx_frames;
    return tx;
  }

  size_t InUse(uint32_t t) { return sw(t).pipeline().aggregators_in_use(); }

  TimePoint now_ = TimePoint::FromNanoseconds(1'000'000'000);
  std::array<DeviceAddress, kNodes> nodes_;
  std::array<Link, kNodes> node_links_;
  std::array<Link, 2> up_links_;  // switch_side: tor0/tor1 "up"; node: torps r0/r1
  Link probe_link_;               // switch_side: tor0's "probe" (port 3)
  bool restrict_ingress_ = false;  // SwitchDaemonAdmissionTest: job 1's ports restricted
  std::array<std::unique_ptr<SwitchDaemon>, kSwitches> switches_;
};

TEST_F(SwitchDaemonTest, TwoRacksOfTwoAggregateIntoOneFrameToThePs) {
  const DeviceAddress& ps = nodes_[kPs];
  const int rack_of[4] = {0, 0, 1, 1};
  Payload expected{};
  for (uint32_t w = 0; w < 4; ++w) {
    const Payload values = Values(static_cast<int32_t>(100 * (w + 1)));
    for (size_t i = 0; i < expected.size(); ++i) expected[i] += values[i];
    Send(w, Encode(nodes_[w], ps, Gradient(kJob, 1, 7, 5, rack_of[w], static_cast<int>(w % 2)), values));
    Rounds();
    if (w < 3) {
      EXPECT_TRUE(Received(kPs).empty()) << "worker " << w << ": absorbed until the fan-in is reached";
    }
  }
  const std::vector<Bytes> at_ps = Received(kPs);
  ASSERT_EQ(at_ps.size(), 1u);
  FrameFields fields;
  Payload payload;
  ASSERT_EQ(wire::DecodeFrame(at_ps[0], kBase, &fields, &payload), DecodeError::kOk);
  EXPECT_EQ(fields.dst_ip, ps.ipv4);
  EXPECT_EQ(fields.header.job, kJob);
  EXPECT_EQ(fields.header.queue(), 1u);
  EXPECT_TRUE(fields.header.edge) << "a level-2 result";
  EXPECT_EQ(fields.header.bitmap1, 3u);
  EXPECT_EQ(payload, expected);
  for (uint32_t w = 0; w < 4; ++w) EXPECT_TRUE(Received(w).empty());
  for (uint32_t t = 0; t < kSwitches; ++t) {
    EXPECT_EQ(InUse(t), 0u) << "switch " << t;
    const SwitchdStats s = sw(t).Stats();
    EXPECT_EQ(s.pipeline.completed, 1u) << "switch " << t;
    EXPECT_EQ(s.ports[2].counters.tx_frames, 1u) << "one frame up, or to the PS";
  }
  // The result left the PS port on the queue its UDP port names.
  EXPECT_EQ(node_links_[kPs].switch_side->queue(1).stats().tx_frames, 1u);
  EXPECT_EQ(node_links_[kPs].switch_side->queue(0).stats().tx_frames, 0u);
}

TEST_F(SwitchDaemonTest, ParameterPacketReachesEveryWorkerOnce) {
  const Bytes ack = Encode(nodes_[kPs], Node("239.1.0.1"), Parameter(kJob, 7, 5), Values(9));
  Send(kPs, ack);
  EXPECT_EQ(Rounds(), 3u) << "torps, then tor0 and tor1";
  for (uint32_t w = 0; w < 4; ++w) {
    const std::vector<Bytes> got = Received(w);
    ASSERT_EQ(got.size(), 1u) << "worker " << w;
    EXPECT_EQ(got[0], ack) << "a parameter packet is multicast as it came";
  }
  EXPECT_TRUE(Received(kPs).empty()) << "never back out of the ingress port";
  for (uint32_t t = 0; t < kSwitches; ++t) {
    const SwitchdStats s = sw(t).Stats();
    EXPECT_EQ(s.routing.multicast, 1u) << t;
    EXPECT_EQ(s.pipeline.acks, 1u) << t;
    EXPECT_EQ(s.ports[0].counters.tx_copies + s.ports[1].counters.tx_copies, 1u)
        << "one copy and the original";
  }
}

// --- Ingress admission (docs/security.md) ----------------------------------------

// Without an ingress check a parameter packet forged on a port no route uses
// is multicast to the job's workers (ATP-SPEC 4 rule 2 checks no ingress):
// what IngressAdmission exists for.
TEST_F(SwitchDaemonTest, WithoutIngressCheckAForgedParameterPacketReachesTheWorkers) {
  SendFromProbe(Encode(nodes_[kPs], Node("239.1.0.1"), Parameter(kJob, 7, 5), Values(666)));
  Rounds();
  EXPECT_EQ(Received(kW0).size(), 1u);
  EXPECT_EQ(Received(kW1).size(), 1u);
  EXPECT_EQ(sw(kTor0).Stats().ports[3].counters.rx_refused(), 0u);
}

class SwitchDaemonAdmissionTest : public SwitchDaemonTest {
 protected:
  SwitchDaemonAdmissionTest() { restrict_ingress_ = true; }

  // CompleteJob: the four workers' real gradients of fragment (queue 0,
  // `position`) on aggregator `aggregator`; returns the payload the PS got.
  Payload CompleteJob(uint32_t position, uint16_t aggregator, Payload* expected) {
    const int rack_of[4] = {0, 0, 1, 1};
    *expected = Payload{};
    for (uint32_t w = 0; w < 4; ++w) {
      const Payload values = Values(static_cast<int32_t>(10 * (w + 1)));
      for (size_t i = 0; i < expected->size(); ++i) (*expected)[i] += values[i];
      Send(w, Encode(nodes_[w], nodes_[kPs],
                     Gradient(kJob, 0, position, aggregator, rack_of[w], static_cast<int>(w % 2)),
                     values));
      Rounds();
    }
    const std::vector<Bytes> at_ps = Received(kPs);
    EXPECT_EQ(at_ps.size(), 1u);
    FrameFields fields;
    Payload payload{};
    if (at_ps.size() == 1) {
      EXPECT_EQ(wire::DecodeFrame(at_ps[0], kBase, &fields, &payload), DecodeError::kOk);
      EXPECT_EQ(fields.header.bitmap1, 3u) << "both racks, aggregated in the switches";
    }
    return payload;
  }
};

TEST_F(SwitchDaemonAdmissionTest, ForgedParameterPacketsAreRefusedAtTheirIngressPort) {
  // A real contribution holds aggregator 3 for (job 1, seq 0/1): rule 2 would
  // clear it for a parameter packet of that seq.
  Send(kW0, Encode(nodes_[kW0], nodes_[kPs], Gradient(kJob, 0, 1, 3, 0, 0), Values(10)));
  Rounds();
  ASSERT_EQ(InUse(kTor0), 1u);
  const Bytes forged = Encode(nodes_[kPs], Node("239.1.0.1"), Parameter(kJob, 1, 3), Values(666));
  SendFromProbe(forged);  // the port no route uses
  Send(kW1, forged);      // a worker's port, with the PS's addresses as source
  EXPECT_EQ(Rounds(), 2u) << "refused at tor0: nothing goes on";
  for (uint32_t n = 0; n < kNodes; ++n) EXPECT_TRUE(Received(n).empty()) << n;
  SwitchdStats s = sw(kTor0).Stats();
  EXPECT_EQ(s.ports[3].counters.rx_refused_parameter_port, 1u);
  EXPECT_EQ(s.ports[1].counters.rx_refused_parameter_port, 1u);
  EXPECT_EQ(s.ports[0].counters.rx_refused(), 0u);
  EXPECT_EQ(s.pipeline.acks, 0u) << "the pipeline never saw them";
  EXPECT_EQ(InUse(kTor0), 1u) << "the aggregator was not cleared";

  // The job completes exactly, and the PS's real parameter packet passes.
  Send(kW1, Encode(nodes_[kW1], nodes_[kPs], Gradient(kJob, 0, 1, 3, 0, 1), Values(20)));
  for (uint32_t w : {kW2, kW3}) {
    Send(w, Encode(nodes_[w], nodes_[kPs], Gradient(kJob, 0, 1, 3, 1, static_cast<int>(w % 2)),
                   Values(static_cast<int32_t>(10 * (w + 1)))));
  }
  Rounds();
  const std::vector<Bytes> at_ps = Received(kPs);
  ASSERT_EQ(at_ps.size(), 1u);
  FrameFields fields;
  Payload sum;
  ASSERT_EQ(wire::DecodeFrame(at_ps[0], kBase, &fields, &sum), DecodeError::kOk);
  for (size_t i = 0; i < sum.size(); ++i) {
    EXPECT_EQ(sum[i], static_cast<uint32_t>(100 + 4 * static_cast<int32_t>(i))) << i;
  }
  const Bytes ack = Encode(nodes_[kPs], Node("239.1.0.1"), Parameter(kJob, 1, 3), sum);
  Send(kPs, ack);
  Rounds();
  for (uint32_t w = 0; w < 4; ++w) {
    const std::vector<Bytes> got = Received(w);
    ASSERT_EQ(got.size(), 1u) << "worker " << w;
    EXPECT_EQ(got[0], ack);
  }
  for (uint32_t t = 0; t < kSwitches; ++t) EXPECT_EQ(InUse(t), 0u) << t;
}

TEST_F(SwitchDaemonAdmissionTest, ForgedGradientsAreRefusedAtTheirIngressPort) {
  // From the probe: one claiming to be w1, one claiming a whole rack.
  SendFromProbe(Encode(nodes_[kW1], nodes_[kPs], Gradient(kJob, 0, 4, 9, 0, 1), Values(666)));
  AtpHeader whole_rack = Gradient(kJob, 0, 4, 9, 0, 0);
  whole_rack.edge = true;
  whole_rack.bitmap0 = 3;
  SendFromProbe(Encode(nodes_[kW0], nodes_[kPs], whole_rack, Values(666)));
  // From the PS's port, into torps' level-2 aggregator: "rack 0 is complete".
  Send(kPs, Encode(nodes_[kW0], nodes_[kPs], whole_rack, Values(666)));
  Rounds();
  for (uint32_t n = 0; n < kNodes; ++n) EXPECT_TRUE(Received(n).empty()) << n;
  EXPECT_EQ(sw(kTor0).Stats().ports[3].counters.rx_refused_gradient_port, 2u);
  EXPECT_EQ(sw(kTorPs).Stats().ports[2].counters.rx_refused_gradient_port, 1u);
  for (uint32_t t = 0; t < kSwitches; ++t) {
    EXPECT_EQ(InUse(t), 0u) << t;
    EXPECT_EQ(sw(t).Stats().pipeline.packets, 0u) << "switch " << t << ": the pipeline saw none";
  }
  Payload expected;
  EXPECT_EQ(CompleteJob(4, 9, &expected), expected) << "every result exact";
}

TEST_F(SwitchDaemonAdmissionTest, ControlFramesPassLikeTheirKindAndOtherJobsAreNotJudged) {
  // A worker's frame with fp, resend and collision (no ack) travels as a
  // gradient; the PS's with ack as a parameter packet.
  AtpHeader control = Gradient(kJob, 0, 2, 1, 0, 0);
  control.fp = control.resend = control.collision = true;
  Send(kW0, Encode(nodes_[kW0], nodes_[kPs], control, Values(1)));
  AtpHeader control_ack = Parameter(kJob, 2, 1);
  control_ack.fp = control_ack.resend = control_ack.collision = true;
  Send(kPs, Encode(nodes_[kPs], Node("239.1.0.1"), control_ack, Values(2)));
  // Job 2 is restricted nowhere: its frames pass on any port, the probe's too.
  SendFromProbe(Encode(nodes_[kW0], nodes_[kPs], Gradient(kOtherJob, 0, 3, 2, 0, 0), Values(4)));
  Rounds();
  EXPECT_EQ(Received(kPs).size(), 2u) << "the control frame and job 2's gradient";
  for (uint32_t w = 0; w < 4; ++w) EXPECT_EQ(Received(w).size(), 1u) << "worker " << w;
  for (uint32_t t = 0; t < kSwitches; ++t) {
    for (const PortStats& p : sw(t).Stats().ports) EXPECT_EQ(p.counters.rx_refused(), 0u) << p.name;
  }
}

TEST_F(SwitchDaemonTest, MulticastNeverReturnsToTheIngressPort) {
  // A frame of a job not aggregated here, to a group that holds only its
  // ingress port: nowhere to go.
  const AtpHeader h = Parameter(kOtherJob, 1, 1);
  Send(kW0, Encode(nodes_[kW0], Node("239.1.0.9"), h, Values(1)));
  // The same to the job group from w0: only w1 gets it.
  Send(kW0, Encode(nodes_[kW0], Node("239.1.0.1"), h, Values(2)));
  Rounds();
  EXPECT_TRUE(Received(kW0).empty());
  EXPECT_EQ(Received(kW1).size(), 1u);
  const SwitchdStats s = sw(kTor0).Stats();
  EXPECT_EQ(s.routing.no_multicast_ports, 1u);
  EXPECT_EQ(s.routing.multicast, 1u);
  EXPECT_EQ(s.ports[2].counters.tx_frames, 0u) << "nothing up";
}

TEST_F(SwitchDaemonTest, OtherJobsAndUnknownDestinationsAreRoutedOrCounted) {
  const Bytes other = Encode(nodes_[kW0], nodes_[kPs], Gradient(kOtherJob, 0, 3, 2, 0, 0), Values(4));
  Send(kW0, other);
  Send(kW0, Encode(nodes_[kW0], Node("10.9.9.9"), Gradient(kOtherJob, 0, 4, 2, 0, 0), Values(4)));
  Send(kW0, Encode(nodes_[kW0], nodes_[kW0], Gradient(kOtherJob, 0, 5, 2, 0, 0), Values(4)));
  EXPECT_EQ(Rounds(), 5u) << "3 at tor0, 2 of them up to torps";
  const std::vector<Bytes> at_ps = Received(kPs);
  ASSERT_EQ(at_ps.size(), 1u);
  EXPECT_EQ(at_ps[0], other) << "a job not aggregated here is forwarded untouched";
  EXPECT_TRUE(Received(kW0).empty());
  EXPECT_EQ(sw(kTor0).Stats().routing.hairpin, 1u);
  EXPECT_EQ(sw(kTor0).Stats().routing.unroutable, 0u) << "the default route takes 10.9.9.9 up";
  EXPECT_EQ(sw(kTorPs).Stats().routing.unroutable, 1u) << "torps has no default route";
  EXPECT_EQ(sw(kTor0).Stats().pipeline.not_aggregated, 3u);
}

TEST_F(SwitchDaemonTest, GarbageIsCountedAsMalformedAndChangesNothingElse) {
  // One worker's real contribution, so there is state that garbage must not touch.
  Send(kW0, Encode(nodes_[kW0], nodes_[kPs], Gradient(kJob, 0, 1, 3, 0, 0), Values(1)));
  Rounds();
  ASSERT_EQ(InUse(kTor0), 1u);
  const SwitchdStats before = sw(kTor0).Stats();

  Bytes bad_checksum = Encode(nodes_[kW1], nodes_[kPs], Gradient(kJob, 0, 1, 3, 0, 1), Values(1));
  bad_checksum[wire::kIpv4Offset + 10] ^= 0x5A;
  Bytes bad_udp_length = Encode(nodes_[kW1], nodes_[kPs], Gradient(kJob, 0, 1, 3, 0, 1), Values(1));
  bad_udp_length[wire::kUdpOffset + 4] = 0;
  bad_udp_length[wire::kUdpOffset + 5] = 9;
  Send(kW1, bad_checksum);
  Send(kW1, bad_udp_length);
  EXPECT_EQ(Rounds(), 2u);

  for (uint32_t n = 0; n < kNodes; ++n) EXPECT_TRUE(Received(n).empty()) << n;
  const SwitchdStats s = sw(kTor0).Stats();
  EXPECT_EQ(s.pipeline.malformed, before.pipeline.malformed + 2);
  EXPECT_EQ(s.pipeline.malformed_by_reason[static_cast<size_t>(DecodeError::kBadIpv4Checksum)], 1u);
  EXPECT_EQ(s.pipeline.malformed_by_reason[static_cast<size_t>(DecodeError::kBadUdpLength)], 1u);
  EXPECT_EQ(s.ports[1].counters.rx_malformed, 2u);
  EXPECT_EQ(s.pipeline.aggregated, before.pipeline.aggregated);
  EXPECT_EQ(s.aggregators_in_use, 1u);
  EXPECT_EQ(TotalTx(kTor0), 0u);
  EXPECT_EQ(s.routing.unroutable + s.routing.hairpin + s.routing.no_multicast_ports, 0u);
  // The aggregator still completes with the real second contribution.
  Send(kW1, Encode(nodes_[kW1], nodes_[kPs], Gradient(kJob, 0, 1, 3, 0, 1), Values(1)));
  Rounds();
  EXPECT_EQ(InUse(kTor0), 0u);
  EXPECT_EQ(InUse(kTorPs), 1u) << "rack 0 done, level 2 waits for rack 1";
  EXPECT_EQ(TotalTx(kTor0), 1u);
}

TEST_F(SwitchDaemonTest, QuietWorkerPortLeavesOrphansThatTheScanFrees) {
  for (uint16_t agg = 0; agg < 4; ++agg) {
    Send(kW0, Encode(nodes_[kW0], nodes_[kPs], Gradient(kJob, 0, agg, agg, 0, 0), Values(agg)));
  }
  Rounds();
  ASSERT_EQ(InUse(kTor0), 4u);  // w1 never sends: w0's contributions wait

  now_ += kOrphanTimeout / 2;
  Rounds();
  EXPECT_EQ(InUse(kTor0), 4u) << "not yet orphans";

  now_ += kOrphanTimeout;
  // No traffic at all: the idle rounds' scan alone frees them.
  for (int i = 0; i < 100 && InUse(kTor0) > 0; ++i) Rounds();
  EXPECT_EQ(InUse(kTor0), 0u);
  const SwitchdStats s = sw(kTor0).Stats();
  EXPECT_EQ(s.pipeline.orphaned, 4u);
  EXPECT_EQ(s.aggregators_in_use, 0u);
  EXPECT_EQ(TotalTx(kTor0), 0u);
}

TEST_F(SwitchDaemonTest, ThreadedRunForwardsAndStatsComeFromTheDatapathThread) {
  SwitchDaemon& tor0 = sw(kTor0);
  ASSERT_TRUE(tor0.Start().ok());
  EXPECT_FALSE(tor0.Start().ok()) << "one datapath thread";
  const Bytes other = Encode(nodes_[kW0], nodes_[kW1], Gradient(kOtherJob, 0, 3, 2, 0, 0), Values(4));
  Send(kW0, other);
  std::vector<Bytes> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    got = Received(kW1);
    if (got.empty()) std::this_thread::yield();
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], other);
  const SwitchdStats s = tor0.Stats();
  EXPECT_EQ(s.ports[0].counters.rx_frames, 1u);
  EXPECT_EQ(s.ports[1].counters.tx_frames, 1u);
  EXPECT_GT(s.poll_rounds, 0u);
  tor0.Stop();
  tor0.Stop();
  EXPECT_FALSE(tor0.running());
}

// --- A pinned datapath thread ----------------------------------------------------

// OneLinkDaemon: a switch of one port whose datapath thread runs as `polling`
// says, recording the CPUs it may run on from inside it (on_thread_start).
// `daemon` is declared last: it goes first, with its thread, before what
// the thread writes.
struct OneLinkDaemon {
  explicit OneLinkDaemon(const PollingOptions& polling) : link(MakeLink(Node("10.1.0.1"), 1)) {
    SwitchDaemonOptions options;
    options.host.pipeline.aggregator_count = kAggregators;
    options.polling = polling;
    options.on_thread_start = [this] {
      std::lock_guard<std::mutex> lock(mu);
      cpus = host::AllowedCpusOfThisThread();
      seen.notify_all();
    };
    absl::StatusOr<std::unique_ptr<SwitchDaemon>> created =
        SwitchDaemon::Create(std::move(options), {{"a", link.switch_side.get()}});
    EXPECT_TRUE(created.ok()) << created.status();
    if (created.ok()) daemon = *std::move(created);
  }
  // CpusSeen: the datapath thread's CPUs (empty after 10 s without it).
  std::vector<int> CpusSeen() {
    std::unique_lock<std::mutex> lock(mu);
    seen.wait_for(lock, std::chrono::seconds(10), [this] { return cpus.has_value(); });
    return cpus.value_or(std::vector<int>{});
  }

  Link link;
  std::mutex mu;
  std::condition_variable seen;
  std::optional<std::vector<int>> cpus;
  std::unique_ptr<SwitchDaemon> daemon;
};

TEST(SwitchDaemonPinnedTest, TheDatapathThreadRunsOnTheFirstCpuNamed) {
  const std::vector<int> allowed = host::AllowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "one CPU: pinned and unpinned look the same";
  PollingOptions polling;
  polling.cpus = {allowed.back(), allowed.front()};
  OneLinkDaemon sw(polling);
  ASSERT_NE(sw.daemon, nullptr);
  ASSERT_TRUE(sw.daemon->Start().ok());
  EXPECT_EQ(sw.CpusSeen(), std::vector<int>{allowed.back()})
      << "pinned before anything runs on it, on_thread_start included";
  sw.daemon->Stop();
}

TEST(SwitchDaemonPinnedTest, UnpinnedTheThreadMayRunAnywhereTheProcessMay) {
  OneLinkDaemon sw(PollingOptions{});
  ASSERT_NE(sw.daemon, nullptr);
  ASSERT_TRUE(sw.daemon->Start().ok());
  EXPECT_EQ(sw.CpusSeen(), host::AllowedCpus());
  sw.daemon->Stop();
}

TEST(SwitchDaemonPinnedTest, ACpuThisProcessMayNotUseIsRefusedAndNothingRuns) {
  const std::vector<int> allowed = host::AllowedCpus();
  int outside = CPU_SETSIZE - 1;
  while (outside >= 0 && std::find(allowed.begin(), allowed.end(), outside) != allowed.end()) {
    --outside;
  }
  if (outside < 0) GTEST_SKIP() << "this process may run on every CPU id";
  PollingOptions polling;
  polling.cpus = {outside};
  OneLinkDaemon sw(polling);
  ASSERT_NE(sw.daemon, nullptr);
  const absl::Status s = sw.daemon->Start();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(s.message(), absl::StrCat("SwitchDaemonOptions.polling.cpus: CPU ", outside,
                                      " is not one this process may run on (its cpuset: "
                                      "/proc/self/status Cpus_allowed_list)"));
  EXPECT_FALSE(sw.daemon->running());
  std::lock_guard<std::mutex> lock(sw.mu);
  EXPECT_FALSE(sw.cpus.has_value()) << "the thread returned before running anything";
}

// --- A port that refuses frames -------------------------------------------------

// StuckQueue: receives what the test queues up; TxBurst takes at most
// `accept` frames per call (0: a port whose peer stopped reading), and Flush
// reports `held` frames still waiting.
class StuckQueue final : public transport::Queue {
 public:
  StuckQueue() {
    rx_pool_ = *transport::HeapFramePool::Create({.frames = 64});
    tx_pool_ = *transport::HeapFramePool::Create({.frames = 64});
  }
  ~StuckQueue() override { transport::ReleaseFrames(taken_); }

  void Inject(const Bytes& bytes) {
    FrameRef ref;
    ASSERT_TRUE(rx_pool_->Alloc(&ref));
    std::memcpy(ref.data, bytes.data(), kFrameBytes);
    ref.length = kFrameBytes;
    inbox_.push_back(ref);
  }

  uint32_t index() const override { return 0; }
  const transport::QueueCapabilities& capabilities() const override { return caps_; }
  size_t RxBurst(std::span<FrameRef> frames) override {
    size_t n = 0;
    while (n < frames.size() && !inbox_.empty()) {
      frames[n++] = inbox_.front();
      inbox_.pop_front();
    }
    return n;
  }
  size_t TxBurst(std::span<const FrameRef> frames) override {
    const size_t n = std::min<size_t>(frames.size(), accept);
    taken_.insert(taken_.end(), frames.begin(), frames.begin() + static_cast<ptrdiff_t>(n));
    return n;
  }
  size_t TxSegmented(const transport::SegmentationJob&) override { return 0; }
  size_t Flush() override { return held; }
  transport::FramePool& rx_pool() override { return *rx_pool_; }
  transport::FramePool& tx_pool() override { return *tx_pool_; }
  transport::QueueStats stats() const override { return {}; }

  std::vector<FrameRef> taken_;
  uint32_t accept = 0;
  size_t held = 0;

 private:
  transport::QueueCapabilities caps_;
  std::unique_ptr<transport::HeapFramePool> rx_pool_;
  std::unique_ptr<transport::HeapFramePool> tx_pool_;
  std::deque<FrameRef> inbox_;
};

class StuckDevice final : public Device {
 public:
  std::string_view backend() const override { return "test"; }
  const DeviceAddress& address() const override { return address_; }
  uint16_t base_port() const override { return kBase; }
  uint32_t num_queues() const override { return 1; }
  transport::Queue& queue(uint32_t) override { return queue_; }
  StuckQueue queue_;

 private:
  DeviceAddress address_ = Node("10.255.0.1");
};

TEST(SwitchDaemonBackpressureTest, RefusedFramesAreDroppedCountedAndReturned) {
  StuckDevice in, out_a, out_b;
  SwitchDaemonOptions options;
  options.host.pipeline.aggregator_count = kAggregators;
  options.host.pipeline.ecn_threshold = 8;
  options.host.pipeline.jobs.push_back({.job = kJob,
                                   .levels = switch_emulator::JobLevels::kLevel1,
                                   .multicast_group = Ip("239.1.0.1").value});
  ASSERT_TRUE(options.host.routes.Add(Ip("10.1.200.1"), 32, 1).ok());
  ASSERT_TRUE(options.host.multicast.Add(Ip("239.1.0.1"), {1, 2}).ok());
  options.host.tx_attempts = 3;
  options.clock = [] { return TimePoint::FromNanoseconds(1); };
  auto daemon = SwitchDaemon::Create(std::move(options),
                                     {{"in", &in}, {"a", &out_a}, {"b", &out_b}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();

  // Port a refuses everything: the unicast frame and a's multicast copy are
  // dropped; b takes its copy.
  const DeviceAddress w = Node("10.1.0.1");
  in.queue_.Inject(Encode(w, Node("10.1.200.1"), Gradient(kOtherJob, 0, 1, 1, 0, 0), Values(1)));
  in.queue_.Inject(Encode(Node("10.1.200.1"), Node("239.1.0.1"), Parameter(kJob, 1, 1), Values(2)));
  out_b.queue_.accept = 32;
  (*daemon)->PollRound(TimePoint::FromNanoseconds(1));
  SwitchdStats s = (*daemon)->Stats();
  EXPECT_EQ(s.ports[1].counters.tx_dropped_backpressure, 2u);
  EXPECT_EQ(s.ports[1].counters.tx_frames, 0u);
  EXPECT_EQ(s.ports[2].counters.tx_frames, 1u);
  EXPECT_EQ(out_b.queue_.taken_.size(), 1u);

  // ECN: a queue that still holds more than the threshold marks what goes there.
  out_a.queue_.accept = 32;
  out_a.queue_.held = 9;
  (*daemon)->PollRound(TimePoint::FromNanoseconds(1));  // the Flush learns the depth
  in.queue_.Inject(Encode(w, Node("10.1.200.1"), Gradient(kJob, 0, 2, 2, 0, 0), Values(1)));
  AtpHeader single = Gradient(kJob, 0, 2, 3, 0, 0);
  single.fan_in0 = 1;  // completes at once: kToPs toward port a
  in.queue_.Inject(Encode(w, Node("10.1.200.1"), single, Values(1)));
  (*daemon)->PollRound(TimePoint::FromNanoseconds(1));
  ASSERT_EQ(out_a.queue_.taken_.size(), 1u);
  FrameFields fields;
  ASSERT_EQ(wire::DecodeFrame(out_a.queue_.taken_[0].bytes(), kBase, &fields, nullptr), DecodeError::kOk);
  EXPECT_EQ(fields.ip_tos, wire::kTosCe);
  EXPECT_TRUE(fields.header.ecn);
  s = (*daemon)->Stats();
  EXPECT_EQ(s.pipeline.ecn_marked, 2u);
  EXPECT_EQ(s.ports[1].tx_held, 9u);

  // A frame of a job this switch only forwards is marked CE by the host (the
  // pipeline leaves it alone): the PS turns that into the ecn bit.
  in.queue_.Inject(Encode(w, Node("10.1.200.1"), Gradient(kOtherJob, 0, 3, 4, 0, 0), Values(1)));
  (*daemon)->PollRound(TimePoint::FromNanoseconds(1));
  ASSERT_EQ(out_a.queue_.taken_.size(), 2u);
  ASSERT_EQ(wire::DecodeFrame(out_a.queue_.taken_[1].bytes(), kBase, &fields, nullptr), DecodeError::kOk);
  EXPECT_EQ(fields.ip_tos, wire::kTosCe);
  EXPECT_FALSE(fields.header.ecn);  // the ATP bit is the PS's to set
  s = (*daemon)->Stats();
  EXPECT_EQ(s.routing.ce_marked, 1u);
  // Below the threshold nothing is marked.
  out_a.queue_.held = 8;
  (*daemon)->PollRound(TimePoint::FromNanoseconds(1));
  in.queue_.Inject(Encode(w, Node("10.1.200.1"), Gradient(kOtherJob, 0, 4, 5, 0, 0), Values(1)));
  (*daemon)->PollRound(TimePoint::FromNanoseconds(1));
  ASSERT_EQ(out_a.queue_.taken_.size(), 3u);
  ASSERT_EQ(wire::DecodeFrame(out_a.queue_.taken_[2].bytes(), kBase, &fields, nullptr), DecodeError::kOk);
  EXPECT_EQ(fields.ip_tos, wire::kTosEct0);
  EXPECT_EQ((*daemon)->Stats().routing.ce_marked, 1u);

  daemon->reset();
  for (StuckDevice* d : {&in, &out_a, &out_b}) {
    transport::ReleaseFrames(d->queue_.taken_);
    d->queue_.taken_.clear();
  }
  for (StuckDevice* d : {&in, &out_a, &out_b}) {
    EXPECT_EQ(d->queue_.rx_pool().free_count(), d->queue_.rx_pool().capacity());
    EXPECT_EQ(d->queue_.tx_pool().free_count(), d->queue_.tx_pool().capacity());
  }
}

// The host reads a depth once per burst and destination (SwitchHost's
// DepthMemo): frames of one burst to two destinations, one behind a deep
// queue and one behind an empty one, interleaved, are each marked by their
// own egress queue only.
TEST(SwitchDaemonEcnTest, ABurstToTwoDestinationsMarksOnlyTheDeepOnesFrames) {
  StuckDevice in, deep, shallow;
  SwitchDaemonOptions options;
  options.host.pipeline.aggregator_count = kAggregators;
  options.host.pipeline.ecn_threshold = 8;
  ASSERT_TRUE(options.host.routes.Add(Ip("10.1.200.1"), 32, 1).ok());
  ASSERT_TRUE(options.host.routes.Add(Ip("10.1.200.2"), 32, 2).ok());
  options.clock = [] { return TimePoint::FromNanoseconds(1); };
  auto daemon = SwitchDaemon::Create(std::move(options),
                                     {{"in", &in}, {"deep", &deep}, {"shallow", &shallow}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  deep.queue_.accept = 64;
  deep.queue_.held = 9;
  shallow.queue_.accept = 64;
  (*daemon)->PollRound(TimePoint::FromNanoseconds(1));  // the Flush learns the depths
  const DeviceAddress w = Node("10.1.0.1");
  for (uint32_t i = 0; i < 6; ++i) {
    // A job this switch only forwards: the host marks CE past the threshold.
    const DeviceAddress to = Node(i % 2 == 0 ? "10.1.200.1" : "10.1.200.2");
    in.queue_.Inject(Encode(w, to, Gradient(kOtherJob, 0, i, i, 0, 0), Values(1)));
  }
  (*daemon)->PollRound(TimePoint::FromNanoseconds(1));  // one burst of 6
  ASSERT_EQ(deep.queue_.taken_.size(), 3u);
  ASSERT_EQ(shallow.queue_.taken_.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    FrameFields fields;
    ASSERT_EQ(wire::DecodeFrame(deep.queue_.taken_[i].bytes(), kBase, &fields, nullptr),
              DecodeError::kOk);
    EXPECT_EQ(fields.ip_tos, wire::kTosCe) << "deep " << i;
    ASSERT_EQ(wire::DecodeFrame(shallow.queue_.taken_[i].bytes(), kBase, &fields, nullptr),
              DecodeError::kOk);
    EXPECT_EQ(fields.ip_tos, wire::kTosEct0) << "shallow " << i;
  }
  EXPECT_EQ((*daemon)->Stats().routing.ce_marked, 3u);
  daemon->reset();
}

TEST(SwitchDaemonCreateTest, RefusesBadOptions) {
  StuckDevice a;
  SwitchDaemonOptions bad_burst;
  bad_burst.host.max_burst = 0;
  EXPECT_FALSE(SwitchDaemon::Create(std::move(bad_burst), {{"a", &a}}).ok());
  EXPECT_FALSE(SwitchDaemon::Create(SwitchDaemonOptions{}, {}).ok());
  SwitchDaemonOptions bad_route;
  ASSERT_TRUE(bad_route.host.routes.Add(Ip("10.0.0.0"), 8, 3).ok());
  EXPECT_FALSE(SwitchDaemon::Create(std::move(bad_route), {{"a", &a}}).ok());
  SwitchDaemonOptions bad_base;
  bad_base.host.pipeline.base_port = 40000;
  EXPECT_FALSE(SwitchDaemon::Create(std::move(bad_base), {{"a", &a}}).ok());
  SwitchDaemonOptions bad_admission;
  const uint32_t beyond[] = {1};
  ASSERT_TRUE(bad_admission.host.admission.Restrict(1, beyond, {}).ok());
  EXPECT_FALSE(SwitchDaemon::Create(std::move(bad_admission), {{"a", &a}}).ok())
      << "port 1 of a one-port switch";
}

// The daemon's idle thread sleeps on these (SwitchDaemon::Run), so a frame on
// a port that has one wakes it: every queue of every loopback port, in port
// then queue order.
TEST(SwitchHostWaitFdsTest, EveryQueueOfEveryPortThatHasOneIsListed) {
  Link a = MakeLink(Node("10.0.0.1"), 2);
  Link b = MakeLink(Node("10.0.0.2"), 3);
  absl::StatusOr<std::unique_ptr<SwitchHost>> host = SwitchHost::Create(
      SwitchHostOptions{}, {{"a", a.switch_side.get()}, {"b", b.switch_side.get()}});
  ASSERT_TRUE(host.ok()) << host.status();
  std::vector<int> expected;
  for (uint32_t q = 0; q < 2; ++q) expected.push_back(a.switch_side->queue(q).wait_fd());
  for (uint32_t q = 0; q < 3; ++q) expected.push_back(b.switch_side->queue(q).wait_fd());
  for (int fd : expected) EXPECT_GE(fd, 0);
  EXPECT_EQ((*host)->WaitFds(), expected);
}

// The idle scan visits its share of the time since the last one: a daemon
// polling every few microseconds visits an aggregator or two per round, not
// orphan_scan_budget, and a whole pass still takes a quarter of the orphan
// timeout (QuietWorkerPortLeavesOrphansThatTheScanFrees: orphans still go).
TEST(SwitchHostOrphanScanTest, ABudgetInProportionToTheTimeSinceTheLastScan) {
  SwitchHostOptions options;
  options.pipeline.aggregator_count = 4096;
  options.pipeline.orphan_timeout = TimeDelta::FromMilliseconds(8);  // a pass: 2 ms
  options.orphan_scan_budget = 1024;
  absl::StatusOr<std::unique_ptr<SwitchHost>> host = SwitchHost::Create(options, {});
  ASSERT_TRUE(host.ok()) << host.status();
  const SwitchHost& h = **host;
  EXPECT_EQ(h.OrphanScanBudget(TimeDelta::Zero()), 1u) << "at least one";
  EXPECT_EQ(h.OrphanScanBudget(TimeDelta::FromMicroseconds(1)), 3u) << "4096 x 1/2000, up";
  EXPECT_EQ(h.OrphanScanBudget(TimeDelta::FromMicroseconds(250)), 512u);
  EXPECT_EQ(h.OrphanScanBudget(TimeDelta::FromMicroseconds(1000)), 1024u) << "capped";
  EXPECT_EQ(h.OrphanScanBudget(TimeDelta::FromSeconds(1)), 1024u);

  options.orphan_scan_spread = false;  // the simulator's: the budget every time
  host = SwitchHost::Create(options, {});
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ((*host)->OrphanScanBudget(TimeDelta::Zero()), 1024u);
  EXPECT_EQ((*host)->OrphanScanBudget(TimeDelta::FromMicroseconds(1)), 1024u);
}

}  // namespace
}  // namespace atp::switchd
