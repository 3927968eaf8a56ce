// The DPDK backend over memif. In one process: several ports on one socket
// (id=N), the port's own MAC. Across two processes: this test process is the
// memif server, a child (dpdk_memif_peer, libatp's DPDK backend too) the
// client that echoes every frame back. Two busy pollers at most: ctest holds
// the busy_pollers lock for the duration.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/transport/dpdk.h"
#include "gtest/gtest.h"
#include "tests/common/child_process.h"
#include "tests/transport/dpdk/test_eal.h"
#include "tests/transport/transport_test_util.h"
#include "transport/dpdk/mbuf_pool.h"

namespace atp::transport {
namespace {

using testing::FrameBytes;
using testing::FrameSpec;
using testing::MakeFrame;
using testing::PoolsAreFull;

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }
DeviceAddress Node(const char* ip) { return {Ip(ip), DefaultMacFor(Ip(ip))}; }

// Echoed: what the peer sends back for `frame`: the addresses swapped.
FrameBytes Echoed(FrameBytes frame) {
  std::swap_ranges(frame.begin(), frame.begin() + 6, frame.begin() + 6);
  uint8_t* ip = frame.data() + wire::kIpv4Offset + 12;
  std::swap_ranges(ip, ip + 4, ip + 4);
  return frame;
}

class DpdkMemifProcessTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kQueues = 4;

  void SetUp() override {
    const absl::Status eal = testing::EnsureTestEal();
    ASSERT_TRUE(eal.ok()) << eal;
    socket_ = "/" + testing::UniqueTestName("atpmp");
    MemifOptions memif;
    memif.role = MemifRole::kServer;
    memif.socket = socket_;
    DpdkOptions options;
    options.device.num_queues = kQueues;
    options.address = Node("10.0.0.1");
    options.peers.push_back({Node("10.0.0.2"), kQueues});
    options.port = testing::UniqueTestName("net_memif");
    options.source = DpdkPortSource::kCreateVdev;
    options.vdev_args = MemifVdevArgs(memif);
    options.link_timeout = TimeDelta::Zero();  // the client starts below
    absl::StatusOr<std::unique_ptr<DpdkDevice>> device = OpenDpdkDevice(options);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
    ASSERT_TRUE(child_.Spawn({ATP_DPDK_MEMIF_PEER, "--socket=" + socket_, "--role=client",
                              absl::StrCat("--queues=", kQueues), "--address=10.0.0.2",
                              "--peer=10.0.0.1", "--idle_exit_ms=20000"}));
    const absl::Status link = device_->WaitForLink(TimeDelta::FromSeconds(20));
    ASSERT_TRUE(link.ok()) << link;
  }

  void TearDown() override {
    device_.reset();  // the link goes down: the child sees it and exits
    if (child_.unreaped()) {
      EXPECT_EQ(child_.Wait(std::chrono::seconds(10)), 0) << "the peer exits cleanly";
    }
  }

  FrameBytes FrameToPeer(uint32_t seq, uint32_t seed) {
    return MakeFrame(device_->address(), Node("10.0.0.2"), FrameSpec{seq, seed},
                     device_->base_port());
  }

  // PollAll: one RxBurst on every queue, appending to got[q]; how many came.
  size_t PollAll(std::vector<std::vector<FrameBytes>>& got) {
    size_t round = 0;
    for (uint32_t q = 0; q < kQueues; ++q) {
      FrameRef frames[32];
      const size_t n = device_->queue(q).RxBurst(frames);
      for (size_t i = 0; i < n; ++i) {
        FrameBytes bytes;
        std::memcpy(bytes.data(), frames[i].data, kFrameBytes);
        got[q].push_back(bytes);
      }
      ReleaseFrames({frames, n});
      round += n;
    }
    return round;
  }

