// The kernel UDP backend's own rules: the node table, opening errors, what
// happens to strangers, receive overflow, GSO/GRO.
#include <arpa/inet.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "atp/errno_status.h"
#include "atp/transport/kernel_udp.h"
#include "atp/transport/segmentation.h"
#include "gtest/gtest.h"
#include "tests/transport/transport_test_util.h"
#include "transport/kernel/node_table.h"

namespace atp::transport {
namespace {

using testing::Collector;
using testing::FrameBytes;
using testing::FrameSpec;
using testing::MakeFrame;
using testing::PoolsAreFull;
using testing::SendAll;

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }
DeviceAddress Node(const char* ip) { return {Ip(ip), DefaultMacFor(Ip(ip))}; }

KernelUdpOptions Options(const char* node, uint32_t queues = 1) {
  KernelUdpOptions options;
  options.address = Node(node);
  options.bind = SocketAddress{Ip("127.0.0.1"), 0};
  options.device.num_queues = queues;
  return options;
}

std::unique_ptr<KernelUdpDevice> Open(const KernelUdpOptions& options) {
  auto device = OpenKernelUdpDevice(options);
  EXPECT_TRUE(device.ok()) << device.status();
  return device.ok() ? *std::move(device) : nullptr;
}

TEST(KernelUdpNodeTable, MapsNodesToQueueSocketsAndSendersBack) {
  internal::NodeTable table;
  const KernelUdpPeer ps = KernelUdpPeer::FromPortRange(Node("10.0.0.9"), Ip("127.0.0.1"), 41000, 4);
  ASSERT_TRUE(table.Add(ps).ok());
  const auto index = table.FindNode(Ip("10.0.0.9").value);
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(table.node(*index).queue_sockets.size(), 4u);
  EXPECT_EQ(internal::FromSockaddr(table.node(*index).queue_sockets[3]),
            (SocketAddress{Ip("127.0.0.1"), 41003}));
  EXPECT_EQ(table.FindSender(Ip("127.0.0.1").value, 41002), index);
  EXPECT_FALSE(table.FindSender(Ip("127.0.0.1").value, 41004).has_value());
  EXPECT_FALSE(table.FindNode(Ip("10.0.0.8").value).has_value());
}

TEST(KernelUdpNodeTable, RefusesDuplicatesAndNonAddresses) {
  internal::NodeTable table;
  ASSERT_TRUE(table.Add(KernelUdpPeer::FromPortRange(Node("10.0.0.1"), Ip("127.0.0.1"), 41000, 2)).ok());
  EXPECT_EQ(table.Add(KernelUdpPeer::FromPortRange(Node("10.0.0.1"), Ip("127.0.0.1"), 42000, 1))
                .code(),
            absl::StatusCode::kAlreadyExists)
      << "same node";
  EXPECT_EQ(table.Add(KernelUdpPeer::FromPortRange(Node("10.0.0.2"), Ip("127.0.0.1"), 41001, 1))
                .code(),
            absl::StatusCode::kAlreadyExists)
      << "a socket of another node";
  EXPECT_EQ(table.Add(KernelUdpPeer::FromPortRange(Node("10.0.0.3"), Ip("127.0.0.1"), 0, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.Add(KernelUdpPeer::FromPortRange(Node("10.0.0.4"), Ip("127.0.0.1"), 43000, 0))
                .code(),
            absl::StatusCode::kInvalidArgument);
  KernelUdpPeer twice = KernelUdpPeer::FromPortRange(Node("10.0.0.5"), Ip("127.0.0.1"), 44000, 1);
  twice.queue_sockets.push_back(twice.queue_sockets[0]);
  EXPECT_EQ(table.Add(twice).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(table.FindSender(Ip("127.0.0.1").value, 44000).has_value()) << "nothing half-added";
  EXPECT_EQ(table.size(), 1u);
}

TEST(KernelUdpNodeTable, GroSegmentsAreCutAtTheSegmentSize) {
  EXPECT_EQ(internal::GroSegmentBytes(264, 0, 0), 264u) << "not coalesced: one message";
  EXPECT_EQ(internal::GroSegmentBytes(3 * 264, 264, 0), 264u);
  EXPECT_EQ(internal::GroSegmentBytes(3 * 264, 264, 2 * 264), 264u);
  EXPECT_EQ(internal::GroSegmentBytes(2 * 264 + 100, 264, 2 * 264), 100u) << "a short tail";
}

TEST(KernelUdpOptions, ValidateNamesTheBadField) {
  KernelUdpOptions options = Options("10.0.0.1");
  EXPECT_TRUE(options.Validate().ok());
  KernelUdpOptions bad = options;
  bad.address.ipv4 = wire::Ipv4Address{};
  EXPECT_NE(bad.Validate().message().find("address"), std::string::npos);
  bad = options;
  bad.bind.ip = wire::Ipv4Address{};
  EXPECT_NE(bad.Validate().message().find("bind.ip"), std::string::npos);
  bad = options;
  bad.max_gso_segments = 65;
  EXPECT_NE(bad.Validate().message().find("max_gso_segments"), std::string::npos);
  bad = options;
  bad.gro_buffers = 0;
  EXPECT_NE(bad.Validate().message().find("gro_buffers"), std::string::npos);
  bad = options;
  bad.bind.port = 65530;
  bad.device.num_queues = 8;
  EXPECT_NE(bad.Validate().message().find("bind.port"), std::string::npos);
  bad = options;
  bad.device.num_queues = 0;
  EXPECT_EQ(OpenKernelUdpDevice(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(KernelUdpOptions, AGatewayNeedsWholeFramesAndAPortRange) {
  KernelUdpOptions options = Options("10.0.0.1");
  options.encapsulation = KernelUdpEncapsulation::kWholeFrame;
  EXPECT_TRUE(options.Validate().ok()) << "kWholeFrame without a gateway";
  options.gateway = SocketAddress{Ip("127.0.0.1"), 47000};
  EXPECT_TRUE(options.Validate().ok());

  KernelUdpOptions bad = options;
  bad.encapsulation = KernelUdpEncapsulation::kAtpMessage;
  absl::Status status = bad.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("gateway"), std::string::npos) << status;
  EXPECT_NE(status.message().find("kWholeFrame"), std::string::npos) << status;
  EXPECT_EQ(OpenKernelUdpDevice(bad).status().code(), absl::StatusCode::kInvalidArgument);

  bad = options;
  bad.gateway->port = 65530;  // queue 15 would be at 65545
  status = bad.Validate();
  EXPECT_NE(status.message().find("gateway.port"), std::string::npos) << status;
  bad = options;
  bad.gateway->port = 0;
  EXPECT_NE(bad.Validate().message().find("gateway"), std::string::npos);
  bad = options;
  bad.gateway->ip = wire::Ipv4Address{};
  EXPECT_NE(bad.Validate().message().find("gateway"), std::string::npos);

  EXPECT_EQ(KernelUdpEncapsulationName(KernelUdpEncapsulation::kAtpMessage), "atp_message");
  EXPECT_EQ(KernelUdpEncapsulationName(KernelUdpEncapsulation::kWholeFrame), "whole_frame");
}

TEST(KernelUdpDevice, OpeningAPortInUseFailsSayingSo) {
  auto first = Open(Options("10.0.0.1", 2));
  ASSERT_NE(first, nullptr);
  KernelUdpOptions clash = Options("10.0.0.2", 2);
  clash.bind.port = first->self().queue_sockets[0].port;  // queue 0 collides
  const auto second = OpenKernelUdpDevice(clash);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("in use"), std::string::npos) << second.status();
  // The errno survives the queue's prefix (the Python bindings raise OSError from it).
  EXPECT_EQ(atp::ErrnoOf(second.status()), EADDRINUSE) << second.status();
}

TEST(KernelUdpDevice, APeerRepeatingANodeOrASocketIsABadOption) {
  const auto peer = [](const char* node, uint16_t port) {
    return KernelUdpPeer::FromPortRange(Node(node), Ip("127.0.0.1"), port, 1);
  };
  const std::vector<std::pair<std::vector<KernelUdpPeer>, std::string>> cases = {
      {{peer("10.0.0.9", 48000), peer("10.0.0.9", 48100)}, "peers[1]: node 10.0.0.9"},
      {{peer("10.0.0.1", 48000)}, "peers[0]: node 10.0.0.1"},  // this device's own
      {{peer("10.0.0.7", 48000), peer("10.0.0.8", 48000)}, "peers[1]: node 10.0.0.8: socket"},
  };
  for (const auto& [peers, named] : cases) {
    KernelUdpOptions options = Options("10.0.0.1");
    options.peers = peers;
    const auto device = OpenKernelUdpDevice(options);
    ASSERT_FALSE(device.ok()) << named;
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << device.status();
    EXPECT_NE(device.status().message().find(named), std::string::npos) << device.status();
  }
}

TEST(KernelUdpDevice, BindingAnAddressThatIsNotLocalFailsSayingSo) {
  KernelUdpOptions options = Options("10.0.0.1");
  options.bind.ip = Ip("192.0.2.1");  // TEST-NET-1: no host has it
  const auto device = OpenKernelUdpDevice(options);
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("not an address of this host"), std::string::npos)
      << device.status();
  EXPECT_NE(device.status().message().find("192.0.2.1"), std::string::npos) << device.status();
  EXPECT_EQ(atp::ErrnoOf(device.status()), EADDRNOTAVAIL) << device.status();
}

TEST(KernelUdpDevice, ExplicitPortRangeBindsQueueIAtBasePlusI) {
  // Find a free range by binding with kernel-chosen ports first, then reuse
  // the first one's port as a base (it was just released).
  uint16_t base = 0;
  {
    auto probe = Open(Options("10.0.0.1"));
    ASSERT_NE(probe, nullptr);
    base = probe->self().queue_sockets[0].port;
  }
  KernelUdpOptions options = Options("10.0.0.1", 3);
  options.bind.port = base;
  auto device = OpenKernelUdpDevice(options);
  if (!device.ok()) GTEST_SKIP() << "port range taken meanwhile: " << device.status();
  for (uint32_t q = 0; q < 3; ++q) {
    EXPECT_EQ((*device)->self().queue_sockets[q].port, base + q);
  }
}

TEST(KernelUdpDevice, AskingForAnOffloadTheKernelHasSucceeds) {
  KernelUdpOptions options = Options("10.0.0.1");
  options.gso = Offload::kOn;
  options.gro = Offload::kOn;
  auto device = OpenKernelUdpDevice(options);
  ASSERT_TRUE(device.ok()) << device.status() << " (this kernel has no UDP GSO/GRO?)";
  EXPECT_TRUE((*device)->gso_enabled());
  EXPECT_TRUE((*device)->gro_enabled());
  EXPECT_EQ((*device)->queue(0).capabilities().tx_segmentation, TxSegmentation::kKernelGso);
  EXPECT_EQ((*device)->queue(0).capabilities().rx_coalescing, RxCoalescing::kKernelGro);
  EXPECT_EQ((*device)->queue(0).capabilities().steering, Steering::kSocketPerQueue);
  EXPECT_GE((*device)->queue(0).wait_fd(), 0);
}

// A receiver thread that blocks in poll() on the queue's wait_fd (the
// socket: the runtime's PollingThread sleeps exactly so) wakes when a frame
// arrives and finds it with RxBurst. No sleep synchronises the two threads:
// whether the frame is sent before or after the receiver blocks, the socket
// stays readable until it is read; the receiver's 10 s timeout only turns a
// lost wake-up into a failure instead of a hang.
TEST(KernelUdpWaitFd, ASleepingReceiverWakesWhenAFrameArrives) {
  auto a = Open(Options("10.0.0.1"));
  auto b = Open(Options("10.0.0.2"));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AddPeer(b->self()).ok());
  ASSERT_TRUE(b->AddPeer(a->self()).ok());
  const int fd = b->queue(0).wait_fd();
  ASSERT_GE(fd, 0);
  FrameRef first_try[4];
  ASSERT_EQ(b->queue(0).RxBurst(first_try), 0u) << "nothing sent yet";

  std::atomic<bool> blocking{false};
  int poll_result = -2;
  size_t received = 0;
  FrameBytes got{};
  std::thread receiver([&] {
    pollfd p{fd, POLLIN, 0};
    blocking.store(true, std::memory_order_release);
    poll_result = ::poll(&p, 1, /*timeout_ms=*/10000);
    FrameRef rx[4];
    received = b->queue(0).RxBurst(rx);
    if (received > 0 && rx[0].length == kFrameBytes) std::memcpy(got.data(), rx[0].data, kFrameBytes);
    ReleaseFrames({rx, received});
  });
  while (!blocking.load(std::memory_order_acquire)) std::this_thread::yield();
  const FrameBytes frame = MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(0, 7)});
  EXPECT_EQ(SendAll(a->queue(0), {frame}, nullptr), 1u);  // not ASSERT: join first
  receiver.join();
  EXPECT_EQ(poll_result, 1) << "woken by the frame, not by the timeout";
  ASSERT_EQ(received, 1u);
  EXPECT_EQ(got, frame);
}

// Runs the same exchange with each combination of offloads and both
// encapsulations: the frames that arrive do not depend on them.
class KernelUdpOffloads
    : public ::testing::TestWithParam<std::tuple<Offload, Offload, KernelUdpEncapsulation>> {};

TEST_P(KernelUdpOffloads, FramesArriveTheSameWithOrWithoutGsoAndGro) {
  KernelUdpOptions options_a = Options("10.0.0.1");
  options_a.gso = std::get<0>(GetParam());
  options_a.encapsulation = std::get<2>(GetParam());
  KernelUdpOptions options_b = Options("10.0.0.2");
  options_b.gro = std::get<1>(GetParam());
  options_b.encapsulation = std::get<2>(GetParam());
  auto a = Open(options_a);
  auto b = Open(options_b);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AddPeer(b->self()).ok());
  ASSERT_TRUE(b->AddPeer(a->self()).ok());
  std::vector<FrameBytes> frames;
  for (uint32_t i = 0; i < 100; ++i) {
    frames.push_back(MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(0, i), i}));
  }
  Collector rx(*b);
  ASSERT_EQ(SendAll(a->queue(0), frames, &rx), frames.size());
  ASSERT_TRUE(rx.PollUntil(frames.size()));
  EXPECT_EQ(rx.on_queue(0), frames);
  const QueueStats tx = a->queue(0).stats();
  if (a->gso_enabled()) {
    EXPECT_GT(tx.tx_offloaded_segments, 0u) << "runs of frames to one queue went out as GSO";
  } else {
    EXPECT_EQ(tx.tx_offloaded_segments, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllCombinations, KernelUdpOffloads,
    ::testing::Combine(::testing::Values(Offload::kAuto, Offload::kOff),
                       ::testing::Values(Offload::kAuto, Offload::kOff),
                       ::testing::Values(KernelUdpEncapsulation::kAtpMessage,
                                         KernelUdpEncapsulation::kWholeFrame)));

TEST(KernelUdpDevice, ANodeCanSendToItself) {
  auto a = Open(Options("10.0.0.1", 2));
  ASSERT_NE(a, nullptr);
  const FrameBytes frame = MakeFrame(a->address(), a->address(), FrameSpec{wire::MakeSeq(1, 1)});
  Collector rx(*a);
  ASSERT_EQ(SendAll(a->queue(0), {frame}, &rx), 1u);
  ASSERT_TRUE(rx.PollUntil(1));
  ASSERT_EQ(rx.on_queue(1).size(), 1u);
  EXPECT_EQ(rx.on_queue(1)[0], frame);
}

TEST(KernelUdpDevice, NodesOnSeparateLoopbackAddressesShareAPortRange) {
  // Two "hosts" on one machine: 127.0.0.2 and 127.0.0.3, with the same ports.
  KernelUdpOptions options_a = Options("10.0.0.1", 2);
  options_a.bind.ip = Ip("127.0.0.2");
  auto a = Open(options_a);
  ASSERT_NE(a, nullptr);
  KernelUdpOptions options_b = Options("10.0.0.2", 2);
  options_b.bind = SocketAddress{Ip("127.0.0.3"), a->self().queue_sockets[0].port};
  auto device_b = OpenKernelUdpDevice(options_b);
  if (!device_b.ok()) GTEST_SKIP() << "port taken on 127.0.0.3 meanwhile: " << device_b.status();
  auto& b = *device_b;
  ASSERT_TRUE(a->AddPeer(b->self()).ok());
  ASSERT_TRUE(b->AddPeer(a->self()).ok());
  const FrameBytes to_b = MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(1, 1)});
  const FrameBytes to_a = MakeFrame(b->address(), a->address(), FrameSpec{wire::MakeSeq(0, 2)});
  Collector at_a(*a);
  Collector at_b(*b);
  ASSERT_EQ(SendAll(a->queue(0), {to_b}, &at_b), 1u);
  ASSERT_EQ(SendAll(b->queue(1), {to_a}, &at_a), 1u);
  ASSERT_TRUE(at_b.PollUntil(1));
  ASSERT_TRUE(at_a.PollUntil(1));
  ASSERT_EQ(at_b.on_queue(1).size(), 1u);
  EXPECT_EQ(at_b.on_queue(1)[0], to_b);
  ASSERT_EQ(at_a.on_queue(0).size(), 1u);
  EXPECT_EQ(at_a.on_queue(0)[0], to_a);
}

