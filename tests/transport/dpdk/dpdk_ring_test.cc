// The DPDK backend's own rules, over net_ring in one process: the EAL guard,
// zero-copy receive and forwarding, software steering under load and
// overflow, copies from foreign pools, and mempools that outlive their
// device until every mbuf is back.
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "atp/transport/dpdk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/dpdk/dpdk_harness.h"
#include "tests/transport/dpdk/test_eal.h"
#include "tests/transport/transport_test_util.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/mbuf_pool.h"

namespace atp::transport {
namespace {

using ::testing::HasSubstr;
using testing::Collector;
using testing::DpdkPairOptions;
using testing::FrameBytes;
using testing::FrameSpec;
using testing::MakeFrame;
using testing::PoolsAreFull;
using testing::SendAll;

class DpdkRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status eal = testing::EnsureTestEal();
    ASSERT_TRUE(eal.ok()) << eal;
  }

  // OpenPair: a ring link of `queues` queue pairs and a device on each side.
  void OpenPair(DeviceOptions device = {}) {
    absl::StatusOr<testing::RingPair> pair = testing::OpenRingPair("r", device);
    ASSERT_TRUE(pair.ok()) << pair.status();
    link_ = std::move(pair->link);
    a_ = std::move(pair->a);
    b_ = std::move(pair->b);
  }

  void TearDown() override {
    a_.reset();
    b_.reset();
    link_.reset();
  }

  FrameBytes FrameAtoB(uint32_t seq, uint32_t seed) {
    return MakeFrame(a_->address(), b_->address(), FrameSpec{seq, seed}, a_->base_port());
  }

  std::unique_ptr<DpdkRingLink> link_;
  std::unique_ptr<DpdkDevice> a_;
  std::unique_ptr<DpdkDevice> b_;
};

TEST_F(DpdkRingTest, EalInitialisesOncePerProcessAndRefusesADifferentSecondInit) {
  const DpdkEalOptions same = testing::TestEalOptions();
  EXPECT_TRUE(InitDpdkEal(same).ok()) << "the same options again are fine";
  EXPECT_EQ(DpdkEalArgs(), same.ToArgs());
  DpdkEalOptions other = same;
  other.memory_mb = 512;
  const absl::Status second = InitDpdkEal(other);
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.message()), HasSubstr("once per process"));
  EXPECT_THAT(std::string(second.message()), HasSubstr("-m512"));
  EXPECT_EQ(DpdkEalArgs(), same.ToArgs()) << "the first configuration stays";
}

TEST_F(DpdkRingTest, IoThreadsRegisterForAnLcoreAndGiveItBack) {
  std::thread io([] {
    EXPECT_EQ(rte_lcore_id(), LCORE_ID_ANY) << "a plain thread has no lcore";
    ASSERT_TRUE(RegisterDpdkIoThread().ok());
    EXPECT_NE(rte_lcore_id(), LCORE_ID_ANY) << "its mempool operations use a cache now";
    EXPECT_TRUE(RegisterDpdkIoThread().ok()) << "registering twice is harmless";
    UnregisterDpdkIoThread();
    EXPECT_EQ(rte_lcore_id(), LCORE_ID_ANY);
  });
  io.join();
}

TEST_F(DpdkRingTest, ReceivedFramesAreTheSendersMbufsNotCopies) {
  OpenPair();
  FrameRef tx;
  ASSERT_EQ(a_->queue(0).tx_pool().AllocBurst({&tx, 1}), 1u);
  const FrameBytes bytes = FrameAtoB(wire::MakeSeq(0, 1), 1);
  std::memcpy(tx.data, bytes.data(), kFrameBytes);
  tx.length = kFrameBytes;
  const uint8_t* sent_data = tx.data;
  ASSERT_EQ(a_->queue(0).TxBurst({&tx, 1}), 1u);
  FrameRef rx[4];
  ASSERT_EQ(b_->queue(0).RxBurst(rx), 1u);
  EXPECT_EQ(rx[0].data, sent_data) << "net_ring passes the mbuf itself";
  EXPECT_EQ(std::memcmp(rx[0].data, bytes.data(), kFrameBytes), 0);
  EXPECT_EQ(a_->queue(0).tx_pool().free_count(), a_->queue(0).tx_pool().capacity() - 1)
      << "B's caller holds A's buffer";
  ReleaseFrames({rx, 1});
  EXPECT_TRUE(PoolsAreFull(*a_));
  EXPECT_TRUE(PoolsAreFull(*b_));
}

