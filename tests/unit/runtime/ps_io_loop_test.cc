// PsIoLoop's transmit path: on a queue that offloads segmentation, runs of
// parameter packets to one destination leave as segmentation jobs, and the
// frames the workers receive are byte for byte and in order what the TxBurst
// path sends (multicast and unicast, with headers that break runs). The
// workers join first, as a Worker does, so the PS sends parameter packets
// only (it asks for joins on a queue not every worker joined).
#include <cstdint>
#include <memory>
#include <vector>

#include "atp/parameter_server.h"
#include "atp/transport.h"
#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/host/ps_io_loop.h"
#include "lib/host/ps_shard.h"
#include "testbed/reflector_queue.h"
#include "tests/unit/runtime/join_frame.h"

namespace atp::host {
namespace {

using Frame = testbed::ReflectorQueue::Frame;

transport::DeviceAddress Address(const char* ip) {
  const wire::Ipv4Address a = *wire::Ipv4Address::Parse(ip);
  return {a, transport::DefaultMacFor(a)};
}

constexpr uint8_t kJob = 3;

// Gradient: the whole contribution of a one-worker job at (queue 0,
// `position`): it completes at the PS at once. `ecn` marks it (the parameter
// packet carries the mark, so its header differs from its neighbours').
Frame Gradient(uint32_t position, bool ecn) {
  wire::FrameFields f;
  f.src_ip = Address("10.0.0.1").ipv4;
  f.src_mac = Address("10.0.0.1").mac;
  f.dst_ip = Address("10.0.0.100").ipv4;
  f.dst_mac = Address("10.0.0.100").mac;
  f.header.job = kJob;
  f.header.seq = wire::MakeSeq(0, position);
  f.header.bitmap0 = 1;
  f.header.bitmap1 = 1;
  f.header.fan_in0 = 1;
  f.header.fan_in1 = 1;
  f.header.ecn = ecn;
  f.header.aggregator = static_cast<uint16_t>(position * 7);
  wire::Payload payload;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = position * 1000 + static_cast<uint32_t>(i);
  Frame frame;
  wire::EncodeFrame(f, payload, wire::kDefaultBasePort, frame);
  return frame;
}

struct Sent {
  std::vector<Frame> frames;
  transport::QueueStats stats;
  ParameterServerStats ps;
};

// Serve: a PS of job kJob (one rack of `workers` workers, delivered as
// `delivery`) receives `gradients` in bursts of 32 and sends to a queue that
// holds what it sends and declares `segmentation`.
Sent Serve(const std::vector<Frame>& gradients, ParameterDelivery delivery, int workers,
           transport::TxSegmentation segmentation) {
  ParameterServerOptions options;
  ParameterServerJobOptions job;
  job.job_id = kJob;
  job.layout = RackLayout::Uniform(1, workers);
  job.delivery = delivery;
  if (delivery == ParameterDelivery::kMulticast) {
    job.multicast_group = Address("239.1.0.3");
  } else {
    for (int w = 0; w < workers; ++w) {
      job.workers.push_back(Address(w == 0 ? "10.0.0.1" : "10.0.0.2"));
    }
  }
  options.jobs.push_back(job);
  options.gradient_source_check = SourceCheck::kOff;
  testbed::ReflectorQueue queue(0, testbed::ReflectorQueue::Mode::kHold, /*capacity=*/4096,
                                segmentation);
  for (int w = 0; w < workers; ++w) {
    EXPECT_TRUE(queue.InjectRx(testing::JoinFrame(kJob, w, workers, /*queue=*/0, options.slots,
                                                  Address("10.0.0.1"), Address("10.0.0.100"))));
  }
  for (const Frame& g : gradients) EXPECT_TRUE(queue.InjectRx(g));
  auto shard = PsShard::Create(options, 0, Address("10.0.0.100"));
  EXPECT_TRUE(shard.ok()) << shard.status();
  PsIoLoop loop(std::move(*shard), {&queue}, wire::kDefaultBasePort, options.max_burst);
  TimePoint now = TimePoint::FromNanoseconds(1);
  while (queue.rx_waiting() > 0) {
    loop.Step(now);
    now += TimeDelta::FromMicroseconds(1);
  }
  loop.Step(now);
  loop.Publish();
  return {{queue.held().begin(), queue.held().end()}, queue.stats(), loop.statistics()};
}

std::vector<Frame> Gradients(size_t n, size_t ecn_every) {
  std::vector<Frame> out;
  for (size_t p = 0; p < n; ++p) {
    out.push_back(Gradient(static_cast<uint32_t>(p), ecn_every != 0 && p % ecn_every == 3));
  }
  return out;
}

TEST(PsIoLoopTest, OffloadedMulticastIsSegmentationJobsOfTheSameFrames) {
  const std::vector<Frame> gradients = Gradients(200, 0);
  const Sent plain = Serve(gradients, ParameterDelivery::kMulticast, 1,
                           transport::TxSegmentation::kSoftware);
  const Sent offload = Serve(gradients, ParameterDelivery::kMulticast, 1,
                             transport::TxSegmentation::kKernelGso);
  ASSERT_EQ(plain.frames.size(), gradients.size());
  EXPECT_EQ(offload.frames, plain.frames);
  EXPECT_EQ(plain.stats.tx_segmentation_jobs, 0u);
  // One job per receive burst of 32 (the first: the join and 31 gradients;
  // the last: 201 - 6 x 32 = 9 gradients).
  EXPECT_EQ(offload.stats.tx_segmentation_jobs, 7u);
  EXPECT_EQ(offload.stats.tx_offloaded_segments, gradients.size());
  EXPECT_EQ(offload.ps.frames_sent, gradients.size());
  EXPECT_EQ(offload.ps.tx_dropped, 0u);
  // Each one is the parameter packet of its gradient, to the group.
  wire::FrameFields fields;
  ASSERT_EQ(wire::DecodeFrame(offload.frames[77], wire::kDefaultBasePort, &fields, nullptr),
            wire::DecodeError::kOk);
  EXPECT_TRUE(fields.header.ack);
  EXPECT_EQ(fields.header.position(), 77u);
  EXPECT_EQ(fields.header.aggregator, 77u * 7);
  EXPECT_EQ(fields.dst_ip, Address("239.1.0.3").ipv4);
}

TEST(PsIoLoopTest, HeadersThatDifferBreakRunsAndKeepTheOrder) {
  // Every 5th parameter packet carries an ECN mark: runs end before and
  // after it, and a marked packet alone goes through TxBurst, between jobs.
  const std::vector<Frame> gradients = Gradients(100, 5);
  const Sent plain = Serve(gradients, ParameterDelivery::kMulticast, 1,
                           transport::TxSegmentation::kSoftware);
  const Sent offload = Serve(gradients, ParameterDelivery::kMulticast, 1,
                             transport::TxSegmentation::kKernelGso);
  ASSERT_EQ(plain.frames.size(), gradients.size());
  EXPECT_EQ(offload.frames, plain.frames);
  EXPECT_GT(offload.stats.tx_segmentation_jobs, 4u);
  EXPECT_LT(offload.stats.tx_offloaded_segments, gradients.size());
  EXPECT_GT(offload.stats.tx_offloaded_segments, gradients.size() / 2);
}

TEST(PsIoLoopTest, UnicastToEachWorkerStaysInOrder) {
  // Two workers: each parameter packet goes to worker 0, then worker 1, so no
  // two consecutive frames share a destination: no job, the same frames.
  std::vector<Frame> gradients;
  for (uint32_t p = 0; p < 64; ++p) {
    for (int w = 0; w < 2; ++w) {
      Frame g = Gradient(p, false);
      wire::FrameFields f;
      wire::Payload payload;
      ASSERT_EQ(wire::DecodeFrame(g, wire::kDefaultBasePort, &f, &payload), wire::DecodeError::kOk);
      f.header.bitmap0 = 1u << w;
      f.header.fan_in0 = 2;
      wire::EncodeFrame(f, payload, wire::kDefaultBasePort, g);
      gradients.push_back(g);
    }
  }
  const Sent plain = Serve(gradients, ParameterDelivery::kUnicast, 2,
                           transport::TxSegmentation::kSoftware);
  const Sent offload = Serve(gradients, ParameterDelivery::kUnicast, 2,
                             transport::TxSegmentation::kKernelGso);
  ASSERT_EQ(plain.frames.size(), 128u);  // 64 completions x 2 workers
  EXPECT_EQ(offload.frames, plain.frames);
  EXPECT_EQ(offload.stats.tx_segmentation_jobs, 0u);
}

// A worker that holds a parameter packet finds its completion in the PS's
// statistics, read from any thread: each transmit's frames are already
// counted when the queue takes them (a snapshot published at the end of the
// step would lag the frames by one step; a Python test read completed 0).
TEST(PsIoLoopTest, StatisticsCountEveryCompletionBeforeItsParameterPacketLeaves) {
  for (const transport::TxSegmentation segmentation :
       {transport::TxSegmentation::kSoftware, transport::TxSegmentation::kKernelGso}) {
    const std::vector<Frame> gradients = Gradients(200, 0);
    ParameterServerOptions options;
    ParameterServerJobOptions job;
    job.job_id = kJob;
    job.layout = RackLayout::Uniform(1, 1);
    job.delivery = ParameterDelivery::kMulticast;
    job.multicast_group = Address("239.1.0.3");
    options.jobs.push_back(job);
    options.gradient_source_check = SourceCheck::kOff;
    testbed::ReflectorQueue queue(0, testbed::ReflectorQueue::Mode::kHold, 4096, segmentation);
    ASSERT_TRUE(queue.InjectRx(testing::JoinFrame(kJob, 0, 1, /*queue=*/0, options.slots,
                                                  Address("10.0.0.1"), Address("10.0.0.100"))));
    for (const Frame& g : gradients) ASSERT_TRUE(queue.InjectRx(g));
    auto shard = PsShard::Create(options, 0, Address("10.0.0.100"));
    ASSERT_TRUE(shard.ok()) << shard.status();
    PsIoLoop loop(std::move(*shard), {&queue}, wire::kDefaultBasePort, options.max_burst);
    // Per transmit: the completions published as it began, and the frames
    // the queue held by then (those of the transmits before it).
    std::vector<uint64_t> published;
    std::vector<size_t> held_before;
    queue.OnTransmit([&] {
      published.push_back(loop.statistics().completed);
      held_before.push_back(queue.held().size());
    });
    TimePoint now = TimePoint::FromNanoseconds(1);
    while (queue.rx_waiting() > 0) {
      loop.Step(now);
      now += TimeDelta::FromMicroseconds(1);
    }
    ASSERT_EQ(queue.held().size(), gradients.size());  // one parameter packet each
    ASSERT_GT(published.size(), 1u);
    held_before.push_back(queue.held().size());
    for (size_t i = 0; i < published.size(); ++i) {
      // Every frame held once transmit i was done was counted as it began.
      EXPECT_GE(published[i], held_before[i + 1]) << "transmit " << i;
    }
  }
}

}  // namespace
}  // namespace atp::host
