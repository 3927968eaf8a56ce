// tests/transport/conformance_test.cc: the rules every transport backend
// keeps (atp/transport.h), run over every backend compiled in. A backend that
// cannot open here is skipped with the reason its harness gives.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "atp/transport.h"
#include "atp/transport/segmentation.h"
#include "gtest/gtest.h"
#include "tests/transport/backend_harness.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport::testing {
namespace {

class TransportConformance : public ::testing::TestWithParam<std::string> {
 protected:
  // OpenPair: opens the backend's pair, or skips the test with the reason.
  bool OpenPair(const DeviceOptions& options = DeviceOptions{}) {
    harness_ = MakeHarness(GetParam());
    if (harness_ == nullptr) {
      ADD_FAILURE() << "no harness for " << GetParam();
      return false;
    }
    absl::StatusOr<DevicePair> pair = harness_->Open(options);
    if (!pair.ok()) {
      skip_reason_ = std::string(pair.status().message());
      return false;
    }
    pair_ = *std::move(pair);
    return true;
  }

  Device& a() { return *pair_.a; }
  Device& b() { return *pair_.b; }

  FrameBytes FrameAtoB(uint32_t seq, uint32_t seed) {
    return MakeFrame(a().address(), b().address(), FrameSpec{seq, seed}, a().base_port());
  }

  void TearDown() override {
    // Devices go before the wire/harness they may depend on.
    pair_.a.reset();
    pair_.b.reset();
  }

  std::unique_ptr<BackendHarness> harness_;
  DevicePair pair_;
  std::string skip_reason_;
};

#define ATP_OPEN_OR_SKIP(...)                                         \
  if (!OpenPair(__VA_ARGS__)) {                                       \
    if (HasFailure()) return;                                         \
    GTEST_SKIP() << GetParam() << " cannot open: " << skip_reason_;   \
  }

TEST_P(TransportConformance, DeclaresSaneCapabilities) {
  ATP_OPEN_OR_SKIP();
  // The harness name is the backend's, or the backend's with a variant
  // ("kernel_udp_whole_frame").
  EXPECT_TRUE(GetParam().starts_with(a().backend())) << a().backend() << " for " << GetParam();
  for (Device* device : {&a(), &b()}) {
    for (uint32_t q = 0; q < device->num_queues(); ++q) {
      const QueueCapabilities& caps = device->queue(q).capabilities();
      EXPECT_EQ(device->queue(q).index(), q);
      EXPECT_GE(caps.mtu, kFrameBytes);
      EXPECT_GE(caps.max_burst, 1u);
      EXPECT_GE(caps.max_offload_segments, 1u);
      EXPECT_EQ(caps.headroom, device->queue(q).rx_pool().headroom());
      EXPECT_GE(device->queue(q).tx_pool().frame_capacity(), kFrameBytes);
    }
  }
}

TEST_P(TransportConformance, RxBurstReturnsAtOnceWhenNothingWaits) {
  ATP_OPEN_OR_SKIP();
  FrameRef frames[32];
  EXPECT_EQ(b().queue(0).RxBurst(frames), 0u);
  EXPECT_EQ(b().queue(0).RxBurst({frames, 0}), 0u);
  EXPECT_TRUE(PoolsAreFull(b()));
}

TEST_P(TransportConformance, BurstsArriveByteExactAndInOrder) {
  ATP_OPEN_OR_SKIP();
  std::vector<FrameBytes> sent;
  for (uint32_t i = 0; i < 100; ++i) sent.push_back(FrameAtoB(wire::MakeSeq(0, i), i));
  Collector rx(b());
  ASSERT_EQ(SendAll(a().queue(0), sent, &rx), sent.size());
  ASSERT_TRUE(rx.PollUntil(sent.size())) << "got " << rx.total() << " of " << sent.size();
  rx.Settle();
  ASSERT_EQ(rx.on_queue(0).size(), sent.size()) << "no frame twice, none extra";
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(rx.on_queue(0)[i], sent[i]) << "frame " << i << " differs or is out of order";
  }
  EXPECT_EQ(a().queue(0).stats().tx_frames, sent.size());
  EXPECT_EQ(b().queue(0).stats().rx_frames, sent.size());
}