TEST(KernelUdpDevice, ReceiveOverflowIsCountedAsDropped) {
  KernelUdpOptions options_b = Options("10.0.0.2");
  options_b.socket_buffer_bytes = 4096;  // the kernel doubles it; still a few datagrams
  options_b.gro = Offload::kOff;
  auto a = Open(Options("10.0.0.1"));
  auto b = Open(options_b);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AddPeer(b->self()).ok());
  ASSERT_TRUE(b->AddPeer(a->self()).ok());
  std::vector<FrameBytes> frames;
  for (uint32_t i = 0; i < 500; ++i) {
    frames.push_back(MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(0, i), i}));
  }
  ASSERT_EQ(SendAll(a->queue(0), frames, nullptr), frames.size()) << "the sender is not held back";
  Collector rx(*b);
  rx.Settle();
  // One more frame after the overflow carries the socket's drop count.
  ASSERT_EQ(SendAll(a->queue(0), {frames[0]}, nullptr), 1u);
  rx.PollUntil(rx.total() + 1);
  const QueueStats stats = b->queue(0).stats();
  EXPECT_GT(stats.rx_dropped, 0u);
  EXPECT_EQ(stats.rx_frames + stats.rx_dropped, frames.size() + 1)
      << "every frame either arrived or was counted as dropped";
  EXPECT_TRUE(PoolsAreFull(*b));
}

