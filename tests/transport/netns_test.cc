// Kernel UDP across two network namespaces joined by a veth pair (root; the
// tests skip with the reason otherwise): an echo server on its own thread in
// both encapsulations, and the kWholeFrame overlay through a forwarding
// "switch" that routes by the frames' real destinations. The conformance
// suite runs across namespaces too (transport_netns_conformance_test).
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "atp/transport/kernel_udp.h"
#include "gtest/gtest.h"
#include "tests/transport/netns_pair.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport::testing {
namespace {

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }
DeviceAddress Node(const char* ip) { return {Ip(ip), DefaultMacFor(Ip(ip))}; }

#define ATP_NETNS_OR_SKIP(pair)                                                  \
  absl::StatusOr<std::unique_ptr<NetnsPair>> pair##_or = NetnsPair::Create();    \
  if (!pair##_or.ok()) GTEST_SKIP() << "no namespaces: " << pair##_or.status(); \
  std::unique_ptr<NetnsPair> pair = *std::move(pair##_or)

// Swapped: `frame` as an echo server returns it: addresses swapped (MACs,
// IPv4), everything else as it came; the IPv4 checksum does not change.
FrameBytes Swapped(FrameBytes frame) {
  std::swap_ranges(frame.begin(), frame.begin() + 6, frame.begin() + 6);
  std::swap_ranges(frame.begin() + wire::kIpv4Offset + 12, frame.begin() + wire::kIpv4Offset + 16,
                   frame.begin() + wire::kIpv4Offset + 16);
  return frame;
}

// EchoServer: a thread that sends every frame arriving on `queue` back to its
// sender, sleeping on the queue's wait_fd when idle (no busy polling).
class EchoServer {
 public:
  explicit EchoServer(Queue& queue) : queue_(queue), thread_([this] { Run(); }) {}
  ~EchoServer() {
    stop_.store(true);
    thread_.join();
  }
  uint64_t echoed() const { return echoed_.load(); }

 private:
  void Run() {
    FrameRef frames[32];
    while (!stop_.load(std::memory_order_relaxed)) {
      const size_t n = queue_.RxBurst(frames);
      if (n == 0) {
        pollfd fd{queue_.wait_fd(), POLLIN, 0};
        ::poll(&fd, 1, 10);
        continue;
      }
      for (size_t i = 0; i < n; ++i) {
        uint8_t* f = frames[i].data;
        std::swap_ranges(f, f + 6, f + 6);
        std::swap_ranges(f + wire::kIpv4Offset + 12, f + wire::kIpv4Offset + 16,
                         f + wire::kIpv4Offset + 16);
      }
      size_t sent = 0;
      for (int tries = 0; sent < n && tries < 1000; ++tries) {
        sent += queue_.TxBurst({frames + sent, n - sent});
        queue_.Flush();
      }
      ReleaseFrames({frames + sent, n - sent});
      echoed_.fetch_add(sent);
    }
  }

  Queue& queue_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> echoed_{0};
  std::thread thread_;
};

class KernelUdpNetns : public ::testing::TestWithParam<KernelUdpEncapsulation> {};

TEST_P(KernelUdpNetns, EchoAcrossNamespacesIsByteExactAndInOrder) {
  ATP_NETNS_OR_SKIP(netns);
  KernelUdpOptions options;
  options.encapsulation = GetParam();
  options.device.num_queues = 2;
  options.address = Node("10.0.0.1");
  options.bind = SocketAddress{netns->ip_a(), 0};
  auto a = OpenKernelUdpDeviceIn(netns->a(), options);
  ASSERT_TRUE(a.ok()) << a.status();
  options.address = Node("10.0.0.2");
  options.bind = SocketAddress{netns->ip_b(), 0};
  auto b = OpenKernelUdpDeviceIn(netns->b(), options);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*a)->AddPeer((*b)->self()).ok());
  ASSERT_TRUE((*b)->AddPeer((*a)->self()).ok());

  EchoServer echo((*b)->queue(1));
  constexpr uint32_t kFrames = 3000;
  constexpr size_t kWindow = 256;  // in flight at most: no receive buffer overflows
  std::vector<FrameBytes> sent;
  for (uint32_t i = 0; i < kFrames; ++i) {
    FrameSpec spec{wire::MakeSeq(1, i), i};
    if (i % 7 == 0) spec.ip_tos = wire::kTosCe;
    sent.push_back(MakeFrame((*a)->address(), (*b)->address(), spec));
  }
  Collector rx(**a);
  size_t next = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (rx.total() < kFrames && std::chrono::steady_clock::now() < deadline) {
    const size_t can = std::min(kFrames - next, kWindow - (next - rx.total()));
    if (can > 0) {
      const std::vector<FrameBytes> burst(sent.begin() + static_cast<ptrdiff_t>(next),
                                          sent.begin() + static_cast<ptrdiff_t>(next + can));
      ASSERT_EQ(SendAll((*a)->queue(0), burst, nullptr), can);
      next += can;
    }
    if (rx.PollOnce() == 0) {
      pollfd fd{(*a)->queue(1).wait_fd(), POLLIN, 0};
      ::poll(&fd, 1, 10);
    }
  }
  ASSERT_EQ(rx.on_queue(1).size(), kFrames) << "echoed " << echo.echoed();
  for (uint32_t i = 0; i < kFrames; ++i) {
    ASSERT_EQ(rx.on_queue(1)[i], Swapped(sent[i])) << "frame " << i;
  }
  EXPECT_EQ((*b)->queue(1).stats().rx_bad_frames, 0u);
  EXPECT_EQ((*a)->queue(1).stats().rx_dropped, 0u);
}

