// A port's egress rate (switch_emulator/daemon/port_rate.h): frames leave at
// the configured rate, the FIFO is the queue depth Flush reports, a full FIFO
// refuses, and a switch host marks what it sends into a backlog past its ECN
// threshold. Loopback cables, a fake clock.
#include "switch_emulator/daemon/port_rate.h"

#include <array>
#include <memory>
#include <vector>

#include "atp/transport/loopback.h"
#include "gtest/gtest.h"
#include "switch_emulator/daemon/switch_daemon.h"

namespace atp::switchd {
namespace {

using transport::DeviceAddress;
using transport::EndpointId;
using transport::FrameRef;
using transport::kFrameBytes;

constexpr uint16_t kBase = wire::kDefaultBasePort;
// At 10 Mb/s a 306-byte frame takes 244.8 us.
constexpr uint64_t kRateMbps = 10;
constexpr TimeDelta kFrameTime = TimeDelta::FromNanoseconds(244'800);

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }
DeviceAddress Node(const char* ip) { return {Ip(ip), transport::DefaultMacFor(Ip(ip))}; }

// Cable: each frame goes to the other endpoint, whatever its destination.
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
  std::unique_ptr<Cable> cable = std::make_unique<Cable>();
  std::shared_ptr<transport::LoopbackWire> wire;
  std::unique_ptr<transport::Device> switch_side;
  std::unique_ptr<transport::Device> node;
};

Link MakeLink(const DeviceAddress& node) {
  Link link;
  link.wire = transport::LoopbackWire::Create({.processor = link.cable.get()});
  transport::LoopbackEndpointOptions sw;
  sw.address = Node("10.255.0.1");
  transport::LoopbackEndpointOptions n;
  n.address = node;
  link.switch_side = *link.wire->AddEndpoint(sw);
  link.node = *link.wire->AddEndpoint(n);
  return link;
}

// Gradient of `job` from worker 10.1.0.1 to the PS 10.1.200.1, ECN-capable.
std::array<uint8_t, kFrameBytes> Gradient(uint8_t job, uint32_t position) {
  wire::FrameFields f;
  f.src_ip = Ip("10.1.0.1");
  f.src_mac = transport::DefaultMacFor(f.src_ip);
  f.dst_ip = Ip("10.1.200.1");
  f.dst_mac = transport::DefaultMacFor(f.dst_ip);
  f.header.job = job;
  f.header.seq = wire::MakeSeq(0, position);
  f.header.bitmap0 = 1;
  f.header.bitmap1 = 1;
  f.header.fan_in0 = 2;
  f.header.fan_in1 = 1;
  f.header.aggregator = static_cast<uint16_t>(position);
  std::array<uint8_t, kFrameBytes> bytes{};
  wire::EncodeFrame(f, wire::Payload{}, kBase, bytes);
  return bytes;
}

// Send: n gradients into `queue` from its own TX pool; returns how many it took.
size_t Send(transport::Queue& queue, size_t n, uint32_t first_position) {
  std::vector<FrameRef> frames(n);
  EXPECT_EQ(queue.tx_pool().AllocBurst(frames), n);
  for (size_t i = 0; i < n; ++i) {
    const auto bytes = Gradient(/*job=*/9, first_position + static_cast<uint32_t>(i));
    std::copy(bytes.begin(), bytes.end(), frames[i].data);
    frames[i].length = kFrameBytes;
  }
  const size_t taken = queue.TxBurst(frames);
  transport::ReleaseFrames({frames.data() + taken, n - taken});
  return taken;
}

// Receive: every frame waiting at `device`'s queue 0, released; their TOS bytes.
std::vector<uint8_t> Receive(transport::Device& device) {
  std::vector<uint8_t> tos;
  std::array<FrameRef, 32> rx;
  for (size_t n; (n = device.queue(0).RxBurst(rx)) > 0;) {
    for (size_t i = 0; i < n; ++i) tos.push_back(rx[i].data[wire::kIpv4Offset + 1]);
    transport::ReleaseFrames({rx.data(), n});
  }
  return tos;
}

TEST(PortRateTest, FramesLeaveAtTheRateAndTheBacklogIsTheQueueDepth) {
  Link link = MakeLink(Node("10.1.200.1"));
  TimePoint now = TimePoint::FromNanoseconds(0);
  RateLimitedDevice port(std::move(link.switch_side), {kRateMbps, 8}, [&] { return now; });
  transport::Queue& q = port.queue(0);

  EXPECT_EQ(Send(q, 5, 0), 5u);
  EXPECT_EQ(q.Flush(), 4u) << "the first frame starts at once, the others wait for the wire";
  EXPECT_EQ(Receive(*link.node).size(), 1u);

  now = now + kFrameTime;  // the second frame's turn
  EXPECT_EQ(q.Flush(), 3u);
  EXPECT_EQ(Receive(*link.node).size(), 1u);

  now = now + kFrameTime * 3;
  EXPECT_EQ(q.Flush(), 0u);
  EXPECT_EQ(Receive(*link.node).size(), 3u);

  // A full FIFO refuses (the switch host counts that as a tail drop).
  EXPECT_EQ(Send(q, 12, 100), 8u);
  EXPECT_EQ(q.Flush(), 8u) << "the wire is still busy with the last frame";
  EXPECT_EQ(Receive(*link.node).size(), 0u);

  // After an idle spell the port makes up at most kCatchUp of sending.
  now = now + TimeDelta::FromSeconds(1);
  const size_t catch_up = static_cast<size_t>(
      RateLimitedDevice::kCatchUp.ToNanoseconds() / kFrameTime.ToNanoseconds()) + 1;
  ASSERT_LT(catch_up, 8u);
  EXPECT_EQ(q.Flush(), 8u - catch_up);
  EXPECT_EQ(Receive(*link.node).size(), catch_up);
  // Frames still held go back to their pool with the device (ASan/LSan would see a leak).
}

TEST(PortRateTest, SwitchMarksCeWhenTheRateLimitedEgressHoldsMoreThanTheThreshold) {
  Link in = MakeLink(Node("10.1.0.1"));
  Link out = MakeLink(Node("10.1.200.1"));
  TimePoint now = TimePoint::FromNanoseconds(0);
  auto paced = std::make_unique<RateLimitedDevice>(std::move(out.switch_side),
                                                   RateLimit{kRateMbps, 64}, [&] { return now; });
  SwitchDaemonOptions options;
  options.host.pipeline.aggregator_count = 16;
  options.host.pipeline.ecn_threshold = 4;
  ASSERT_TRUE(options.host.routes.Add(Ip("10.1.200.1"), 32, 1).ok());
  options.clock = [&] { return now; };
  auto daemon = SwitchDaemon::Create(std::move(options),
                                     {{"in", in.switch_side.get()}, {"ps", paced.get()}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();

  // Job 9 is not aggregated here: the host forwards it and marks CE itself.
  EXPECT_EQ(Send(in.node->queue(0), 10, 0), 10u);
  in.node->queue(0).Flush();
  (*daemon)->PollRound(now);  // the egress was empty: nothing marked; it now holds 9
  in.node->queue(0).Flush();
  EXPECT_EQ(Send(in.node->queue(0), 1, 10), 1u);
  in.node->queue(0).Flush();
  (*daemon)->PollRound(now);  // 9 > 4: marked

  for (int i = 0; i < 20; ++i) {
    now = now + kFrameTime;
    (*daemon)->PollRound(now);
  }
  const std::vector<uint8_t> tos = Receive(*out.node);
  ASSERT_EQ(tos.size(), 11u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(tos[i], wire::kTosEct0) << "frame " << i;
  EXPECT_EQ(tos[10], wire::kTosCe);
  const SwitchdStats s = (*daemon)->Stats();
  EXPECT_EQ(s.routing.ce_marked, 1u);
  EXPECT_EQ(s.ports[1].tx_held, 0u);
  daemon->reset();
}

}  // namespace
}  // namespace atp::switchd