TEST_P(TransportConformance, CongestionExperiencedMarkSurvives) {
  ATP_OPEN_OR_SKIP();
  FrameSpec spec{wire::MakeSeq(0, 5), 9};
  spec.ip_tos = wire::kTosCe;
  const FrameBytes ce = MakeFrame(a().address(), b().address(), spec, a().base_port());
  const FrameBytes ect = FrameAtoB(wire::MakeSeq(0, 6), 10);
  Collector rx(b());
  ASSERT_EQ(SendAll(a().queue(0), {ce, ect}, &rx), 2u);
  ASSERT_TRUE(rx.PollUntil(2));
  ASSERT_EQ(rx.on_queue(0).size(), 2u);
  EXPECT_EQ(rx.on_queue(0)[0], ce) << "TOS CE and its checksum arrive as sent";
  EXPECT_EQ(rx.on_queue(0)[1], ect);
  EXPECT_EQ(wire::ValidateFrame(rx.on_queue(0)[0], b().base_port()), wire::DecodeError::kOk);
}

// ExpectedSegment: segment i of a job built independently of the
// segmentation code: wire::EncodeFrame of the fields the rule says.
FrameBytes ExpectedSegment(const DeviceAddress& src, const DeviceAddress& dst, uint32_t seq0,
                           size_t i, uint16_t aggregator, uint32_t seed, uint16_t base_port) {
  const uint32_t position = (wire::PositionOfSeq(seq0) + static_cast<uint32_t>(i)) &
                            wire::kPositionMask;
  FrameSpec spec{wire::MakeSeq(wire::QueueOfSeq(seq0), position), seed, aggregator};
  return MakeFrame(src, dst, spec, base_port);
}

TEST_P(TransportConformance, SegmentationJobArrivesAsKByteExactFrames) {
  DeviceOptions options;
  options.num_queues = 4;
  ATP_OPEN_OR_SKIP(options);
  constexpr size_t kSegments = 40;
  // Starts 5 before the end of the 20-bit position space: the position wraps,
  // the queue bits (2) and so the UDP port do not.
  const uint32_t seq0 = wire::MakeSeq(2, wire::kPositionMask - 4);
  std::vector<wire::Payload> payloads;
  std::vector<std::array<uint8_t, wire::kPayloadBytes>> payload_bytes(kSegments);
  std::vector<const uint8_t*> pointers;
  std::vector<uint16_t> aggregators;
  for (size_t i = 0; i < kSegments; ++i) {
    wire::EncodePayload(MakePayload(static_cast<uint32_t>(100 + i)), payload_bytes[i]);
    pointers.push_back(payload_bytes[i].data());
    aggregators.push_back(static_cast<uint16_t>(1000 + 37 * i));
  }
  const FrameBytes first = MakeFrame(a().address(), b().address(),
                                     FrameSpec{seq0, 0, aggregators[0]}, a().base_port());
  SegmentationJob job = SegmentationJob::FromFrame(first, pointers, aggregators);

  Collector rx(b());
  ASSERT_TRUE(SendSegmented(a().queue(1), job, &rx));
  ASSERT_TRUE(rx.PollUntil(kSegments));
  rx.Settle();
  ASSERT_EQ(rx.on_queue(2).size(), kSegments) << "every segment on the queue of its port";
  for (size_t i = 0; i < kSegments; ++i) {
    EXPECT_EQ(rx.on_queue(2)[i], ExpectedSegment(a().address(), b().address(), seq0, i,
                                                 aggregators[i], static_cast<uint32_t>(100 + i),
                                                 a().base_port()))
        << "segment " << i;
  }
  const QueueStats stats = a().queue(1).stats();
  EXPECT_EQ(stats.tx_frames, kSegments);
  EXPECT_GE(stats.tx_segmentation_jobs, 1u);
  if (a().queue(1).capabilities().tx_segmentation != TxSegmentation::kSoftware) {
    EXPECT_EQ(stats.tx_offloaded_segments, kSegments) << "40 segments fit offload operations";
  }
}

