// tests/transport/backends.cc: the harnesses of the backends compiled in.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/config.h"
#include "atp/transport/kernel_udp.h"
#include "atp/transport/loopback.h"
#include "tests/transport/backend_harness.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport::testing {
namespace {

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }

class LoopbackHarness final : public BackendHarness {
 public:
  absl::StatusOr<DevicePair> Open(const DeviceOptions& options) override {
    std::shared_ptr<LoopbackWire> wire = LoopbackWire::Create({});
    LoopbackEndpointOptions endpoint;
    endpoint.device = options;
    endpoint.address = HarnessAddressA();
    absl::StatusOr<std::unique_ptr<Device>> a = wire->AddEndpoint(endpoint);
    if (!a.ok()) return a.status();
    endpoint.address = HarnessAddressB();
    absl::StatusOr<std::unique_ptr<Device>> b = wire->AddEndpoint(endpoint);
    if (!b.ok()) return b.status();
    return DevicePair{wire, *std::move(a), *std::move(b)};
  }

  absl::Status InjectMalformed(DevicePair&, uint32_t, int) override {
    return absl::UnimplementedError("the loopback wire carries only whole frames");
  }
};

class KernelUdpHarness final : public BackendHarness {
 public:
  explicit KernelUdpHarness(KernelUdpEncapsulation encapsulation)
      : encapsulation_(encapsulation) {}

  absl::StatusOr<DevicePair> Open(const DeviceOptions& options) override {
    KernelUdpOptions kernel;
    kernel.device = options;
    kernel.encapsulation = encapsulation_;
    kernel.bind = SocketAddress{Ip("127.0.0.1"), 0};  // ephemeral ports: tests run in parallel
    kernel.address = HarnessAddressA();
    absl::StatusOr<std::unique_ptr<KernelUdpDevice>> a = OpenKernelUdpDevice(kernel);
    if (!a.ok()) return a.status();
    kernel.address = HarnessAddressB();
    absl::StatusOr<std::unique_ptr<KernelUdpDevice>> b = OpenKernelUdpDevice(kernel);
    if (!b.ok()) return b.status();
    if (absl::Status s = (*a)->AddPeer((*b)->self()); !s.ok()) return s;
    if (absl::Status s = (*b)->AddPeer((*a)->self()); !s.ok()) return s;
    return DevicePair{nullptr, *std::move(a), *std::move(b)};
  }

  std::string NoBackpressureReason() const override {
    return "kernel UDP on 127.0.0.1 never pushes back on the sender: the loopback device hands "
           "each datagram to the receiving socket at once, and a full receive buffer drops it "
           "(counted as rx_dropped through SO_RXQ_OVFL; see KernelUdpDevice.ReceiveOverflowIsCountedAsDropped)";
  }

  // InjectMalformed: alternately a 100-byte datagram (wrong size) and a
  // datagram of the right size that is not acceptable: with kAtpMessage a
  // whole 264-byte message from a socket no node owns (unknown sender); with
  // kWholeFrame 306 zero bytes from such a socket (neither a peer nor IPv4).
  absl::Status InjectMalformed(DevicePair& pair, uint32_t queue, int count) override {
    auto& b = static_cast<KernelUdpDevice&>(*pair.b);
    const SocketAddress target = b.self().queue_sockets.at(queue);
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return absl::InternalError("socket() failed");
    const size_t right_size = encapsulation_ == KernelUdpEncapsulation::kWholeFrame
                                  ? wire::kFrameBytes
                                  : wire::kMessageBytes;
    return SendMalformedDatagrams(fd, target, right_size, count);
  }

 private:
  const KernelUdpEncapsulation encapsulation_;
};

}  // namespace

DeviceAddress HarnessAddressA() { return DeviceAddress{Ip("10.0.0.1"), DefaultMacFor(Ip("10.0.0.1"))}; }
DeviceAddress HarnessAddressB() { return DeviceAddress{Ip("10.0.0.2"), DefaultMacFor(Ip("10.0.0.2"))}; }

std::vector<std::string> BackendNames() {
  std::vector<std::string> names = {"loopback", "kernel_udp", "kernel_udp_whole_frame"};
  // DPDK and mlx5 harnesses join here under #if ATP_HAVE_DPDK / ATP_HAVE_MLX5.
  return names;
}

std::unique_ptr<BackendHarness> MakeHarness(std::string_view name) {
  if (name == "loopback") return std::make_unique<LoopbackHarness>();
  if (name == "kernel_udp") {
    return std::make_unique<KernelUdpHarness>(KernelUdpEncapsulation::kAtpMessage);
  }
  if (name == "kernel_udp_whole_frame") {
    return std::make_unique<KernelUdpHarness>(KernelUdpEncapsulation::kWholeFrame);
  }
  return nullptr;
}

}  // namespace atp::transport::testing