TEST_F(DpdkRingTest, ReceivedFrameIsForwardedWithoutACopy) {
  OpenPair();
  Collector at_b(*b_);
  ASSERT_EQ(SendAll(a_->queue(0), {FrameAtoB(wire::MakeSeq(0, 7), 7)}, nullptr), 1u);
  FrameRef rx[4];
  ASSERT_EQ(b_->queue(0).RxBurst(rx), 1u);
  // B forwards it back to A, as a switch port would: swap the addresses.
  FrameBytes back = MakeFrame(b_->address(), a_->address(), FrameSpec{wire::MakeSeq(0, 7), 7},
                              b_->base_port());
  std::memcpy(rx[0].data, back.data(), kFrameBytes);
  const uint8_t* data = rx[0].data;
  ASSERT_EQ(b_->queue(0).TxBurst({rx, 1}), 1u);
  FrameRef at_a[4];
  ASSERT_EQ(a_->queue(0).RxBurst(at_a), 1u);
  EXPECT_EQ(at_a[0].data, data) << "one buffer all the way";
  EXPECT_EQ(std::memcmp(at_a[0].data, back.data(), kFrameBytes), 0);
  ReleaseFrames({at_a, 1});
  EXPECT_TRUE(PoolsAreFull(*a_));
  EXPECT_TRUE(PoolsAreFull(*b_));
}

TEST_F(DpdkRingTest, FramesFromAHeapPoolAreCopiedAndTheirBuffersReleased) {
  OpenPair();
  absl::StatusOr<std::unique_ptr<HeapFramePool>> heap = HeapFramePool::Create({});
  ASSERT_TRUE(heap.ok());
  FrameRef frames[3];
  ASSERT_EQ((*heap)->AllocBurst(frames), 3u);
  std::vector<FrameBytes> sent;
  for (uint32_t i = 0; i < 3; ++i) {
    sent.push_back(FrameAtoB(wire::MakeSeq(0, i), i));
    std::memcpy(frames[i].data, sent.back().data(), kFrameBytes);
    frames[i].length = kFrameBytes;
  }
  ASSERT_EQ(a_->queue(0).TxBurst(frames), 3u);
  EXPECT_EQ((*heap)->free_count(), (*heap)->capacity()) << "taken, copied, released";
  Collector rx(*b_);
  ASSERT_TRUE(rx.PollUntil(3));
  EXPECT_EQ(rx.on_queue(0), sent);
  EXPECT_TRUE(PoolsAreFull(*a_));
}

TEST_F(DpdkRingTest, SoftwareSteeringWithoutFlowSupportAndHardwareFlowRefused) {
  DeviceOptions device;
  device.num_queues = 2;
  OpenPair(device);
  EXPECT_EQ(a_->steering(), Steering::kSoftware) << "net_ring has no rte_flow";
  EXPECT_EQ(a_->queue(1).capabilities().steering, Steering::kSoftware);
  // A second pair asking for hardware steering cannot open.
  DpdkRingLinkOptions link_options{testing::UniqueTestName("r"), 2, 64};
  absl::StatusOr<std::unique_ptr<DpdkRingLink>> link = DpdkRingLink::Create(link_options);
  ASSERT_TRUE(link.ok());
  DpdkOptions options = DpdkPairOptions(device, DpdkRingLink::Side::kA);
  options.port = (*link)->port_name(DpdkRingLink::Side::kA);
  options.steering = DpdkSteering::kHardwareFlow;
  const absl::StatusOr<std::unique_ptr<DpdkDevice>> refused = OpenDpdkDevice(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("cannot steer"));
}

TEST_F(DpdkRingTest, OverflowOfASteeringRingIsCountedAsDroppedAtItsQueue) {
  DeviceOptions device;
  device.num_queues = 2;
  device.rx_ring_frames = 64;
  OpenPair(device);
  // 200 frames for B's queue 1, all arriving on B's hardware queue 0 (A
  // sends them on its queue 0). Only B's queue 0 polls: queue 1's ring
  // fills at 64 and the rest is dropped, counted at queue 1.
  std::vector<FrameBytes> frames;
  for (uint32_t i = 0; i < 200; ++i) frames.push_back(FrameAtoB(wire::MakeSeq(1, i), i));
  size_t sent = 0;
  for (int tries = 0; sent < frames.size() && tries < 1000; ++tries) {
    sent += SendAll(a_->queue(0), {frames.begin() + static_cast<ptrdiff_t>(sent),
                                   frames.begin() + static_cast<ptrdiff_t>(std::min<size_t>(sent + 32, frames.size()))},
                    nullptr);
    FrameRef rx[32];
    EXPECT_EQ(b_->queue(0).RxBurst(rx), 0u) << "nothing is for queue 0";
  }
  ASSERT_EQ(sent, frames.size());
  EXPECT_EQ(b_->queue(1).stats().rx_dropped, 200u - 64u);
  Collector rx(*b_);
  ASSERT_TRUE(rx.PollUntil(64));
  rx.Settle();
  ASSERT_EQ(rx.on_queue(1).size(), 64u);
  EXPECT_EQ(rx.on_queue(1).front(), frames.front()) << "the oldest frames were kept";
  EXPECT_EQ(b_->queue(0).stats().rx_dropped, 0u);
  EXPECT_TRUE(PoolsAreFull(*a_));
  EXPECT_TRUE(PoolsAreFull(*b_));
}