TEST_P(KernelUdpNetns, SegmentationJobsCrossTheVethWithGso) {
  ATP_NETNS_OR_SKIP(netns);
  KernelUdpOptions options;
  options.encapsulation = GetParam();
  options.address = Node("10.0.0.1");
  options.bind = SocketAddress{netns->ip_a(), 0};
  auto a = OpenKernelUdpDeviceIn(netns->a(), options);
  ASSERT_TRUE(a.ok()) << a.status();
  options.address = Node("10.0.0.2");
  options.bind = SocketAddress{netns->ip_b(), 0};
  auto b = OpenKernelUdpDeviceIn(netns->b(), options);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*a)->AddPeer((*b)->self()).ok());
  ASSERT_TRUE((*b)->AddPeer((*a)->self()).ok());  // kAtpMessage: B rebuilds A's address
  constexpr size_t kSegments = 128;
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  wire::EncodePayload(MakePayload(3), payload);
  std::vector<const uint8_t*> pointers(kSegments, payload.data());
  const FrameBytes first =
      MakeFrame((*a)->address(), (*b)->address(), FrameSpec{wire::MakeSeq(0, 50), 3});
  SegmentationJob job = SegmentationJob::FromFrame(first, pointers);
  Collector rx(**b);
  ASSERT_TRUE(SendSegmented((*a)->queue(0), job, &rx));
  ASSERT_TRUE(rx.PollUntil(kSegments))
      << rx.total() << " arrived; rx_bad_frames " << (*b)->queue(0).stats().rx_bad_frames
      << ", rx_dropped " << (*b)->queue(0).stats().rx_dropped;
  for (size_t i = 0; i < kSegments; ++i) {
    ASSERT_EQ(rx.on_queue(0)[i],
              MakeFrame((*a)->address(), (*b)->address(),
                        FrameSpec{wire::MakeSeq(0, 50 + static_cast<uint32_t>(i)), 3}))
        << "segment " << i;
  }
  if ((*a)->gso_enabled()) {
    EXPECT_EQ((*a)->queue(0).stats().tx_offloaded_segments, kSegments)
        << "veth takes UDP GSO sends (the kernel segments them, or passes them through)";
  }
}

INSTANTIATE_TEST_SUITE_P(Encapsulations, KernelUdpNetns,
                         ::testing::Values(KernelUdpEncapsulation::kAtpMessage,
                                           KernelUdpEncapsulation::kWholeFrame),
                         [](const ::testing::TestParamInfo<KernelUdpEncapsulation>& param) {
                           return std::string(KernelUdpEncapsulationName(param.param));
                         });