TEST_P(TransportConformance, SegmentationJobWithPayloadsInPlaceArrivesTheSame) {
  ATP_OPEN_OR_SKIP();
  constexpr size_t kSegments = 70;  // more than one GSO send
  std::vector<uint8_t> messages(kSegments * wire::kMessageBytes, 0xEE);  // headers: garbage
  std::vector<uint16_t> aggregators;
  for (size_t i = 0; i < kSegments; ++i) {
    wire::EncodePayload(MakePayload(static_cast<uint32_t>(7 + i)),
                        std::span<uint8_t, wire::kPayloadBytes>(
                            &messages[i * wire::kMessageBytes + wire::kAtpHeaderBytes],
                            wire::kPayloadBytes));
    aggregators.push_back(static_cast<uint16_t>(3 * i));
  }
  const uint32_t seq0 = wire::MakeSeq(0, 77);
  const FrameBytes first = MakeFrame(a().address(), b().address(),
                                     FrameSpec{seq0, 0, aggregators[0]}, a().base_port());
  SegmentationJob job = SegmentationJob::FromMessages(first, messages, aggregators);
  ASSERT_EQ(job.size(), kSegments);
  Collector rx(b());
  ASSERT_TRUE(SendSegmented(a().queue(0), job, &rx));
  ASSERT_TRUE(rx.PollUntil(kSegments)) << "got " << rx.total();
  ASSERT_EQ(rx.on_queue(0).size(), kSegments);
  for (size_t i = 0; i < kSegments; ++i) {
    EXPECT_EQ(rx.on_queue(0)[i], ExpectedSegment(a().address(), b().address(), seq0, i,
                                                 aggregators[i], static_cast<uint32_t>(7 + i),
                                                 a().base_port()))
        << "segment " << i;
  }
}

TEST_P(TransportConformance, LongSegmentationJobWithoutIndicesUsesTheTemplateIndex) {
  ATP_OPEN_OR_SKIP();
  constexpr size_t kSegments = 150;  // more than one GSO send (64) and one burst
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  wire::EncodePayload(MakePayload(5), payload);
  std::vector<const uint8_t*> pointers(kSegments, payload.data());
  const uint32_t seq0 = wire::MakeSeq(0, 1000);
  const FrameBytes first =
      MakeFrame(a().address(), b().address(), FrameSpec{seq0, 5, 99}, a().base_port());
  SegmentationJob job = SegmentationJob::FromFrame(first, pointers);
  Collector rx(b());
  ASSERT_TRUE(SendSegmented(a().queue(0), job, &rx));
  ASSERT_TRUE(rx.PollUntil(kSegments)) << "got " << rx.total();
  ASSERT_EQ(rx.on_queue(0).size(), kSegments);
  for (size_t i = 0; i < kSegments; ++i) {
    EXPECT_EQ(rx.on_queue(0)[i], ExpectedSegment(a().address(), b().address(), seq0, i, 99, 5,
                                                 a().base_port()))
        << "segment " << i;
  }
}

TEST_P(TransportConformance, SteeringPutsEachFrameOnTheQueueItsPortNames) {
  DeviceOptions options;
  options.num_queues = 4;
  ATP_OPEN_OR_SKIP(options);
  std::vector<FrameBytes> sent;
  for (uint32_t i = 0; i < 64; ++i) sent.push_back(FrameAtoB(wire::MakeSeq(i % 4, i), i));
  Collector rx(b());
  // Sent from two different queues of A: steering depends on the frame only.
  const std::vector<FrameBytes> first_half(sent.begin(), sent.begin() + 32);
  const std::vector<FrameBytes> second_half(sent.begin() + 32, sent.end());
  ASSERT_EQ(SendAll(a().queue(0), first_half, &rx), 32u);
  ASSERT_EQ(SendAll(a().queue(3), second_half, &rx), 32u);
  ASSERT_TRUE(rx.PollUntil(sent.size()));
  rx.Settle();
  for (uint32_t q = 0; q < 4; ++q) {
    std::vector<FrameBytes> want;
    for (const FrameBytes& f : sent) {
      if (wire::QueueOfSeq(f[wire::kAtpOffset + 1] << 16) == q) want.push_back(f);
    }
    ASSERT_EQ(rx.on_queue(q).size(), 16u) << "queue " << q;
    EXPECT_EQ(rx.on_queue(q), want) << "queue " << q << " got another queue's frames";
    EXPECT_EQ(b().queue(q).stats().rx_frames, 16u);
  }
}