TEST(KernelUdpDevice, StrangersAndWrongSizesAreCountedAsBad) {
  auto b = Open(Options("10.0.0.2"));
  ASSERT_NE(b, nullptr);
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to = internal::ToSockaddr(b->self().queue_sockets[0]);
  uint8_t message[wire::kMessageBytes + 10] = {};
  for (size_t size : {size_t{0}, size_t{10}, wire::kMessageBytes, wire::kMessageBytes + 10}) {
    ASSERT_EQ(::sendto(fd, message, size, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)),
              static_cast<ssize_t>(size));
  }
  ::close(fd);
  Collector rx(*b);
  EXPECT_TRUE(rx.PollUntilTrue([&] { return b->queue(0).stats().rx_bad_frames >= 4; }));
  rx.Settle();
  EXPECT_EQ(b->queue(0).stats().rx_bad_frames, 4u)
      << "empty, short, unknown sender, long: each one bad datagram";
  EXPECT_EQ(rx.total(), 0u);
  EXPECT_TRUE(PoolsAreFull(*b));
}

// ---- kWholeFrame: the overlay ----

KernelUdpOptions WholeFrameOptions(const char* node, uint32_t queues = 1) {
  KernelUdpOptions options = Options(node, queues);
  options.encapsulation = KernelUdpEncapsulation::kWholeFrame;
  return options;
}

