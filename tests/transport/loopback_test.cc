// The loopback wire: routing, the processor in the middle, threads.
#include "atp/transport/loopback.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "lib/wire/frame_view.h"
#include "tests/transport/loopback_test_util.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport {
namespace {

using testing::Add;
using testing::Collector;
using testing::FrameBytes;
using testing::FrameSpec;
using testing::MakeFrame;
using testing::Node;
using testing::PoolsAreFull;
using testing::Readable;
using testing::SendAll;

TEST(LoopbackWire, EndpointIdsFollowTheOrderOfAddition) {
  auto wire = LoopbackWire::Create({});
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  EXPECT_EQ(wire->num_endpoints(), 2u);
  EXPECT_EQ(wire->FindEndpoint(Node(1).ipv4), 0u);
  EXPECT_EQ(wire->FindEndpoint(Node(2).ipv4), 1u);
  EXPECT_FALSE(wire->FindEndpoint(Node(3).ipv4).has_value());
  EXPECT_EQ(a->backend(), "loopback");
  EXPECT_EQ(b->address(), Node(2));
}

TEST(LoopbackWire, RefusesADuplicateAddressAndInvalidOptions) {
  auto wire = LoopbackWire::Create({});
  auto a = Add(*wire, 1);
  LoopbackEndpointOptions same;
  same.address = Node(1);
  EXPECT_EQ(wire->AddEndpoint(same).status().code(), absl::StatusCode::kAlreadyExists);
  LoopbackEndpointOptions bad;
  bad.address = Node(2);
  bad.device.num_queues = 0;
  EXPECT_EQ(wire->AddEndpoint(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LoopbackWire, FramesToAClosedEndpointAreUnroutable) {
  auto wire = LoopbackWire::Create({});
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  b.reset();
  EXPECT_EQ(SendAll(a->queue(0), {MakeFrame(Node(1), Node(2), FrameSpec{})}, nullptr), 1u);
  EXPECT_EQ(a->queue(0).stats().tx_unroutable, 1u);
  EXPECT_EQ(wire->stats().unroutable, 1u);
  EXPECT_TRUE(PoolsAreFull(*a));
}

TEST(LoopbackWire, RxBacklogCountsFramesWaitingOnAQueue) {
  auto wire = LoopbackWire::Create({});
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  std::vector<FrameBytes> frames(5, MakeFrame(Node(1), Node(2), FrameSpec{}));
  ASSERT_EQ(SendAll(a->queue(0), frames, nullptr), 5u);
  EXPECT_EQ(wire->RxBacklog(1, 0), 5u);
  EXPECT_EQ(wire->RxBacklog(1, 1), 0u) << "no such queue";
  EXPECT_EQ(wire->RxBacklog(9, 0), 0u) << "no such endpoint";
  Collector rx(*b);
  rx.PollOnce();
  EXPECT_EQ(wire->RxBacklog(1, 0), 0u);
}

TEST(LoopbackWire, AReceivedFrameCanBeForwardedByAnotherQueueZeroCopy) {
  // A switch-like endpoint: receives on its queue and sends the same buffer on.
  auto wire = LoopbackWire::Create({});
  auto a = Add(*wire, 1);
  auto middle = Add(*wire, 2);
  auto c = Add(*wire, 3);
  ASSERT_EQ(SendAll(a->queue(0), {MakeFrame(Node(1), Node(2), FrameSpec{wire::MakeSeq(0, 4)})},
                    nullptr),
            1u);
  FrameRef frame;
  ASSERT_EQ(middle->queue(0).RxBurst({&frame, 1}), 1u);
  // Readdress to C (IPv4 destination and checksum), then send it on.
  const FrameBytes readdressed =
      MakeFrame(Node(1), Node(3), FrameSpec{wire::MakeSeq(0, 4)});
  std::memcpy(frame.data, readdressed.data(), kFrameBytes);
  EXPECT_EQ(frame.pool, &middle->queue(0).rx_pool());
  ASSERT_EQ(middle->queue(0).TxBurst({&frame, 1}), 1u);
  Collector rx(*c);
  ASSERT_EQ(rx.PollOnce(), 1u);
  EXPECT_EQ(rx.on_queue(0)[0], readdressed);
  EXPECT_TRUE(PoolsAreFull(*middle)) << "the RX buffer went back to its pool after sending";
}

// Recorder: a processor that lets test code decide, and remembers what it saw.
class ScriptedProcessor final : public FrameProcessor {
 public:
  WireDecision Process(std::span<uint8_t, kFrameBytes> frame, EndpointId from, TimePoint now,
                       const LoopbackWire& wire) override {
    seen_from.push_back(from);
    seen_at.push_back(now);
    backlog_at_c.push_back(wire.RxBacklog(2, 0));
    wire::FrameView view(frame.data());
    const uint32_t position = wire::PositionOfSeq(view.seq());
    if (position % 3 == 0) return {WireAction::kDrop, {}};
    if (position % 3 == 1) {
      view.set_aggregator(4242);  // a rewrite the receivers must see
      return {WireAction::kSendTo, multicast};
    }
    return {WireAction::kRoute, {}};
  }

  std::vector<EndpointId> multicast = {1, 2};
  std::vector<EndpointId> seen_from;
  std::vector<TimePoint> seen_at;
  std::vector<size_t> backlog_at_c;
};

TEST(LoopbackWireProcessor, DropsRewritesMulticastsAndRoutesAsItDecides) {
  ScriptedProcessor processor;
  TimePoint fake_now = TimePoint::FromNanoseconds(1000);
  auto wire = LoopbackWire::Create({&processor, [&fake_now] { return fake_now; }});
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  auto c = Add(*wire, 3);
  std::vector<FrameBytes> frames;
  for (uint32_t p = 0; p < 6; ++p) {
    frames.push_back(MakeFrame(Node(1), Node(2), FrameSpec{wire::MakeSeq(0, p), p}));
  }
  ASSERT_EQ(SendAll(a->queue(0), {frames.begin(), frames.begin() + 3}, nullptr), 3u);
  fake_now = TimePoint::FromNanoseconds(2000);
  ASSERT_EQ(SendAll(a->queue(0), {frames.begin() + 3, frames.end()}, nullptr), 3u);

  ASSERT_EQ(processor.seen_from.size(), 6u);
  for (EndpointId from : processor.seen_from) EXPECT_EQ(from, 0u);
  EXPECT_EQ(processor.seen_at.front(), TimePoint::FromNanoseconds(1000));
  EXPECT_EQ(processor.seen_at.back(), TimePoint::FromNanoseconds(2000)) << "the wire's clock";
  EXPECT_EQ(processor.backlog_at_c.back(), 2u) << "C holds both multicast copies by then";

  Collector at_b(*b);
  Collector at_c(*c);
  at_b.PollOnce();
  at_c.PollOnce();
  // Positions 1 and 4 multicast (rewritten) to B and C; 2 and 5 routed to B.
  ASSERT_EQ(at_b.on_queue(0).size(), 4u);
  ASSERT_EQ(at_c.on_queue(0).size(), 2u);
  FrameBytes copy = at_c.on_queue(0)[0];
  wire::FrameView first_copy(copy.data());
  EXPECT_EQ(first_copy.aggregator(), 4242);
  EXPECT_EQ(wire::PositionOfSeq(first_copy.seq()), 1u);
  EXPECT_EQ(at_b.on_queue(0)[1], frames[2]) << "routed frames are untouched";
  const LoopbackWireStats stats = wire->stats();
  EXPECT_EQ(stats.frames_in, 6u);
  EXPECT_EQ(stats.processor_drops, 2u);
  EXPECT_EQ(stats.delivered, 6u);
  EXPECT_TRUE(PoolsAreFull(*a));
}

TEST(LoopbackWireProcessor, ACopyForAFullRingIsAnEgressDropCountedAtTheReceiver) {
  ScriptedProcessor processor;
  auto wire = LoopbackWire::Create({&processor, [] { return TimePoint::Zero(); }});
  DeviceOptions small;
  small.rx_ring_frames = 4;
  small.max_burst = 4;
  small.rx_pool_frames = 8;
  small.tx_pool_frames = 64;
  auto a = Add(*wire, 1, small);
  auto b = Add(*wire, 2, small);
  auto c = Add(*wire, 3, small);
  std::vector<FrameBytes> frames;
  for (uint32_t i = 0; i < 10; ++i) {
    frames.push_back(MakeFrame(Node(1), Node(2), FrameSpec{wire::MakeSeq(0, 3 * i + 1), i}));
  }
  ASSERT_EQ(SendAll(a->queue(0), frames, nullptr), 10u) << "the sender is never held back";
  EXPECT_EQ(wire->stats().egress_drops, 12u) << "6 copies each for B and C";
  EXPECT_EQ(b->queue(0).stats().rx_dropped, 6u);
  EXPECT_EQ(c->queue(0).stats().rx_dropped, 6u);
  Collector at_b(*b);
  at_b.PollOnce();
  EXPECT_EQ(at_b.total(), 4u);
}

TEST(LoopbackWire, EndpointsOnTheirOwnThreadsExchangeEveryFrameInOrder) {
  constexpr uint32_t kPerSender = 20000;
  auto wire = LoopbackWire::Create({});
  DeviceOptions options;
  options.rx_ring_frames = 256;
  auto a = Add(*wire, 1, options);
  auto c = Add(*wire, 3, options);
  auto b = Add(*wire, 2, options);
  auto send = [](Device* from, uint32_t node) {
    Queue& q = from->queue(0);
    uint32_t next = 0;
    while (next < kPerSender) {
      FrameRef burst[32];
      const size_t n = q.tx_pool().AllocBurst({burst, std::min<size_t>(32, kPerSender - next)});
      for (size_t i = 0; i < n; ++i) {
        const FrameBytes f = MakeFrame(Node(node), Node(2),
                                       FrameSpec{wire::MakeSeq(0, next + static_cast<uint32_t>(i)),
                                                 node});
        std::memcpy(burst[i].data, f.data(), kFrameBytes);
        burst[i].length = kFrameBytes;
      }
      const size_t taken = q.TxBurst({burst, n});
      ReleaseFrames({burst + taken, n - taken});
      next += static_cast<uint32_t>(taken);
      if (taken == 0) std::this_thread::yield();
    }
    while (q.Flush() > 0) std::this_thread::yield();
  };
  std::thread sender_a(send, a.get(), 1);
  std::thread sender_c(send, c.get(), 3);
  uint32_t next_from_a = 0;
  uint32_t next_from_c = 0;
  while (next_from_a + next_from_c < 2 * kPerSender) {
    FrameRef frames[32];
    const size_t n = b->queue(0).RxBurst(frames);
    for (size_t i = 0; i < n; ++i) {
      wire::FrameFields fields;
      ASSERT_EQ(wire::DecodeFrame(frames[i].bytes(), b->base_port(), &fields, nullptr),
                wire::DecodeError::kOk);
      uint32_t& next = fields.src_ip == Node(1).ipv4 ? next_from_a : next_from_c;
      ASSERT_EQ(fields.header.position(), next) << "from " << fields.src_ip.ToString();
      ++next;
    }
    ReleaseFrames({frames, n});
    if (n == 0) std::this_thread::yield();
  }
  sender_a.join();
  sender_c.join();
  EXPECT_EQ(b->queue(0).stats().rx_frames, 2 * kPerSender);
  EXPECT_TRUE(PoolsAreFull(*a));
  EXPECT_TRUE(PoolsAreFull(*b));
  EXPECT_TRUE(PoolsAreFull(*c));
}

TEST(LoopbackWaitFd, ReadableExactlyWhileFramesWait) {
  auto wire = LoopbackWire::Create({});
  DeviceOptions two_queues;
  two_queues.num_queues = 2;
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2, two_queues);
  ASSERT_TRUE(a && b);
  const int fd0 = b->queue(0).wait_fd();
  const int fd1 = b->queue(1).wait_fd();
  ASSERT_GE(fd0, 0);
  ASSERT_GE(fd1, 0);
  EXPECT_NE(fd0, fd1);
  EXPECT_FALSE(Readable(fd0));
  EXPECT_FALSE(Readable(fd1));

  std::vector<FrameBytes> frames;
  for (uint32_t i = 0; i < 40; ++i) {
    frames.push_back(MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(1, i), i}));
  }
  ASSERT_EQ(SendAll(a->queue(0), frames, nullptr), frames.size());
  EXPECT_FALSE(Readable(fd0)) << "nothing for queue 0";
  EXPECT_TRUE(Readable(fd1));