TEST_P(TransportConformance, FullTransmitRingReturnsFewerAndLosesNothing) {
  DeviceOptions options;
  options.rx_ring_frames = 64;
  options.tx_ring_frames = 64;
  options.rx_pool_frames = 256;
  options.tx_pool_frames = 256;
  ATP_OPEN_OR_SKIP(options);
  if (std::string reason = harness_->NoBackpressureReason(); !reason.empty()) {
    GTEST_SKIP() << reason;
  }
  Queue& tx = a().queue(0);
  // B does not drain: send until the queue takes fewer than offered.
  std::vector<FrameBytes> taken;
  bool pushed_back = false;
  for (uint32_t round = 0; round < 64 && !pushed_back; ++round) {
    FrameRef burst[16];
    const size_t n = tx.tx_pool().AllocBurst(burst);
    ASSERT_EQ(n, 16u) << "the TX pool outlasts both rings";
    std::vector<FrameBytes> offered;
    for (size_t i = 0; i < n; ++i) {
      offered.push_back(FrameAtoB(wire::MakeSeq(0, round * 16 + static_cast<uint32_t>(i)), round));
      std::memcpy(burst[i].data, offered.back().data(), kFrameBytes);
      burst[i].length = kFrameBytes;
    }
    const size_t sent = tx.TxBurst({burst, n});
    taken.insert(taken.end(), offered.begin(), offered.begin() + static_cast<ptrdiff_t>(sent));
    if (sent < n) {
      pushed_back = true;
      // What was not taken is still the caller's, byte for byte.
      for (size_t i = sent; i < n; ++i) {
        EXPECT_EQ(std::memcmp(burst[i].data, offered[i].data(), kFrameBytes), 0);
      }
      ReleaseFrames({burst + sent, n - sent});
    }
  }
  ASSERT_TRUE(pushed_back) << "the queue took " << taken.size() << " frames without pushing back";
  EXPECT_GE(tx.stats().tx_backpressure, 1u);
  EXPECT_GT(tx.Flush(), 0u) << "frames wait at the sender while the receiver is full";

  // Now B drains; A flushes until everything it took has gone.
  Collector rx(b());
  for (int i = 0; i < 1000 && (tx.Flush() > 0 || rx.total() < taken.size()); ++i) rx.PollOnce();
  EXPECT_EQ(tx.Flush(), 0u);
  ASSERT_EQ(rx.on_queue(0).size(), taken.size()) << "every frame taken arrives, once";
  EXPECT_EQ(rx.on_queue(0), taken) << "in order";
  EXPECT_EQ(b().queue(0).stats().rx_dropped, 0u);
  EXPECT_TRUE(PoolsAreFull(a()));
  EXPECT_TRUE(PoolsAreFull(b()));
}