TEST_F(DpdkRingTest, QueuesOnTheirOwnThreadsEachGetTheirFramesInOrder) {
  DeviceOptions device;
  device.num_queues = 2;
  // net_ring passes A's TX mbufs: no more than A's two TX pools (2 x 2048)
  // can be in flight, so steering rings of 4096 never overflow, however the
  // threads are scheduled.
  device.rx_ring_frames = 4096;
  OpenPair(device);
  // A's queue s sends positions s, s + 2, s + 4, ... (kPerSender of them);
  // position p goes to B's queue (p / 2) % 2. So B's queue q gets, from
  // sender s, positions 2q + s, 2q + s + 4, ... and kPerSender in all. B's
  // two queues run on two threads, each dispatching what its hardware queue
  // receives (from A's queue of the same index) to the other.
  constexpr uint32_t kPerSender = 20000;
  std::atomic<bool> failed{false};
  std::atomic<uint32_t> total{0};
  std::vector<std::thread> receivers;
  for (uint32_t q = 0; q < 2; ++q) {
    receivers.emplace_back([&, q] {
      uint32_t next[2] = {2 * q, 2 * q + 1};  // per sender queue
      uint32_t got = 0;
      // Every queue keeps polling until all frames are in, not just its own:
      // its hardware queue may still hold frames for the other.
      for (int idle = 0; total.load() < 2 * kPerSender && idle < 1000000;) {
        FrameRef frames[32];
        const size_t n = b_->queue(q).RxBurst(frames);
        if (n == 0) {
          ++idle;
          std::this_thread::yield();
          continue;
        }
        idle = 0;
        for (size_t i = 0; i < n; ++i) {
          const uint8_t* seq_bytes = frames[i].data + kSeqOffset;
          const uint32_t seq = (uint32_t{seq_bytes[0]} << 16) | (uint32_t{seq_bytes[1]} << 8) |
                               seq_bytes[2];
          const uint32_t position = wire::PositionOfSeq(seq);
          const uint32_t sender = position & 1;
          if (wire::QueueOfSeq(seq) != q || position != next[sender]) failed = true;
          next[sender] = position + 4;
        }
        got += static_cast<uint32_t>(n);
        total += static_cast<uint32_t>(n);
        ReleaseFrames({frames, n});
      }
      if (got != kPerSender) failed = true;
    });
  }
  std::thread sender([&] {
    uint32_t position[2] = {0, 1};
    const uint32_t end[2] = {2 * kPerSender, 2 * kPerSender + 1};
    while (position[0] < end[0] || position[1] < end[1]) {
      for (uint32_t s = 0; s < 2; ++s) {
        std::vector<FrameBytes> burst;
        for (; burst.size() < 16 && position[s] < end[s]; position[s] += 2) {
          burst.push_back(FrameAtoB(wire::MakeSeq((position[s] / 2) % 2, position[s]), 0));
        }
        for (size_t done = 0; done < burst.size();) {
          FrameRef frames[16];
          const size_t n = a_->queue(s).tx_pool().AllocBurst({frames, burst.size() - done});
          for (size_t i = 0; i < n; ++i) {
            std::memcpy(frames[i].data, burst[done + i].data(), kFrameBytes);
            frames[i].length = kFrameBytes;
          }
          const size_t taken = a_->queue(s).TxBurst({frames, n});
          ReleaseFrames({frames + taken, n - taken});
          done += taken;
          a_->queue(s).Flush();
          if (taken == 0) std::this_thread::yield();  // the receivers are behind
        }
      }
    }
    // Taken frames may still wait on a software transmit ring.
    for (uint32_t s = 0; s < 2; ++s) {
      while (a_->queue(s).Flush() > 0) std::this_thread::yield();
    }
  });
  sender.join();
  for (std::thread& t : receivers) t.join();
  EXPECT_FALSE(failed) << "a frame arrived on the wrong queue, out of order, or not at all";
  EXPECT_EQ(b_->queue(0).stats().rx_dropped + b_->queue(1).stats().rx_dropped, 0u);
  EXPECT_EQ(b_->queue(0).stats().rx_frames + b_->queue(1).stats().rx_frames, 2 * kPerSender);
  EXPECT_TRUE(PoolsAreFull(*a_));
  EXPECT_TRUE(PoolsAreFull(*b_));
}

