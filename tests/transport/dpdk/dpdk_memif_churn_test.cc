// Memif peers that die while this process polls: the reproducer of a crash
// (DPDK 22.11's memif driver unmaps a connection's shared memory on the EAL
// interrupt thread while the datapath may be inside rte_eth_rx_burst /
// rte_eth_tx_burst on it; libatp's interrupt gate keeps the two apart, see
// transport/dpdk/interrupt_gate.h) and of a memif client that reconnects to a
// server that came back.
//
// Each round: a child (dpdk_memif_peer, echoing) connects, frames flow both
// ways while one thread of this process polls the port without pause, the
// child is killed with SIGKILL mid-traffic, the link goes down. This process
// must survive every round, and after each kill traffic must flow again with
// the next child. ATP_MEMIF_CHURN_ROUNDS sets the rounds (default 30).
//
// Two busy pollers at most: this process's polling thread and the child.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
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

namespace atp::transport {
namespace {

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }
DeviceAddress Node(const char* ip) { return {Ip(ip), DefaultMacFor(Ip(ip))}; }

int Rounds() {
  const char* value = std::getenv("ATP_MEMIF_CHURN_ROUNDS");
  return value != nullptr && std::atoi(value) > 0 ? std::atoi(value) : 30;
}

// Poller: one thread that sends frames to the peer and receives its echoes
// without ever pausing, so that a disconnect lands inside a burst as often
// as it can.
class Poller {
 public:
  Poller(DpdkDevice* device, const testing::FrameBytes& frame) : device_(device), frame_(frame) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Poller() {
    stop_.store(true, std::memory_order_relaxed);
    thread_.join();
  }
  uint64_t echoes() const { return echoes_.load(std::memory_order_relaxed); }

 private:
  void Run() {
    (void)RegisterDpdkIoThread();
    Queue& queue = device_->queue(0);
    while (!stop_.load(std::memory_order_relaxed)) {
      FrameRef burst[32];
      const size_t n = queue.tx_pool().AllocBurst(burst);
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(burst[i].data, frame_.data(), kFrameBytes);
        burst[i].length = kFrameBytes;
      }
      const size_t taken = queue.TxBurst({burst, n});
      ReleaseFrames({burst + taken, n - taken});
      FrameRef got[32];
      const size_t received = queue.RxBurst(got);
      ReleaseFrames({got, received});
      echoes_.fetch_add(received, std::memory_order_relaxed);
    }
    (void)queue.Flush();
    UnregisterDpdkIoThread();
  }

  DpdkDevice* const device_;
  const testing::FrameBytes frame_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> echoes_{0};
  std::thread thread_;
};

// WaitFor: polls `done` (every millisecond) until it holds or `limit` passes.
template <typename Done>
bool WaitFor(Done done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class DpdkMemifChurnTest : public ::testing::TestWithParam<MemifRole> {
 protected:
  void SetUp() override {
    const absl::Status eal = testing::EnsureTestEal();
    ASSERT_TRUE(eal.ok()) << eal;
    socket_ = "/" + testing::UniqueTestName("atpch");
    MemifOptions memif;
    memif.role = GetParam();
    memif.socket = socket_;
    DpdkOptions options;
    options.address = Node("10.0.0.1");
    options.peers.push_back({Node("10.0.0.2"), 1});
    options.port = testing::UniqueTestName("net_memif");
    options.source = DpdkPortSource::kCreateVdev;
    options.vdev_args = MemifVdevArgs(memif);
    options.link_timeout = TimeDelta::Zero();  // the peer starts in each round
    absl::StatusOr<std::unique_ptr<DpdkDevice>> device = OpenDpdkDevice(options);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
  }

  // RunRounds: the test body, for either role of this process.
  void RunRounds() {
    const std::string peer_role = GetParam() == MemifRole::kServer ? "client" : "server";
    const testing::FrameBytes frame =
        testing::MakeFrame(device_->address(), Node("10.0.0.2"), testing::FrameSpec{wire::MakeSeq(0, 1), 1},
                           device_->base_port());
    Poller poller(device_.get(), frame);
    const int rounds = Rounds();
    for (int round = 0; round < rounds; ++round) {
      SCOPED_TRACE(absl::StrCat("round ", round + 1, " of ", rounds));
      test::ChildProcess peer;  // killed and reaped at the end of the round whatever happens
      ASSERT_TRUE(peer.Spawn({ATP_DPDK_MEMIF_PEER, "--socket=" + socket_, "--role=" + peer_role,
                              "--queues=1", "--address=10.0.0.2", "--peer=10.0.0.1",
                              "--idle_exit_ms=20000"}));
      // Traffic flows both ways (this process is a client: it reconnected).
      const uint64_t before = poller.echoes();
      ASSERT_TRUE(WaitFor([&] { return poller.echoes() >= before + 2000 || !peer.Running(); },
                          std::chrono::seconds(20)));
      ASSERT_TRUE(peer.Running()) << "the peer exited on its own";
      ASSERT_GE(poller.echoes(), before + 2000) << "no traffic with the new peer";
      // Killed mid-traffic: the interrupt thread tears the connection down
      // while the poller is (most of the time) inside a burst.
      peer.Signal(SIGKILL);
      peer.Wait(std::chrono::seconds(10));
      ASSERT_TRUE(WaitFor([&] { return !device_->link_up(); }, std::chrono::seconds(10)))
          << "memif notices the peer's death";
    }
  }

  void TearDown() override { device_.reset(); }

  std::string socket_;
  std::unique_ptr<DpdkDevice> device_;
};

// Server: this process serves, its clients die. Client: this process is the
// client, its servers die, and it reconnects to each new one (DpdkReconnect::kAuto).
TEST_P(DpdkMemifChurnTest, SurvivesPeersKilledMidTrafficAndTalksToTheNext) { RunRounds(); }

INSTANTIATE_TEST_SUITE_P(Roles, DpdkMemifChurnTest,
                         ::testing::Values(MemifRole::kServer, MemifRole::kClient),
                         [](const ::testing::TestParamInfo<MemifRole>& param_info) {
                           return param_info.param == MemifRole::kServer ? "Server" : "Client";
                         });

}  // namespace
}  // namespace atp::transport