// DatagramSender: a UDP socket of its own on 127.0.0.1 (a port the kernel
// picks) that sends raw datagrams: a device's gateway when its address is
// the device's `gateway`, a stranger otherwise.
class DatagramSender {
 public:
  DatagramSender() : fd_(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) {
    EXPECT_GE(fd_, 0);
    sockaddr_in local = internal::ToSockaddr(SocketAddress{Ip("127.0.0.1"), 0});
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&local), sizeof(local)), 0);
    socklen_t length = sizeof(local);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&local), &length), 0);
    address_ = internal::FromSockaddr(local);
  }
  ~DatagramSender() { ::close(fd_); }
  DatagramSender(const DatagramSender&) = delete;
  DatagramSender& operator=(const DatagramSender&) = delete;

  SocketAddress address() const { return address_; }

  // Send: each of `datagrams` as one datagram to `to`, with IPv4 TOS `tos`.
  void Send(const SocketAddress& to, const std::vector<std::vector<uint8_t>>& datagrams,
            int tos = wire::kTosEct0) {
    ASSERT_EQ(::setsockopt(fd_, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)), 0);
    const sockaddr_in address = internal::ToSockaddr(to);
    for (const std::vector<uint8_t>& datagram : datagrams) {
      ASSERT_EQ(::sendto(fd_, datagram.data(), datagram.size(), 0,
                         reinterpret_cast<const sockaddr*>(&address), sizeof(address)),
                static_cast<ssize_t>(datagram.size()));
    }
  }

 private:
  const int fd_;
  SocketAddress address_;
};