// The overlay: worker W in namespace a knows no node, only its gateway, a
// "ToR" G in namespace b; G knows W and X (also in b) and forwards whatever
// arrives by the frame's IPv4 destination (here the test's loop is the
// switch). X answers W through G as well.
TEST(KernelUdpNetnsOverlay, FramesCrossAForwarderThatRoutesByTheirRealDestination) {
  ATP_NETNS_OR_SKIP(netns);
  KernelUdpOptions g_options;
  g_options.encapsulation = KernelUdpEncapsulation::kWholeFrame;
  g_options.address = Node("10.255.0.1");
  g_options.bind = SocketAddress{netns->ip_b(), 0};
  auto g = OpenKernelUdpDeviceIn(netns->b(), g_options);
  ASSERT_TRUE(g.ok()) << g.status();
  const SocketAddress gateway = (*g)->self().queue_sockets[0];  // one queue: port + 0

  KernelUdpOptions w_options = g_options;
  w_options.address = Node("10.1.0.1");
  w_options.bind = SocketAddress{netns->ip_a(), 0};
  w_options.gateway = gateway;
  auto w = OpenKernelUdpDeviceIn(netns->a(), w_options);
  ASSERT_TRUE(w.ok()) << w.status();
  KernelUdpOptions x_options = g_options;
  x_options.address = Node("10.1.200.1");
  x_options.gateway = gateway;
  auto x = OpenKernelUdpDeviceIn(netns->b(), x_options);
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE((*g)->AddPeer((*w)->self()).ok());
  ASSERT_TRUE((*g)->AddPeer((*x)->self()).ok());

  std::vector<FrameBytes> w_to_x;
  std::vector<FrameBytes> x_to_w;
  for (uint32_t i = 0; i < 200; ++i) {
    w_to_x.push_back(MakeFrame((*w)->address(), (*x)->address(), FrameSpec{wire::MakeSeq(0, i), i}));
    x_to_w.push_back(MakeFrame((*x)->address(), (*w)->address(), FrameSpec{wire::MakeSeq(0, i), i}));
  }
  Collector at_w(**w);
  Collector at_x(**x);
  ASSERT_EQ(SendAll((*w)->queue(0), w_to_x, nullptr), w_to_x.size());
  ASSERT_EQ(SendAll((*x)->queue(0), x_to_w, nullptr), x_to_w.size());
  uint64_t forwarded = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((at_w.total() < x_to_w.size() || at_x.total() < w_to_x.size()) &&
         std::chrono::steady_clock::now() < deadline) {
    FrameRef frames[32];
    const size_t n = (*g)->queue(0).RxBurst(frames);
    size_t sent = 0;
    for (int tries = 0; sent < n && tries < 1000; ++tries) {
      sent += (*g)->queue(0).TxBurst({frames + sent, n - sent});
      (*g)->queue(0).Flush();  // taken frames may leave only at Flush (atp/transport.h)
    }
    ReleaseFrames({frames + sent, n - sent});
    forwarded += sent;
    const size_t arrived = at_w.PollOnce() + at_x.PollOnce();
    if (n == 0 && arrived == 0) {
      pollfd fds[3] = {{(*g)->queue(0).wait_fd(), POLLIN, 0},
                       {(*w)->queue(0).wait_fd(), POLLIN, 0},
                       {(*x)->queue(0).wait_fd(), POLLIN, 0}};
      ::poll(fds, 3, 10);
    }
  }
  EXPECT_EQ(forwarded, w_to_x.size() + x_to_w.size());
  EXPECT_EQ(at_x.on_queue(0), w_to_x) << "byte for byte, W's addresses kept through G";
  EXPECT_EQ(at_w.on_queue(0), x_to_w);
  EXPECT_EQ((*g)->queue(0).stats().tx_unroutable, 0u);
  EXPECT_TRUE(PoolsAreFull(**g));
}

}  // namespace
}  // namespace atp::transport::testing
