// EmbeddedParameterServer: a framework hands it frames (or bare UDP
// messages) from its own threads and gets the parameter packets back through
// a FrameSink: one per worker with unicast delivery, one to the group with
// multicast; rejects are reported and counted. The workers join first, as a
// Worker does (tests/unit/runtime/join_frame.h).
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "atp/parameter_server.h"
#include "atp/wire.h"
#include "gtest/gtest.h"
#include "tests/unit/runtime/join_frame.h"

namespace atp {
namespace {

transport::DeviceAddress Address(const char* ip) {
  const wire::Ipv4Address a = *wire::Ipv4Address::Parse(ip);
  return {a, transport::DefaultMacFor(a)};
}

class CollectingSink : public FrameSink {
 public:
  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override {
    std::lock_guard<std::mutex> lock(mu);
    frames.emplace_back(frame.begin(), frame.end());
  }
  std::mutex mu;
  std::vector<std::vector<uint8_t>> frames;
};

ParameterServerOptions TwoWorkerJob(ParameterDelivery delivery, uint32_t shards = 1) {
  ParameterServerOptions o;
  ParameterServerJobOptions job;
  job.job_id = 5;
  job.layout = RackLayout::Uniform(1, 2);
  job.delivery = delivery;
  job.workers = {Address("10.0.0.1"), Address("10.0.0.2")};
  job.multicast_group = {*wire::Ipv4Address::Parse("239.1.0.5"), {}};
  o.jobs.push_back(job);
  o.slots = 16;
  o.io_threads = shards;
  return o;
}

// Gradient: worker `w`'s fragment at (queue, position), all values `value`.
std::vector<uint8_t> Gradient(int w, uint32_t queue, uint32_t position, int32_t value,
                              uint8_t ip_tos = wire::kTosEct0) {
  wire::FrameFields f;
  f.ip_tos = ip_tos;
  f.src_ip = Address(w == 0 ? "10.0.0.1" : "10.0.0.2").ipv4;
  f.dst_ip = Address("10.0.0.100").ipv4;
  f.header.job = 5;
  f.header.seq = wire::MakeSeq(queue, position);
  f.header.bitmap0 = 1u << w;
  f.header.bitmap1 = 1;
  f.header.fan_in0 = 2;
  f.header.fan_in1 = 1;
  wire::Payload payload;
  payload.fill(static_cast<uint32_t>(value));
  std::vector<uint8_t> frame(wire::kFrameBytes);
  wire::EncodeFrame(f, payload, wire::kDefaultBasePort,
                    std::span<uint8_t, wire::kFrameBytes>(frame.data(), wire::kFrameBytes));
  return frame;
}

// JoinQueues: both workers of TwoWorkerJob join queues [0, queues).
void JoinQueues(EmbeddedParameterServer& ps, uint32_t queues, FrameSink& sink) {
  for (uint32_t q = 0; q < queues; ++q) {
    for (int w = 0; w < 2; ++w) {
      const auto join = testing::JoinFrame(5, w, 2, q, /*slots=*/16,
                                           Address(w == 0 ? "10.0.0.1" : "10.0.0.2"),
                                           Address("10.0.0.100"));
      EXPECT_EQ(ps.HandleFrame(join, sink), wire::DecodeError::kOk);
    }
  }
}

TEST(EmbeddedPsTest, UnicastSendsTheSumToEveryWorker) {
  auto ps = EmbeddedParameterServer::Create(TwoWorkerJob(ParameterDelivery::kUnicast),
                                            Address("10.0.0.100"));
  ASSERT_TRUE(ps.ok()) << ps.status();
  CollectingSink sink;
  JoinQueues(**ps, /*queues=*/1, sink);
  EXPECT_EQ((*ps)->HandleFrame(Gradient(0, 0, 0, 7), sink), wire::DecodeError::kOk);
  EXPECT_TRUE(sink.frames.empty());
  EXPECT_EQ((*ps)->HandleFrame(Gradient(1, 0, 0, 35), sink), wire::DecodeError::kOk);
  ASSERT_EQ(sink.frames.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    wire::FrameFields f;
    wire::Payload p;
    ASSERT_EQ(wire::DecodeFrame(sink.frames[i], wire::kDefaultBasePort, &f, &p),
              wire::DecodeError::kOk);
    EXPECT_TRUE(f.header.ack);
    EXPECT_EQ(f.src_ip, Address("10.0.0.100").ipv4);
    EXPECT_EQ(f.dst_ip, Address(i == 0 ? "10.0.0.1" : "10.0.0.2").ipv4);
    EXPECT_EQ(f.dst_mac, Address(i == 0 ? "10.0.0.1" : "10.0.0.2").mac);
    EXPECT_EQ(static_cast<int32_t>(p[0]), 42);
    EXPECT_EQ(static_cast<int32_t>(p[61]), 42);
  }
  const ParameterServerStats s = (*ps)->stats();
  EXPECT_EQ(s.frames_received, 2u + 2u);  // the joins and the gradients
  EXPECT_EQ(s.contributions, 2u);
  EXPECT_EQ(s.completed, 1u);
  EXPECT_EQ(s.frames_sent, 2u);
}

// A sink that lends its own buffers (FrameSink::FrameBuffer): the PS writes
// each frame there and sends that buffer, with the same bytes a copying sink
// gets.
class LendingSink : public FrameSink {
 public:
  uint8_t* FrameBuffer() override {
    ++lent;
    buffers.emplace_back(wire::kFrameBytes, 0xEE);  // no byte left unwritten
    return buffers.back().data();
  }
  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override {
    in_place += frame.data() == buffers.back().data() ? 1 : 0;
    frames.emplace_back(frame.begin(), frame.end());
  }
  int lent = 0;
  int in_place = 0;
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<std::vector<uint8_t>> frames;
};

TEST(EmbeddedPsTest, ASinkThatLendsBuffersGetsTheFramesWrittenInThem) {
  auto lending = EmbeddedParameterServer::Create(TwoWorkerJob(ParameterDelivery::kUnicast),
                                                 Address("10.0.0.100"));
  auto copying = EmbeddedParameterServer::Create(TwoWorkerJob(ParameterDelivery::kUnicast),
                                                 Address("10.0.0.100"));
  ASSERT_TRUE(lending.ok() && copying.ok());
  LendingSink lent;
  CollectingSink copied;
  JoinQueues(**lending, /*queues=*/1, lent);
  JoinQueues(**copying, /*queues=*/1, copied);
  lent.frames.clear();
  copied.frames.clear();
  const int lent_before = lent.lent;
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ((*lending)->HandleFrame(Gradient(w, 0, 0, 7 + 28 * w), lent), wire::DecodeError::kOk);
    EXPECT_EQ((*copying)->HandleFrame(Gradient(w, 0, 0, 7 + 28 * w), copied),
              wire::DecodeError::kOk);
  }
  ASSERT_EQ(lent.frames.size(), 2u);
  EXPECT_EQ(lent.lent - lent_before, 2);
  EXPECT_EQ(lent.in_place, lent.lent) << "every frame was sent in the buffer lent for it";
  EXPECT_EQ(lent.frames, copied.frames);
}

// A gradient a switch marked CE while only forwarding it (ATP-SPEC 7): the
// PS carries the mark into the ATP ecn bit of the parameter packet, where the
// workers' congestion control reads it.
TEST(EmbeddedPsTest, CongestionExperiencedBecomesTheEcnBit) {
  auto ps = EmbeddedParameterServer::Create(TwoWorkerJob(ParameterDelivery::kMulticast),
                                            Address("10.0.0.100"));
  ASSERT_TRUE(ps.ok()) << ps.status();
  CollectingSink sink;
  JoinQueues(**ps, /*queues=*/1, sink);
  EXPECT_EQ((*ps)->HandleFrame(Gradient(0, 0, 0, 7), sink), wire::DecodeError::kOk);
  EXPECT_EQ((*ps)->HandleFrame(Gradient(1, 0, 0, 35, wire::kTosCe), sink), wire::DecodeError::kOk);
  // Unmarked: no ecn.
  EXPECT_EQ((*ps)->HandleFrame(Gradient(0, 0, 1, 1), sink), wire::DecodeError::kOk);
  EXPECT_EQ((*ps)->HandleFrame(Gradient(1, 0, 1, 2), sink), wire::DecodeError::kOk);
  ASSERT_EQ(sink.frames.size(), 2u);
  wire::FrameFields f;
  ASSERT_EQ(wire::DecodeFrame(sink.frames[0], wire::kDefaultBasePort, &f, nullptr),
            wire::DecodeError::kOk);
  EXPECT_TRUE(f.header.ecn);
  ASSERT_EQ(wire::DecodeFrame(sink.frames[1], wire::kDefaultBasePort, &f, nullptr),
            wire::DecodeError::kOk);
  EXPECT_FALSE(f.header.ecn);
  EXPECT_EQ((*ps)->stats().ce_to_ecn, 1u);
}

TEST(EmbeddedPsTest, MulticastSendsOneFrameToTheGroup) {
  auto ps = EmbeddedParameterServer::Create(TwoWorkerJob(ParameterDelivery::kMulticast),
                                            Address("10.0.0.100"));
  ASSERT_TRUE(ps.ok()) << ps.status();
  CollectingSink sink;
  JoinQueues(**ps, /*queues=*/2, sink);
  (*ps)->HandleFrame(Gradient(0, 1, 0, 1), sink);
  (*ps)->HandleFrame(Gradient(1, 1, 0, 2), sink);
  ASSERT_EQ(sink.frames.size(), 1u);
  wire::FrameFields f;
  ASSERT_EQ(wire::DecodeFrame(sink.frames[0], wire::kDefaultBasePort, &f, nullptr),
            wire::DecodeError::kOk);
  EXPECT_EQ(f.dst_ip, *wire::Ipv4Address::Parse("239.1.0.5"));
  EXPECT_EQ(f.header.queue(), 1u);
}

TEST(EmbeddedPsTest, BareUdpMessagesWorkLikeFrames) {
  auto ps = EmbeddedParameterServer::Create(TwoWorkerJob(ParameterDelivery::kUnicast),
                                            Address("10.0.0.100"));
  ASSERT_TRUE(ps.ok());
  CollectingSink sink;
  JoinQueues(**ps, /*queues=*/1, sink);
  for (int w = 0; w < 2; ++w) {
    const std::vector<uint8_t> frame = Gradient(w, 0, 0, 3);
    EXPECT_EQ((*ps)->HandleMessage(std::span(frame).subspan(wire::kAtpOffset), sink),
              wire::DecodeError::kOk);
  }
  EXPECT_EQ(sink.frames.size(), 2u);
}

TEST(EmbeddedPsTest, MalformedFramesAreRejectedAndCounted) {
  auto ps = EmbeddedParameterServer::Create(TwoWorkerJob(ParameterDelivery::kUnicast),
                                            Address("10.0.0.100"));
  ASSERT_TRUE(ps.ok());
  CollectingSink sink;
  std::vector<uint8_t> bad = Gradient(0, 0, 0, 1);
  bad[wire::kIpv4Offset + 10] ^= 0xFF;  // IPv4 checksum
  EXPECT_EQ((*ps)->HandleFrame(bad, sink), wire::DecodeError::kBadIpv4Checksum);
  EXPECT_EQ((*ps)->HandleFrame(std::span(bad).first(100), sink), wire::DecodeError::kShortFrame);
  EXPECT_TRUE(sink.frames.empty());
  EXPECT_EQ((*ps)->stats().decode_errors, 2u);
  EXPECT_EQ((*ps)->stats().gradients, 0u);
}

TEST(EmbeddedPsTest, FrameworkThreadsFeedShardsConcurrently) {
  // Four framework threads, each owning one queue's traffic, two lock shards.
  auto ps = EmbeddedParameterServer::Create(TwoWorkerJob(ParameterDelivery::kUnicast, 2),
                                            Address("10.0.0.100"));
  ASSERT_TRUE(ps.ok());
  CollectingSink sink;
  JoinQueues(**ps, /*queues=*/4, sink);
  constexpr uint32_t kPositions = 16;  // one window of slots: no resends needed
  std::vector<std::thread> threads;
  for (uint32_t q = 0; q < 4; ++q) {
    threads.emplace_back([&, q] {
      for (uint32_t p = 0; p < kPositions; ++p) {
        for (int w = 0; w < 2; ++w) (*ps)->HandleFrame(Gradient(w, q, p, 1), sink);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sink.frames.size(), 4u * kPositions * 2);
  EXPECT_EQ((*ps)->stats().completed, 4u * kPositions);
}

// A worker dies after its fragment: the PS drops the partial sum once the
// orphan timeout has passed without a frame (ATP-SPEC invariant 5), counts it,
// and the seq can still complete from the workers' resends afterwards.
TEST(EmbeddedPsTest, OrphanedPartialSumsAreReleasedAfterTheTimeout) {
  ParameterServerOptions options = TwoWorkerJob(ParameterDelivery::kUnicast, /*shards=*/2);
  options.orphan_timeout = absl::Milliseconds(20);
  auto ps = EmbeddedParameterServer::Create(options, Address("10.0.0.100"));
  ASSERT_TRUE(ps.ok()) << ps.status();
  CollectingSink sink;
  JoinQueues(**ps, /*queues=*/2, sink);
  const absl::Time sent = absl::Now();  // before the PS stamps the frames
  ASSERT_EQ((*ps)->HandleFrame(Gradient(0, 0, 0, 7), sink), wire::DecodeError::kOk);
  ASSERT_EQ((*ps)->HandleFrame(Gradient(0, 1, 0, 7), sink), wire::DecodeError::kOk);
  size_t released = 0;
  const absl::Time deadline = sent + absl::Seconds(10);
  while (released < 2 && absl::Now() < deadline) {
    const size_t n = (*ps)->ReleaseOrphans();
    // Never before the timeout.
    if (n > 0) {
      EXPECT_GE(absl::Now() - sent, absl::Milliseconds(20));
    }
    released += n;
    if (released < 2) std::this_thread::yield();
  }
  EXPECT_EQ(released, 2u);
  EXPECT_EQ((*ps)->stats().orphans_released, 2u);
  EXPECT_EQ((*ps)->ReleaseOrphans(), 0u);
  EXPECT_TRUE(sink.frames.empty());
  // Both workers resend: the sum is exact (worker 0's first copy was dropped).
  ASSERT_EQ((*ps)->HandleFrame(Gradient(0, 0, 0, 7), sink), wire::DecodeError::kOk);
  ASSERT_EQ((*ps)->HandleFrame(Gradient(1, 0, 0, 35), sink), wire::DecodeError::kOk);
  ASSERT_EQ(sink.frames.size(), 2u);
  wire::FrameFields f;
  wire::Payload p;
  ASSERT_EQ(wire::DecodeFrame(sink.frames[0], wire::kDefaultBasePort, &f, &p),
            wire::DecodeError::kOk);
  EXPECT_EQ(static_cast<int32_t>(p[0]), 42);
  EXPECT_EQ((*ps)->stats().duplicates, 0u);
}

}  // namespace
}  // namespace atp