std::vector<uint8_t> Bytes(const FrameBytes& frame) { return {frame.begin(), frame.end()}; }

TEST(KernelUdpWholeFrame, DeclaresItsEncapsulation) {
  auto message = Open(Options("10.0.0.1"));
  auto whole = Open(WholeFrameOptions("10.0.0.2"));
  ASSERT_TRUE(message && whole);
  EXPECT_EQ(message->encapsulation(), KernelUdpEncapsulation::kAtpMessage);
  EXPECT_EQ(whole->encapsulation(), KernelUdpEncapsulation::kWholeFrame);
  EXPECT_EQ(whole->queue(0).capabilities().mtu, kFrameBytes);
}

TEST(KernelUdpWholeFrame, StrangersGoToTheGatewayOnTheQueueTheirPortNames) {
  // `gw` stands for a switch process (a ToR): a kWholeFrame device with 4
  // queues at a known port range (the gateway's queue i is at port + i).
  std::unique_ptr<KernelUdpDevice> gw;
  uint16_t base = 0;
  for (int attempt = 0; attempt < 20 && gw == nullptr; ++attempt) {
    base = Open(Options("10.255.0.9"))->self().queue_sockets[0].port;  // a free port, released
    KernelUdpOptions gw_options = WholeFrameOptions("10.255.0.1", 4);
    gw_options.bind.port = base;
    auto opened = OpenKernelUdpDevice(gw_options);
    if (opened.ok()) gw = *std::move(opened);
  }
  ASSERT_NE(gw, nullptr) << "no free range of 4 ports";
  auto b = Open(WholeFrameOptions("10.0.0.2", 2));
  ASSERT_NE(b, nullptr);
  KernelUdpOptions options_a = WholeFrameOptions("10.0.0.1", 2);
  options_a.gateway = SocketAddress{Ip("127.0.0.1"), base};
  auto a = Open(options_a);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->AddPeer(b->self()).ok());
  // Receivers take frames only from their peers and gateway: the "switch"
  // knows A, B knows A and the "switch".
  ASSERT_TRUE(gw->AddPeer(a->self()).ok());
  ASSERT_TRUE(b->AddPeer(a->self()).ok());
  ASSERT_TRUE(b->AddPeer(gw->self()).ok());

  const DeviceAddress stranger = Node("10.1.1.1");                   // another rack
  const DeviceAddress group{Ip("239.1.0.1"), DefaultMacFor(Ip("239.1.0.1"))};  // multicast
  const FrameBytes to_b = MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(1, 1), 1});
  const FrameBytes to_stranger =
      MakeFrame(a->address(), stranger, FrameSpec{wire::MakeSeq(3, 2), 2});
  const FrameBytes to_group = MakeFrame(a->address(), group, FrameSpec{wire::MakeSeq(0, 3), 3});
  const FrameBytes to_b_queue_5 =
      MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(5, 4), 4});  // B has 2
  Collector at_gw(*gw);
  Collector at_b(*b);
  ASSERT_EQ(SendAll(a->queue(0), {to_b, to_stranger, to_group, to_b_queue_5}, nullptr), 4u);
  ASSERT_TRUE(at_gw.PollUntil(2));
  ASSERT_TRUE(at_b.PollUntil(1));
  at_gw.Settle();
  at_b.Settle();
  ASSERT_EQ(at_b.on_queue(1).size(), 1u);
  EXPECT_EQ(at_b.on_queue(1)[0], to_b) << "a peer is reached directly";
  ASSERT_EQ(at_gw.on_queue(3).size(), 1u);
  EXPECT_EQ(at_gw.on_queue(3)[0], to_stranger) << "byte for byte: the real destination kept";
  ASSERT_EQ(at_gw.on_queue(0).size(), 1u);
  EXPECT_EQ(at_gw.on_queue(0)[0], to_group);
  EXPECT_EQ(at_gw.total(), 2u);
  EXPECT_EQ(a->queue(0).stats().tx_unroutable, 1u) << "a peer's missing queue is not the gateway's";
  EXPECT_EQ(a->queue(0).stats().tx_frames, 3u);

  // The "switch" forwards what it got by the real destination: it knows B
  // (and A) as peers; B receives A's frame exactly as A sent it.
  ASSERT_TRUE(gw->AddPeer(b->self()).ok());
  const FrameBytes via_gw = MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(0, 9), 9});
  ASSERT_EQ(SendAll(gw->queue(2), {via_gw}, nullptr), 1u);
  ASSERT_TRUE(at_b.PollUntil(2));
  ASSERT_EQ(at_b.on_queue(0).size(), 1u);
  EXPECT_EQ(at_b.on_queue(0)[0], via_gw) << "source A, not the switch that forwarded it";
  EXPECT_TRUE(PoolsAreFull(*a));
  EXPECT_TRUE(PoolsAreFull(*b));
  EXPECT_TRUE(PoolsAreFull(*gw));
}