  // Exchange: sends `frames` on queue `tx` and collects the echoes, both
  // from this one thread (this process is one busy poller, the peer the
  // other), backing off when nothing moves; gives up after 20 s.
  std::vector<std::vector<FrameBytes>> Exchange(uint32_t tx, const std::vector<FrameBytes>& frames) {
    std::vector<std::vector<FrameBytes>> got(kQueues);
    Queue& queue = device_->queue(tx);
    size_t sent = 0;
    size_t received = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (received < frames.size() && std::chrono::steady_clock::now() < deadline) {
      size_t taken = 0;
      if (sent < frames.size()) {
        FrameRef burst[32];
        const size_t n = queue.tx_pool().AllocBurst({burst, std::min<size_t>(32, frames.size() - sent)});
        for (size_t i = 0; i < n; ++i) {
          std::memcpy(burst[i].data, frames[sent + i].data(), kFrameBytes);
          burst[i].length = kFrameBytes;
        }
        taken = queue.TxBurst({burst, n});
        ReleaseFrames({burst + taken, n - taken});
        sent += taken;
      }
      queue.Flush();
      const size_t round = PollAll(got);
      received += round;
      if (round == 0 && taken == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return got;
  }

  std::string socket_;
  std::unique_ptr<DpdkDevice> device_;
  test::ChildProcess child_;  // the peer: output to the test's own
};

TEST_F(DpdkMemifProcessTest, EchoAcrossProcessesKeepsBytesQueuesAndOrder) {
  constexpr uint32_t kPerQueue = 2000;
  std::vector<std::vector<FrameBytes>> want(kQueues);
  // Sent from queue 0 only: the peer receives everything on its queue 0 and
  // steers each frame to the queue its port names before echoing it there.
  std::vector<FrameBytes> all;
  for (uint32_t i = 0; i < kPerQueue; ++i) {
    for (uint32_t q = 0; q < kQueues; ++q) {
      all.push_back(FrameToPeer(wire::MakeSeq(q, i), i * kQueues + q));
      want[q].push_back(Echoed(all.back()));
    }
  }
  const std::vector<std::vector<FrameBytes>> got = Exchange(0, all);
  for (uint32_t q = 0; q < kQueues; ++q) {
    ASSERT_EQ(got[q].size(), kPerQueue) << "queue " << q;
    EXPECT_EQ(got[q], want[q]) << "queue " << q << ": bytes or order differ";
  }
  EXPECT_TRUE(PoolsAreFull(*device_));
}

TEST_F(DpdkMemifProcessTest, SegmentationJobCrossesProcessesByteExact) {
  constexpr size_t kSegments = 100;
  std::vector<std::array<uint8_t, wire::kPayloadBytes>> payloads(kSegments);
  std::vector<const uint8_t*> pointers;
  for (size_t i = 0; i < kSegments; ++i) {
    wire::EncodePayload(testing::MakePayload(static_cast<uint32_t>(i)), payloads[i]);
    pointers.push_back(payloads[i].data());
  }
  const uint32_t seq0 = wire::MakeSeq(3, 10);
  SegmentationJob job = SegmentationJob::FromFrame(FrameToPeer(seq0, 0), pointers);
  std::vector<std::vector<FrameBytes>> got(kQueues);
  size_t received = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((!job.empty() || received < kSegments) && std::chrono::steady_clock::now() < deadline) {
    const size_t taken = job.empty() ? 0 : device_->queue(2).TxSegmented(job);
    job.Advance(taken);  // from queue 2, to the peer's queue 3
    device_->queue(2).Flush();
    const size_t round = PollAll(got);
    received += round;
    if (round == 0 && taken == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  ASSERT_TRUE(job.empty());
  ASSERT_EQ(got[3].size(), kSegments);
  for (size_t i = 0; i < kSegments; ++i) {
    const FrameBytes sent = MakeFrame(device_->address(), Node("10.0.0.2"),
                                      FrameSpec{wire::MakeSeq(3, 10 + static_cast<uint32_t>(i)),
                                                static_cast<uint32_t>(i)},
                                      device_->base_port());
    EXPECT_EQ(got[3][i], Echoed(sent)) << "segment " << i;
  }
  EXPECT_TRUE(PoolsAreFull(*device_));
}

TEST_F(DpdkMemifProcessTest, PeerThatDiesTakesTheLinkDownAndNothingLeaks) {
  ASSERT_EQ(Exchange(0, {FrameToPeer(wire::MakeSeq(1, 1), 1)})[1].size(), 1u);
  child_.Signal(SIGKILL);
  EXPECT_EQ(child_.Wait(std::chrono::seconds(5)), -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (device_->link_up() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(device_->link_up()) << "memif notices the peer's socket closing";
  // Sending into a dead link: frames wait (back-pressure), nothing is lost
  // or leaked, and closing the device gives every buffer back.
  std::vector<FrameBytes> frames(100, FrameToPeer(wire::MakeSeq(0, 2), 2));
  const size_t taken = testing::SendAll(device_->queue(0), frames, nullptr);
  EXPECT_GT(device_->queue(0).Flush(), 0u);
  EXPECT_EQ(device_->queue(0).Flush(), taken);
  device_.reset();
  EXPECT_EQ(internal::SweepMempools(), 0u) << "every mempool freed";
}

// OpenMemif: one memif port of this process.
absl::StatusOr<std::unique_ptr<DpdkDevice>> OpenMemif(const MemifOptions& memif, const char* ip,
                                                      const char* peer_ip) {
  DpdkOptions options;
  options.address = Node(ip);
  options.peers.push_back({Node(peer_ip), 1});
  options.port = testing::UniqueTestName("net_memif");
  options.source = DpdkPortSource::kCreateVdev;
  options.vdev_args = MemifVdevArgs(memif);
  options.link_timeout = TimeDelta::Zero();
  return OpenDpdkDevice(options);
}

TEST(DpdkMemifInProcess, SeveralPortsShareOneSocketByInterfaceId) {
  ASSERT_TRUE(testing::EnsureTestEal().ok());
  MemifOptions memif;
  memif.socket = "/" + testing::UniqueTestName("atpmi");
  std::vector<std::unique_ptr<DpdkDevice>> servers;
  std::vector<std::unique_ptr<DpdkDevice>> clients;
  for (uint32_t id = 0; id < 2; ++id) {
    memif.id = id;
    memif.role = MemifRole::kServer;
    const char* server_ip = id == 0 ? "10.0.1.1" : "10.0.2.1";
    const char* client_ip = id == 0 ? "10.0.1.2" : "10.0.2.2";
    absl::StatusOr<std::unique_ptr<DpdkDevice>> server = OpenMemif(memif, server_ip, client_ip);
    ASSERT_TRUE(server.ok()) << server.status();
    servers.push_back(*std::move(server));
    memif.role = MemifRole::kClient;
    absl::StatusOr<std::unique_ptr<DpdkDevice>> client = OpenMemif(memif, client_ip, server_ip);
    ASSERT_TRUE(client.ok()) << client.status();
    clients.push_back(*std::move(client));
  }
  for (uint32_t id = 0; id < 2; ++id) {
    ASSERT_TRUE(servers[id]->WaitForLink(TimeDelta::FromSeconds(5)).ok());
    ASSERT_TRUE(clients[id]->WaitForLink(TimeDelta::FromSeconds(5)).ok());
  }
  // Interface i's server reaches interface i's client only.
  for (uint32_t id = 0; id < 2; ++id) {
    const FrameBytes frame = MakeFrame(servers[id]->address(), clients[id]->address(),
                                       FrameSpec{wire::MakeSeq(0, id), id}, wire::kDefaultBasePort);
    ASSERT_EQ(testing::SendAll(servers[id]->queue(0), {frame}, nullptr), 1u);
    servers[id]->queue(0).Flush();
  }
  for (uint32_t id = 0; id < 2; ++id) {
    testing::Collector rx(*clients[id]);
    ASSERT_TRUE(rx.PollUntil(1));
    rx.Settle();
    ASSERT_EQ(rx.on_queue(0).size(), 1u) << "interface " << id;
    EXPECT_EQ(rx.on_queue(0)[0][kSeqOffset + 2], id) << "its own frame";
  }
  for (auto& device : servers) EXPECT_TRUE(PoolsAreFull(*device));
}

TEST(DpdkMemifInProcess, AZeroMacTakesThePortsOwn) {
  ASSERT_TRUE(testing::EnsureTestEal().ok());
  MemifOptions memif;
  memif.socket = "/" + testing::UniqueTestName("atpmm");
  absl::StatusOr<std::unique_ptr<DpdkDevice>> device = OpenMemif(memif, "10.0.3.1", "10.0.3.2");
  ASSERT_TRUE(device.ok()) << device.status();
  // OpenMemif passes DefaultMacFor(ip); open again with a zero MAC.
  DpdkOptions options;
  options.address = {Ip("10.0.3.3"), wire::MacAddress{}};
  options.port = testing::UniqueTestName("net_memif");
  options.source = DpdkPortSource::kCreateVdev;
  memif.id = 1;
  options.vdev_args = MemifVdevArgs(memif);
  options.link_timeout = TimeDelta::Zero();
  absl::StatusOr<std::unique_ptr<DpdkDevice>> zero_mac = OpenDpdkDevice(options);
  ASSERT_TRUE(zero_mac.ok()) << zero_mac.status();
  EXPECT_NE((*zero_mac)->address().mac, wire::MacAddress{}) << "memif ports have a MAC of their own";
  EXPECT_EQ((*device)->address().mac, DefaultMacFor(Ip("10.0.3.1"))) << "a given MAC is kept";
}

}  // namespace
}  // namespace atp::transport