  // Partly drained: still readable; drained: not any more.
  FrameRef rx[16];
  size_t n = b->queue(1).RxBurst(rx);
  ASSERT_EQ(n, 16u);
  ReleaseFrames({rx, n});
  EXPECT_TRUE(Readable(fd1)) << "24 frames still wait";
  size_t total = n;
  while ((n = b->queue(1).RxBurst(rx)) > 0) {
    total += n;
    ReleaseFrames({rx, n});
  }
  EXPECT_EQ(total, frames.size());
  EXPECT_FALSE(Readable(fd1)) << "an empty RxBurst lowers it";

  // A new frame raises it again.
  ASSERT_EQ(SendAll(a->queue(0), {frames[0]}, nullptr), 1u);
  EXPECT_TRUE(Readable(fd1));
  Collector rx_b(*b);
  ASSERT_TRUE(rx_b.PollUntil(1));
  EXPECT_FALSE(Readable(fd1));
  EXPECT_TRUE(PoolsAreFull(*b));
}

class PassThrough final : public FrameProcessor {
 public:
  WireDecision Process(std::span<uint8_t, kFrameBytes>, EndpointId, TimePoint,
                       const LoopbackWire&) override {
    return WireDecision{WireAction::kRoute, {}};
  }
};

TEST(LoopbackWaitFd, FramesThroughAProcessorRaiseItToo) {
  PassThrough processor;
  auto wire = LoopbackWire::Create({&processor, {}});
  auto a = Add(*wire, 1);
  auto b = Add(*wire, 2);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(Readable(b->queue(0).wait_fd()));
  const FrameBytes frame = MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(0, 1)});
  ASSERT_EQ(SendAll(a->queue(0), {frame}, nullptr), 1u);
  EXPECT_TRUE(Readable(b->queue(0).wait_fd()));
  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntil(1));
  EXPECT_EQ(rx.on_queue(0)[0], frame);
  EXPECT_FALSE(Readable(b->queue(0).wait_fd()));
}