TEST(KernelUdpWholeFrame, WithoutAGatewayStrangersAreUnroutable) {
  auto a = Open(WholeFrameOptions("10.0.0.1"));
  ASSERT_NE(a, nullptr);
  const FrameBytes to_stranger =
      MakeFrame(a->address(), Node("10.1.1.1"), FrameSpec{wire::MakeSeq(0, 1), 1});
  ASSERT_EQ(SendAll(a->queue(0), {to_stranger, to_stranger}, nullptr), 2u);
  EXPECT_EQ(a->queue(0).stats().tx_unroutable, 2u);
  EXPECT_EQ(a->queue(0).stats().tx_frames, 0u);
  EXPECT_TRUE(PoolsAreFull(*a));
}

TEST(KernelUdpWholeFrame, AnAddedPeerIsReachedDirectlyAfterwards) {
  // A cached "no such node, use the gateway" must not outlive AddPeer.
  auto gw = Open(WholeFrameOptions("10.255.0.1"));
  auto b = Open(WholeFrameOptions("10.0.0.2"));
  ASSERT_TRUE(gw && b);
  KernelUdpOptions options_a = WholeFrameOptions("10.0.0.1");
  options_a.gateway = gw->self().queue_sockets[0];
  auto a = Open(options_a);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(gw->AddPeer(a->self()).ok());
  ASSERT_TRUE(b->AddPeer(a->self()).ok());
  const FrameBytes to_b = MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(0, 1), 1});
  Collector at_gw(*gw);
  Collector at_b(*b);
  ASSERT_EQ(SendAll(a->queue(0), {to_b}, nullptr), 1u);
  ASSERT_TRUE(at_gw.PollUntil(1)) << "B unknown yet: through the gateway";
  ASSERT_TRUE(a->AddPeer(b->self()).ok());
  ASSERT_EQ(SendAll(a->queue(0), {to_b}, nullptr), 1u);
  ASSERT_TRUE(at_b.PollUntil(1));
  at_gw.Settle();
  EXPECT_EQ(at_gw.total(), 1u);
  EXPECT_EQ(at_b.on_queue(0)[0], to_b);
}