TEST_P(TransportConformance, BadFramesAreCountedAndDropped) {
  ATP_OPEN_OR_SKIP();
  Queue& tx = a().queue(0);
  const FrameBytes good1 = FrameAtoB(wire::MakeSeq(0, 1), 1);
  const FrameBytes good2 = FrameAtoB(wire::MakeSeq(0, 2), 2);
  FrameBytes not_ipv4 = FrameAtoB(wire::MakeSeq(0, 3), 3);
  not_ipv4[12] = 0x86;  // EtherType 0x86DD
  not_ipv4[13] = 0xDD;
  FrameBytes not_atp_port = FrameAtoB(wire::MakeSeq(0, 4), 4);
  not_atp_port[wire::kUdpOffset + 2] = 0x00;  // destination port 0x00xx
  FrameRef burst[5];
  ASSERT_EQ(tx.tx_pool().AllocBurst(burst), 5u);
  const FrameBytes* contents[5] = {&good1, &not_ipv4, &good1, &not_atp_port, &good2};
  for (size_t i = 0; i < 5; ++i) {
    std::memcpy(burst[i].data, contents[i]->data(), kFrameBytes);
    burst[i].length = kFrameBytes;
  }
  burst[2].length = 100;  // a short frame
  ASSERT_EQ(tx.TxBurst(burst), 5u) << "bad frames are taken (and dropped), not refused";
  tx.Flush();
  EXPECT_EQ(tx.stats().tx_bad_frames, 3u);
  EXPECT_EQ(tx.stats().tx_frames, 2u);

  Collector rx(b());
  ASSERT_TRUE(rx.PollUntil(2));
  rx.Settle();
  ASSERT_EQ(rx.on_queue(0).size(), 2u);
  EXPECT_EQ(rx.on_queue(0)[0], good1);
  EXPECT_EQ(rx.on_queue(0)[1], good2);

  // Malformed arrivals through the medium itself, where it can carry them.
  const absl::Status injected = harness_->InjectMalformed(pair_, 0, 4);
  if (injected.code() != absl::StatusCode::kUnimplemented) {
    ASSERT_TRUE(injected.ok()) << injected;
    EXPECT_TRUE(rx.PollUntilTrue([&] { return b().queue(0).stats().rx_bad_frames >= 4; }));
    rx.Settle();
    EXPECT_EQ(b().queue(0).stats().rx_bad_frames, 4u);
    EXPECT_EQ(rx.total(), 2u) << "nothing malformed was handed out";
  }
  EXPECT_TRUE(PoolsAreFull(a()));
  EXPECT_TRUE(PoolsAreFull(b()));
}

TEST_P(TransportConformance, UnroutableFramesAreCountedAndDropped) {
  ATP_OPEN_OR_SKIP();  // one queue at B
  DeviceAddress nobody = b().address();
  nobody.ipv4.value += 100;
  const FrameBytes to_nobody =
      MakeFrame(a().address(), nobody, FrameSpec{wire::MakeSeq(0, 1), 1}, a().base_port());
  const FrameBytes to_missing_queue = FrameAtoB(wire::MakeSeq(5, 2), 2);  // B has queue 0 only
  const FrameBytes good = FrameAtoB(wire::MakeSeq(0, 3), 3);
  Collector rx(b());
  ASSERT_EQ(SendAll(a().queue(0), {to_nobody, to_missing_queue, good}, &rx), 3u);
  ASSERT_TRUE(rx.PollUntil(1));
  rx.Settle();
  EXPECT_EQ(a().queue(0).stats().tx_unroutable, 2u);
  ASSERT_EQ(rx.on_queue(0).size(), 1u);
  EXPECT_EQ(rx.on_queue(0)[0], good);
  EXPECT_TRUE(PoolsAreFull(a()));
}

TEST_P(TransportConformance, InvalidSegmentationJobIsTakenAndCountedAsBad) {
  ATP_OPEN_OR_SKIP();
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  const uint8_t* pointers[3] = {payload.data(), payload.data(), payload.data()};
  FrameBytes first = FrameAtoB(wire::MakeSeq(0, 1), 1);
  first[wire::kAtpOffset] = 0;  // job 0 is never valid
  const SegmentationJob job = SegmentationJob::FromFrame(first, pointers);
  EXPECT_EQ(a().queue(0).TxSegmented(job), 3u);
  EXPECT_EQ(a().queue(0).stats().tx_bad_frames, 3u);
  const uint16_t two_indices[2] = {1, 2};
  const SegmentationJob mismatched =
      SegmentationJob::FromFrame(FrameAtoB(wire::MakeSeq(0, 1), 1), pointers, two_indices);
  EXPECT_EQ(a().queue(0).TxSegmented(mismatched), 3u) << "3 payloads, 2 aggregator indices";
  EXPECT_EQ(a().queue(0).stats().tx_bad_frames, 6u);
  Collector rx(b());
  rx.Settle();
  EXPECT_EQ(rx.total(), 0u);
}