TEST_F(DpdkRingTest, MempoolsOutliveTheirDeviceUntilEveryMbufIsBack) {
  OpenPair();
  ASSERT_EQ(SendAll(a_->queue(0), {FrameAtoB(wire::MakeSeq(0, 1), 1), FrameAtoB(wire::MakeSeq(0, 2), 2)},
                    nullptr),
            2u);
  a_.reset();  // A's TX mbufs are still on the ring to B
  EXPECT_GE(internal::SweepMempools(), 1u) << "A's TX pool waits for its mbufs";
  FrameRef rx[4];
  ASSERT_EQ(b_->queue(0).RxBurst(rx), 2u) << "frames of a closed sender are still valid";
  ReleaseFrames({rx, 2});
  EXPECT_EQ(internal::SweepMempools(), 0u) << "every mbuf back: A's pools are freed";
  // Frames nobody receives go back when the link goes.
  b_.reset();
  link_.reset();
  EXPECT_EQ(internal::SweepMempools(), 0u);
}

TEST_F(DpdkRingTest, UnreceivedFramesAreFreedWithTheLink) {
  OpenPair();
  std::vector<FrameBytes> frames(10, FrameAtoB(wire::MakeSeq(0, 1), 1));
  ASSERT_EQ(SendAll(a_->queue(0), frames, nullptr), 10u);
  a_.reset();
  b_.reset();
  EXPECT_GE(internal::SweepMempools(), 1u);
  link_.reset();
  EXPECT_EQ(internal::SweepMempools(), 0u) << "no mempool left behind";
}

TEST_F(DpdkRingTest, OpeningFailsWithTheReason) {
  DpdkOptions options = DpdkPairOptions({}, DpdkRingLink::Side::kA);
  options.port = "net_ring_nothing";
  absl::StatusOr<std::unique_ptr<DpdkDevice>> missing = OpenDpdkDevice(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("net_ring_nothing"));

  DpdkRingLinkOptions link_options{testing::UniqueTestName("r"), 1, 64};
  absl::StatusOr<std::unique_ptr<DpdkRingLink>> link = DpdkRingLink::Create(link_options);
  ASSERT_TRUE(link.ok());
  options.port = (*link)->port_name(DpdkRingLink::Side::kA);
  options.device.num_queues = 4;
  absl::StatusOr<std::unique_ptr<DpdkDevice>> too_many = OpenDpdkDevice(options);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(std::string(too_many.status().message()), HasSubstr("queues"));

  options.port = "net_memif_bad";
  options.source = DpdkPortSource::kCreateVdev;
  options.device.num_queues = 1;
  options.vdev_args = "role=nonsense";
  absl::StatusOr<std::unique_ptr<DpdkDevice>> bad_vdev = OpenDpdkDevice(options);
  ASSERT_FALSE(bad_vdev.ok());
  EXPECT_THAT(std::string(bad_vdev.status().message()), HasSubstr("rte_vdev_init"));
}

// net_ring has no Rx interrupts: by default its queues poll (no wait_fd),
// and a device that requires them refuses to open, saying why.
TEST_F(DpdkRingTest, APortWithoutRxInterruptsPollsOrRefusesWhenTheyAreRequired) {
  OpenPair();
  EXPECT_EQ(a_->queue(0).wait_fd(), -1);
  EXPECT_EQ(b_->queue(0).wait_fd(), -1);
  DpdkRingLinkOptions link;
  link.name = testing::UniqueTestName("ri");
  absl::StatusOr<std::unique_ptr<DpdkRingLink>> created = DpdkRingLink::Create(link);
  ASSERT_TRUE(created.ok()) << created.status();
  DpdkOptions options = DpdkPairOptions(DeviceOptions{}, DpdkRingLink::Side::kA);
  options.port = (*created)->port_name(DpdkRingLink::Side::kA);
  options.rx_interrupts = DpdkRxInterrupts::kRequired;
  absl::StatusOr<std::unique_ptr<DpdkDevice>> device = OpenDpdkDevice(options);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(device.status().message()), HasSubstr("has no Rx interrupts"));
  EXPECT_THAT(std::string(device.status().message()), HasSubstr("net_ring"));
}

}  // namespace
}  // namespace atp::transport