// Arrivals that are not whole ATP frames for the queue, with and without GRO.
class KernelUdpWholeFrameArrivals : public ::testing::TestWithParam<Offload> {};

TEST_P(KernelUdpWholeFrameArrivals, BadArrivalsAndStrangersAreCountedAndThePeersFramesKept) {
  DatagramSender gateway;  // stands for B's ToR
  KernelUdpOptions options = WholeFrameOptions("10.0.0.2", 2);
  options.gro = GetParam();
  options.gateway = gateway.address();
  auto b = Open(options);
  ASSERT_NE(b, nullptr);
  const DeviceAddress from = Node("10.1.1.1");  // behind the gateway: no node of B's table
  const FrameBytes good = MakeFrame(from, b->address(), FrameSpec{wire::MakeSeq(0, 1), 1});
  const FrameBytes other_queue =
      MakeFrame(from, b->address(), FrameSpec{wire::MakeSeq(1, 2), 2});  // port of queue 1
  const FrameBytes beyond = MakeFrame(from, b->address(), FrameSpec{wire::MakeSeq(7, 3), 3});
  FrameBytes not_ipv4 = good;
  not_ipv4[12] = 0x86;
  not_ipv4[13] = 0xDD;
  FrameBytes not_udp = good;
  not_udp[wire::kIpv4Offset + 9] = 6;  // TCP
  FrameBytes ip_options = good;
  ip_options[wire::kIpv4Offset] = 0x46;
  std::vector<uint8_t> longer = Bytes(good);
  longer.push_back(0);
  std::vector<uint8_t> shorter = Bytes(good);
  shorter.pop_back();
  const std::vector<std::vector<uint8_t>> bad = {
      {},                                    // empty
      std::vector<uint8_t>(100, 0),          // short
      std::vector<uint8_t>(wire::kMessageBytes, 0),  // an ATP message: the other encapsulation
      shorter,
      longer,
      Bytes(not_ipv4),
      Bytes(not_udp),
      Bytes(ip_options),
      Bytes(other_queue),                    // steering is the sender's: queue 1's socket
      Bytes(beyond),                         // port of queue 7: not this device's range
  };
  gateway.Send(b->self().queue_sockets[0], bad);
  // A good frame from a socket that is neither the gateway nor a node of the
  // table (any local process could send it): dropped, counted.
  DatagramSender stranger;
  stranger.Send(b->self().queue_sockets[0], {Bytes(good)});
  gateway.Send(b->self().queue_sockets[0], {Bytes(good)});
  Collector rx(*b);
  ASSERT_TRUE(rx.PollUntilTrue(
      [&] { return b->queue(0).stats().rx_bad_frames >= bad.size() + 1 && rx.total() >= 1; }));
  rx.Settle();
  EXPECT_EQ(b->queue(0).stats().rx_bad_frames, bad.size() + 1);
  ASSERT_EQ(rx.on_queue(0).size(), 1u);
  EXPECT_EQ(rx.on_queue(0)[0], good) << "kept as received";
  EXPECT_EQ(rx.on_queue(1).size(), 0u);
  EXPECT_TRUE(PoolsAreFull(*b));
}

