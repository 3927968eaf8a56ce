// The hosts' source check (lib/host/source_admission.h, docs/security.md):
// alone, then in a worker queue's loop (a parameter packet forged from
// another source is refused and counted, the result stays exact) and in the
// embedded PS (a gradient forged from a non-worker is refused and counted,
// the sum stays exact).
#include "lib/host/source_admission.h"

#include <array>
#include <memory>
#include <vector>

#include "atp/parameter_server.h"
#include "atp/quantize.h"
#include "gtest/gtest.h"
#include "lib/host/worker_config.h"
#include "lib/host/worker_io_loop.h"
#include "testbed/reflector_queue.h"
#include "tests/unit/runtime/join_frame.h"

namespace atp::host {
namespace {

using Frame = std::array<uint8_t, wire::kFrameBytes>;

transport::DeviceAddress Address(const char* ip) {
  const wire::Ipv4Address a = *wire::Ipv4Address::Parse(ip);
  return {a, transport::DefaultMacFor(a)};
}

Frame FrameFrom(const transport::DeviceAddress& from, const transport::DeviceAddress& to,
                bool ack) {
  wire::FrameFields f;
  f.src_ip = from.ipv4;
  f.src_mac = from.mac;
  f.dst_ip = to.ipv4;
  f.dst_mac = to.mac;
  f.header.job = 1;
  f.header.ack = ack;
  f.header.bitmap0 = 1;
  f.header.bitmap1 = 1;
  Frame frame{};
  wire::EncodeFrame(f, wire::Payload{}, wire::kDefaultBasePort, frame);
  return frame;
}

TEST(SourceAdmissionTest, OneSourceByIpv4AndOptionallyMac) {
  const transport::DeviceAddress ps = Address("10.1.200.1");
  const transport::DeviceAddress worker = Address("10.1.0.1");
  const transport::DeviceAddress sources[] = {ps};
  const SourceAdmission ip_only = SourceAdmission::Only(sources, SourceCheck::kIpv4);
  EXPECT_TRUE(ip_only.checks());
  EXPECT_TRUE(ip_only.Admits(FrameFrom(ps, worker, true)));
  EXPECT_FALSE(ip_only.Admits(FrameFrom(worker, worker, true)));
  transport::DeviceAddress spoofed_ip = worker;
  spoofed_ip.ipv4 = ps.ipv4;  // the PS's IPv4 from the worker's MAC
  EXPECT_TRUE(ip_only.Admits(FrameFrom(spoofed_ip, worker, true)));
  const SourceAdmission with_mac = SourceAdmission::Only(sources, SourceCheck::kIpv4AndMac);
  EXPECT_TRUE(with_mac.Admits(FrameFrom(ps, worker, true)));
  EXPECT_FALSE(with_mac.Admits(FrameFrom(spoofed_ip, worker, true)));
  // The decoded form agrees.
  wire::FrameFields fields;
  wire::Payload payload;
  ASSERT_EQ(wire::DecodeFrame(FrameFrom(spoofed_ip, worker, true), wire::kDefaultBasePort, &fields,
                              &payload),
            wire::DecodeError::kOk);
  EXPECT_TRUE(ip_only.Admits(fields));
  EXPECT_FALSE(with_mac.Admits(fields));
  // Off, or no source named: everything.
  EXPECT_FALSE(SourceAdmission::Only(sources, SourceCheck::kOff).checks());
  EXPECT_TRUE(SourceAdmission::Only(sources, SourceCheck::kOff).Admits(FrameFrom(worker, ps, false)));
  EXPECT_TRUE(SourceAdmission::Only({}, SourceCheck::kIpv4).Admits(FrameFrom(worker, ps, false)));
  EXPECT_TRUE(SourceAdmission().Admits(FrameFrom(worker, ps, false)));
}

TEST(SourceAdmissionTest, ManySourcesAreSearchedExactly) {
  // 40 workers 10.1.r.i, given out of order and one twice.
  std::vector<transport::DeviceAddress> workers;
  for (int k = 39; k >= 0; --k) {
    const wire::Ipv4Address ip{0x0A010000u | (uint32_t(k / 8) << 8) | uint32_t(k % 8 + 1)};
    workers.push_back({ip, transport::DefaultMacFor(ip)});
  }
  workers.push_back(workers[3]);
  const SourceAdmission a = SourceAdmission::Only(workers, SourceCheck::kIpv4AndMac);
  const transport::DeviceAddress ps = Address("10.1.200.1");
  for (const transport::DeviceAddress& w : workers) {
    EXPECT_TRUE(a.Admits(FrameFrom(w, ps, false))) << w.ipv4.ToString();
    for (const uint32_t near : {w.ipv4.value - 1, w.ipv4.value + 1}) {
      const transport::DeviceAddress other{{near}, transport::DefaultMacFor({near})};
      const bool listed = std::any_of(workers.begin(), workers.end(),
                                      [&](const auto& x) { return x.ipv4.value == near; });
      EXPECT_EQ(a.Admits(FrameFrom(other, ps, false)), listed) << other.ipv4.ToString();
    }
  }
  EXPECT_FALSE(a.Admits(FrameFrom(ps, ps, false)));
}

constexpr TimePoint kT0 = TimePoint::FromNanoseconds(1'000'000'000);

TEST(SourceAdmissionTest, WorkerRefusesAParameterPacketNotFromItsPs) {
  testbed::ReflectorQueue queue(0, testbed::ReflectorQueue::Mode::kHold);
  WorkerOptions o;
  o.job.job_id = 1;
  o.job.layout = RackLayout::Uniform(1, 1);
  o.job.slots = 64;
  o.job.initial_window = 16;
  o.parameter_servers.push_back(Address("10.1.200.1"));
  WorkerIoLoopConfig config;
  config.self = Address("10.1.0.1");
  config.ps = o.parameter_servers[0];
  config.max_burst = 8;
  absl::StatusOr<std::unique_ptr<WorkerIoLoop>> loop =
      WorkerIoLoop::Create(config, ToWorkerQueueConfig(o, 0), queue);
  ASSERT_TRUE(loop.ok()) << loop.status();

  std::vector<float> in(62 * 2);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.01f * static_cast<float>(i);  // inside the int32 range at scale 1e8
  std::vector<float> out(in.size(), -1.0f);
  auto op = std::make_shared<internal::OpState>(1, 1);
  PieceRequest piece;
  piece.op = op;
  piece.input = in;
  piece.output = out;
  piece.fragments = 2;
  (*loop)->Submit(piece);
  (*loop)->Step(kT0);
  ASSERT_EQ(queue.held().size(), 2u);

  // A well-formed parameter packet for fragment 0 with other values, from a
  // host that is not the PS (once from the worker's own address).
  for (const char* forger : {"10.1.0.66", "10.1.0.1"}) {
    wire::FrameFields f;
    wire::Payload payload;
    ASSERT_EQ(wire::DecodeFrame(queue.held()[0], wire::kDefaultBasePort, &f, &payload),
              wire::DecodeError::kOk);
    f.header.ack = true;
    f.src_ip = Address(forger).ipv4;
    f.src_mac = Address(forger).mac;
    f.dst_ip = config.self.ipv4;
    payload.fill(0x7777);
    Frame forged{};
    wire::EncodeFrame(f, payload, wire::kDefaultBasePort, forged);
    ASSERT_TRUE(queue.InjectRx(forged));
  }
  (*loop)->Step(kT0 + TimeDelta::FromMicroseconds(10));
  (*loop)->Publish();
  EXPECT_EQ((*loop)->statistics().source_refused, 2u);
  EXPECT_EQ((*loop)->statistics().parameter_packets, 0u);
  EXPECT_FALSE(op->done());

  // The PS's real answers (the reflector answers from the PS's address).
  queue.ReleaseHeld();
  TimePoint now = kT0 + TimeDelta::FromMicroseconds(20);
  for (int i = 0; i < 1000 && !op->done(); ++i) {
    (*loop)->Step(now);
    now += TimeDelta::FromMicroseconds(10);
  }
  ASSERT_TRUE(op->done());
  std::vector<int32_t> q(in.size());
  Quantize(in, o.job.scale, q);
  std::vector<float> expected(in.size());
  Dequantize(q, o.job.scale, expected);
  EXPECT_EQ(out, expected);
  (*loop)->Publish();
  EXPECT_EQ((*loop)->statistics().source_refused, 2u);
}

class CollectingSink : public FrameSink {
 public:
  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override {
    frames.emplace_back();
    std::copy(frame.begin(), frame.end(), frames.back().begin());
  }
  std::vector<Frame> frames;
};

TEST(SourceAdmissionTest, PsRefusesAGradientNotFromTheJobsWorkers) {
  ParameterServerOptions o;
  ParameterServerJobOptions job;
  job.job_id = 1;
  job.layout = RackLayout::Uniform(1, 2);
  job.delivery = ParameterDelivery::kMulticast;
  job.multicast_group = {*wire::Ipv4Address::Parse("239.1.0.1"), {}};
  job.gradient_sources = {Address("10.1.0.1"), Address("10.1.0.2")};
  o.jobs.push_back(job);
  o.slots = 16;
  const transport::DeviceAddress ps = Address("10.1.200.1");
  auto server = EmbeddedParameterServer::Create(o, ps);
  ASSERT_TRUE(server.ok()) << server.status();
  const auto gradient = [&](const char* from, uint32_t bitmap0, uint32_t value) {
    wire::FrameFields f;
    f.src_ip = Address(from).ipv4;
    f.dst_ip = ps.ipv4;
    f.header.job = 1;
    f.header.seq = wire::MakeSeq(0, 0);
    f.header.bitmap0 = bitmap0;
    f.header.bitmap1 = 1;
    f.header.fan_in0 = 2;
    f.header.fan_in1 = 1;
    wire::Payload payload;
    payload.fill(value);
    Frame frame{};
    wire::EncodeFrame(f, payload, wire::kDefaultBasePort, frame);
    return frame;
  };
  CollectingSink sink;
  // The workers join first, as Workers do (the PS then sends parameter
  // packets only: tests/unit/runtime/join_frame.h).
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ((*server)->HandleFrame(testing::JoinFrame(1, w, 2, /*queue=*/0, o.slots,
                                                        Address(w == 0 ? "10.1.0.1" : "10.1.0.2"),
                                                        ps),
                                     sink),
              wire::DecodeError::kOk);
  }
  // "Both workers are in": the whole rack, from a host that is no worker.
  EXPECT_EQ((*server)->HandleFrame(gradient("10.1.0.66", 3, 1000), sink), wire::DecodeError::kOk);
  EXPECT_TRUE(sink.frames.empty()) << "nothing completed";
  EXPECT_EQ((*server)->stats().source_refused, 1u);
  EXPECT_EQ((*server)->stats().gradients, 0u) << "the engine never saw it";
  EXPECT_EQ((*server)->HandleFrame(gradient("10.1.0.1", 1, 3), sink), wire::DecodeError::kOk);
  EXPECT_EQ((*server)->HandleFrame(gradient("10.1.0.2", 2, 4), sink), wire::DecodeError::kOk);
  ASSERT_EQ(sink.frames.size(), 1u);
  wire::FrameFields f;
  wire::Payload sum;
  ASSERT_EQ(wire::DecodeFrame(sink.frames[0], wire::kDefaultBasePort, &f, &sum),
            wire::DecodeError::kOk);
  for (uint32_t v : sum) EXPECT_EQ(v, 7u);
  EXPECT_EQ((*server)->stats().source_refused, 1u);
}

}  // namespace
}  // namespace atp::host