TEST_P(TransportConformance, NoBufferLeaksAfterARun) {
  DeviceOptions options;
  options.num_queues = 2;
  options.rx_pool_frames = 512;
  options.tx_pool_frames = 512;
  ATP_OPEN_OR_SKIP(options);
  Collector at_a(a());
  Collector at_b(b());
  size_t expected_at_a = 0;
  size_t expected_at_b = 0;
  for (uint32_t round = 0; round < 8; ++round) {
    std::vector<FrameBytes> a_to_b;
    std::vector<FrameBytes> b_to_a;
    for (uint32_t i = 0; i < 50; ++i) {
      a_to_b.push_back(FrameAtoB(wire::MakeSeq(i % 2, round * 50 + i), i));
      b_to_a.push_back(MakeFrame(b().address(), a().address(),
                                 FrameSpec{wire::MakeSeq(i % 2, round * 50 + i), i},
                                 b().base_port()));
    }
    FrameBytes bad = a_to_b.front();
    bad[12] = 0;  // not IPv4: dropped by the sender
    a_to_b.push_back(bad);
    ASSERT_EQ(SendAll(a().queue(round % 2), a_to_b, &at_b), a_to_b.size());
    ASSERT_EQ(SendAll(b().queue(0), b_to_a, &at_a), b_to_a.size());
    expected_at_b += 50;
    expected_at_a += 50;
    // A segmentation job too.
    std::array<uint8_t, wire::kPayloadBytes> payload{};
    std::vector<const uint8_t*> pointers(70, payload.data());
    SegmentationJob job =
        SegmentationJob::FromFrame(FrameAtoB(wire::MakeSeq(1, round * 100), 0), pointers);
    ASSERT_TRUE(SendSegmented(a().queue(1), job, &at_b));
    expected_at_b += 70;
  }
  ASSERT_TRUE(at_b.PollUntil(expected_at_b)) << at_b.total() << " of " << expected_at_b;
  ASSERT_TRUE(at_a.PollUntil(expected_at_a)) << at_a.total() << " of " << expected_at_a;
  at_a.Settle();
  at_b.Settle();
  for (Device* device : {&a(), &b()}) {
    for (uint32_t q = 0; q < device->num_queues(); ++q) {
      EXPECT_EQ(device->queue(q).Flush(), 0u);
    }
  }
  EXPECT_TRUE(PoolsAreFull(a()));
  EXPECT_TRUE(PoolsAreFull(b()));
}