// A receiver that sleeps on wait_fd whenever RxBurst finds nothing, against
// a sender on another thread sending bursts of random sizes with random
// pauses: every frame arrives, and no sleep ever has to time out (a lost
// wakeup would leave the receiver asleep with frames waiting).
TEST(LoopbackWaitFd, ASleepingReceiverIsAlwaysWokenAndMissesNothing) {
  auto wire = LoopbackWire::Create({});
  DeviceOptions device;
  device.rx_ring_frames = 256;
  auto a = Add(*wire, 1, device);
  auto b = Add(*wire, 2, device);
  ASSERT_TRUE(a && b);
  constexpr uint32_t kFrames = 20000;
  constexpr int kSleepMs = 2000;  // far longer than any pause of the sender
  std::atomic<uint64_t> sleeps{0};
  std::atomic<uint64_t> timeouts{0};
  std::atomic<uint32_t> received{0};
  std::atomic<bool> in_order{true};
  std::thread receiver([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    uint32_t next = 0;
    while (next < kFrames && std::chrono::steady_clock::now() < deadline) {
      FrameRef rx[32];
      const size_t n = b->queue(0).RxBurst(rx);
      for (size_t i = 0; i < n; ++i) {
        const uint32_t seq = (uint32_t{rx[i].data[wire::kAtpOffset + 1]} << 16) |
                             (uint32_t{rx[i].data[wire::kAtpOffset + 2]} << 8) |
                             rx[i].data[wire::kAtpOffset + 3];
        if (wire::PositionOfSeq(seq) != (next & wire::kPositionMask)) in_order = false;
        ++next;
      }
      ReleaseFrames({rx, n});
      received.store(next);
      if (n == 0) {
        pollfd p{b->queue(0).wait_fd(), POLLIN, 0};
        sleeps.fetch_add(1);
        if (::poll(&p, 1, kSleepMs) == 0) timeouts.fetch_add(1);
      }
    }
  });
  std::mt19937 random(20261129);  // deterministic
  std::vector<FrameBytes> burst;
  uint32_t sent = 0;
  while (sent < kFrames) {
    const uint32_t size = std::min<uint32_t>(1 + random() % 48, kFrames - sent);
    burst.clear();
    for (uint32_t i = 0; i < size; ++i) {
      burst.push_back(MakeFrame(a->address(), b->address(),
                                FrameSpec{wire::MakeSeq(0, (sent + i) & wire::kPositionMask)}));
    }
    ASSERT_EQ(SendAll(a->queue(0), burst, nullptr), size);
    sent += size;
    if (random() % 8 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(random() % 200));  // a pause, not a sync
    }
  }
  // Whatever the receiver's ring refused waits at the sender: flush it out.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (a->queue(0).Flush() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  receiver.join();
  EXPECT_EQ(received.load(), kFrames);
  EXPECT_TRUE(in_order.load());
  EXPECT_EQ(timeouts.load(), 0u) << "of " << sleeps.load() << " sleeps, some were never woken";
  EXPECT_GT(sleeps.load(), 0u) << "the receiver did sleep on wait_fd";
  // The receiver stopped at its last frame, maybe before the sender's last
  // raise: the wait_fd may still say "look". One look at the empty ring (all
  // writes are done: the sender is this thread) lowers it for good.
  FrameRef rx[1];
  EXPECT_EQ(b->queue(0).RxBurst(rx), 0u);
  EXPECT_FALSE(Readable(b->queue(0).wait_fd()));
}

}  // namespace
}  // namespace atp::transport