TEST_P(KernelUdpWholeFrameArrivals, OuterCongestionMarksAnEctInnerFrame) {
  DatagramSender gateway;
  KernelUdpOptions options = WholeFrameOptions("10.0.0.2");
  options.gro = GetParam();
  options.gateway = gateway.address();
  auto b = Open(options);
  ASSERT_NE(b, nullptr);
  const DeviceAddress from = Node("10.1.1.1");
  const FrameBytes ect = MakeFrame(from, b->address(), FrameSpec{wire::MakeSeq(0, 1), 1});
  FrameSpec ce_spec{wire::MakeSeq(0, 1), 1};
  ce_spec.ip_tos = wire::kTosCe;
  const FrameBytes ce = MakeFrame(from, b->address(), ce_spec);
  Collector rx(*b);
  // Outer CE (a queue on the overlay's path marked it): the inner ECT(0)
  // frame arrives as CE, with a checksum that verifies: byte for byte what
  // the sender would have built with CE.
  gateway.Send(b->self().queue_sockets[0], {Bytes(ect)}, wire::kTosCe);
  ASSERT_TRUE(rx.PollUntil(1));
  EXPECT_EQ(rx.on_queue(0)[0], ce);
  EXPECT_EQ(wire::ValidateFrame(rx.on_queue(0)[0], b->base_port()), wire::DecodeError::kOk);
  // Outer ECT(0): the inner mark, CE or not, is kept as sent.
  gateway.Send(b->self().queue_sockets[0], {Bytes(ce), Bytes(ect)}, wire::kTosEct0);
  ASSERT_TRUE(rx.PollUntil(3));
  EXPECT_EQ(rx.on_queue(0)[1], ce);
  EXPECT_EQ(rx.on_queue(0)[2], ect);
  // A frame that is not ECN-capable is not marked (RFC 6040 would drop it;
  // the decoder refuses its TOS anyway).
  FrameBytes not_ect = ect;
  not_ect[wire::kIpv4Offset + 1] = 0;
  gateway.Send(b->self().queue_sockets[0], {Bytes(not_ect)}, wire::kTosCe);
  ASSERT_TRUE(rx.PollUntil(4));
  EXPECT_EQ(rx.on_queue(0)[3], not_ect);
}

INSTANTIATE_TEST_SUITE_P(GroOnAndOff, KernelUdpWholeFrameArrivals,
                         ::testing::Values(Offload::kAuto, Offload::kOff),
                         [](const ::testing::TestParamInfo<Offload>& param) {
                           return std::string(param.param == Offload::kOff ? "NoGro" : "Gro");
                         });

TEST(KernelUdpWholeFrame, SegmentationJobsGoOutAsGsoOf306ByteSegments) {
  KernelUdpOptions options_a = WholeFrameOptions("10.0.0.1");
  options_a.gso = Offload::kOn;
  KernelUdpOptions options_b = WholeFrameOptions("10.0.0.2");
  options_b.gro = Offload::kOn;
  auto a = Open(options_a);
  auto b = Open(options_b);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AddPeer(b->self()).ok());
  ASSERT_TRUE(b->AddPeer(a->self()).ok());
  constexpr size_t kSegments = 200;
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  wire::EncodePayload(testing::MakePayload(4), payload);
  std::vector<const uint8_t*> pointers(kSegments, payload.data());
  const FrameBytes first =
      MakeFrame(a->address(), b->address(), FrameSpec{wire::MakeSeq(0, 10), 4});
  SegmentationJob job = SegmentationJob::FromFrame(first, pointers);
  Collector rx(*b);
  ASSERT_TRUE(SendSegmented(a->queue(0), job, &rx));
  ASSERT_TRUE(rx.PollUntil(kSegments));
  for (size_t i = 0; i < kSegments; ++i) {
    EXPECT_EQ(rx.on_queue(0)[i],
              MakeFrame(a->address(), b->address(),
                        FrameSpec{wire::MakeSeq(0, 10 + static_cast<uint32_t>(i)), 4}))
        << "segment " << i;
  }
  EXPECT_EQ(a->queue(0).stats().tx_offloaded_segments, kSegments);
  EXPECT_EQ(b->queue(0).stats().rx_bad_frames, 0u);
}

}  // namespace
}  // namespace atp::transport