// A backend with a wait_fd (atp/transport.h) must wake a receiver that
// sleeps on it whenever RxBurst found nothing, for every frame, on every
// queue (with software steering, also for frames another queue's hardware
// queue received and its thread handed over), and must not stay readable
// once the frames are taken. Two queues of B, each with a receiving thread
// of its own that polls until every frame of both arrived (with software
// steering a queue's thread is the only reader of its hardware queue, where
// the other queue's frames may land too); the sender paces itself on what
// was received, not on time.
TEST_P(TransportConformance, ASleepingReceiverIsWokenForEveryFrameOnEveryQueue) {
  DeviceOptions options;
  options.num_queues = 2;
  ATP_OPEN_OR_SKIP(options);
  for (uint32_t q = 0; q < 2; ++q) {
    if (b().queue(q).wait_fd() < 0) GTEST_SKIP() << GetParam() << " has no wait_fd (it polls)";
  }
  constexpr uint32_t kFrames = 3000;
  constexpr uint32_t kAhead = 256;  // at most this many sent and not yet received
  constexpr int kSleepMs = 5000;    // far longer than any pause of the sender
  std::mt19937 random(20261203);    // deterministic bursts
  std::vector<uint32_t> queue_of;   // the queue of each frame, in sending order
  uint32_t to_queue[2] = {0, 0};
  while (queue_of.size() < kFrames) {
    const uint32_t q = random() % 2;
    const uint32_t size = std::min<uint32_t>(1 + random() % 32, kFrames - queue_of.size());
    queue_of.insert(queue_of.end(), size, q);
    to_queue[q] += size;
  }
  std::atomic<uint32_t> received{0};
  std::atomic<uint64_t> sleeps{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<bool> in_order{true};
  std::atomic<bool> stop{false};
  // all_received: written once the last frame arrived, to wake the other
  // receiver from its sleep.
  const int all_received = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(all_received, 0);
  auto receive = [&](uint32_t q) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    uint32_t next = 0;  // the position expected next on queue q
    while (received.load() < kFrames && !stop) {
      if (std::chrono::steady_clock::now() > deadline) {
        stop = true;
        break;
      }
      FrameRef rx[32];
      const size_t n = b().queue(q).RxBurst(rx);
      for (size_t i = 0; i < n; ++i) {
        wire::FrameFields fields;
        if (wire::DecodeFrame({rx[i].data, rx[i].length}, b().base_port(), &fields, nullptr) !=
                wire::DecodeError::kOk ||
            fields.header.queue() != q || fields.header.position() != next) {
          in_order = false;
        }
        ++next;
      }
      ReleaseFrames({rx, n});
      if (n > 0 && received.fetch_add(static_cast<uint32_t>(n)) + n == kFrames) {
        const uint64_t one = 1;
        EXPECT_EQ(::write(all_received, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
      }
      if (n == 0) {
        pollfd fds[2] = {{b().queue(q).wait_fd(), POLLIN, 0}, {all_received, POLLIN, 0}};
        sleeps.fetch_add(1);
        if (::poll(fds, 2, kSleepMs) == 0) timeouts.fetch_add(1);
      }
    }
    EXPECT_EQ(next, to_queue[q]) << "queue " << q;
  };
  std::thread receiver0(receive, 0);
  std::thread receiver1(receive, 1);
  uint32_t sent[2] = {0, 0};
  for (size_t first = 0; first < queue_of.size() && !stop;) {
    while (first - received.load() > kAhead && !stop) std::this_thread::yield();
    size_t end = first;
    while (end < queue_of.size() && queue_of[end] == queue_of[first]) ++end;
    const uint32_t q = queue_of[first];
    std::vector<FrameBytes> burst;
    for (size_t i = first; i < end; ++i) {
      burst.push_back(FrameAtoB(wire::MakeSeq(q, sent[q]++), static_cast<uint32_t>(i)));
    }
    if (SendAll(a().queue(0), burst, nullptr) != burst.size()) {
      ADD_FAILURE() << "A did not take frames " << first << " to " << end;
      stop = true;
    }
    first = end;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (a().queue(0).Flush() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  receiver0.join();
  receiver1.join();
  ::close(all_received);
  EXPECT_EQ(received.load(), kFrames);
  EXPECT_TRUE(in_order.load());
  EXPECT_EQ(timeouts.load(), 0u) << "of " << sleeps.load() << " sleeps, some were never woken";
  EXPECT_GT(sleeps.load(), 0u) << "the receivers did sleep on the wait fds";
  // Each receiver stopped at its last frame: one empty look per queue (this
  // thread's now) lowers what the last frames raised.
  for (uint32_t q = 0; q < 2; ++q) {
    FrameRef rx[1];
    EXPECT_EQ(b().queue(q).RxBurst(rx), 0u);
    EXPECT_FALSE(Readable(b().queue(q).wait_fd())) << "queue " << q << " with nothing waiting";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportConformance, ::testing::ValuesIn(BackendNames()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return param.param;
                         });

}  // namespace
}  // namespace atp::transport::testing
