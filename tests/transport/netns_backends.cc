// tests/transport/netns_backends.cc: the conformance suite's harnesses for
// kernel UDP across two network namespaces joined by a veth pair, in both
// encapsulations (the transport_netns_conformance_test binary: root, label
// netns). Each pair of devices gets a NetnsPair of its own.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/transport/kernel_udp.h"
#include "tests/transport/backend_harness.h"
#include "tests/transport/transport_test_util.h"
#include "tests/transport/netns_pair.h"

namespace atp::transport::testing {
namespace {

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }

class KernelUdpNetnsHarness final : public BackendHarness {
 public:
  explicit KernelUdpNetnsHarness(KernelUdpEncapsulation encapsulation)
      : encapsulation_(encapsulation) {}

  absl::StatusOr<DevicePair> Open(const DeviceOptions& options) override {
    absl::StatusOr<std::unique_ptr<NetnsPair>> created = NetnsPair::Create();
    if (!created.ok()) return created.status();
    std::shared_ptr<NetnsPair> netns = *std::move(created);
    KernelUdpOptions kernel;
    kernel.device = options;
    kernel.encapsulation = encapsulation_;
    kernel.bind = SocketAddress{netns->ip_a(), 0};
    kernel.address = HarnessAddressA();
    absl::StatusOr<std::unique_ptr<KernelUdpDevice>> a = OpenKernelUdpDeviceIn(netns->a(), kernel);
    if (!a.ok()) return a.status();
    kernel.bind = SocketAddress{netns->ip_b(), 0};
    kernel.address = HarnessAddressB();
    absl::StatusOr<std::unique_ptr<KernelUdpDevice>> b = OpenKernelUdpDeviceIn(netns->b(), kernel);
    if (!b.ok()) return b.status();
    if (absl::Status s = (*a)->AddPeer((*b)->self()); !s.ok()) return s;
    if (absl::Status s = (*b)->AddPeer((*a)->self()); !s.ok()) return s;
    netns_ = netns;
    return DevicePair{netns, *std::move(a), *std::move(b)};
  }

  std::string NoBackpressureReason() const override {
    return "kernel UDP over veth never pushes back on the sender: veth hands each datagram to "
           "the peer's receive path at once, and a full receive buffer drops it (rx_dropped)";
  }

  // InjectMalformed: from a socket in b's namespace (no node owns it),
  // alternately a 100-byte datagram and one of the right size that is not
  // acceptable (kAtpMessage: an unknown sender; kWholeFrame: an unknown sender
  // and not IPv4; kernel_udp_test sends bad frames from a peer).
  absl::Status InjectMalformed(DevicePair& pair, uint32_t queue, int count) override {
    auto& b = static_cast<KernelUdpDevice&>(*pair.b);
    const SocketAddress target = b.self().queue_sockets.at(queue);
    int fd = -1;
    if (absl::Status s = RunInNetns(netns_->b(), [&] {
          fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        });
        !s.ok()) {
      return s;
    }
    if (fd < 0) return absl::InternalError("socket() failed");
    const size_t right_size = encapsulation_ == KernelUdpEncapsulation::kWholeFrame
                                  ? wire::kFrameBytes
                                  : wire::kMessageBytes;
    return SendMalformedDatagrams(fd, target, right_size, count);
  }

 private:
  const KernelUdpEncapsulation encapsulation_;
  std::shared_ptr<NetnsPair> netns_;
};

}  // namespace

DeviceAddress HarnessAddressA() { return DeviceAddress{Ip("10.0.0.1"), DefaultMacFor(Ip("10.0.0.1"))}; }
DeviceAddress HarnessAddressB() { return DeviceAddress{Ip("10.0.0.2"), DefaultMacFor(Ip("10.0.0.2"))}; }

std::vector<std::string> BackendNames() {
  return {"kernel_udp_netns", "kernel_udp_whole_frame_netns"};
}

std::unique_ptr<BackendHarness> MakeHarness(std::string_view name) {
  if (name == "kernel_udp_netns") {
    return std::make_unique<KernelUdpNetnsHarness>(KernelUdpEncapsulation::kAtpMessage);
  }
  if (name == "kernel_udp_whole_frame_netns") {
    return std::make_unique<KernelUdpNetnsHarness>(KernelUdpEncapsulation::kWholeFrame);
  }
  return nullptr;
}

}  // namespace atp::transport::testing
