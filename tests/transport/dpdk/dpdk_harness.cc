// tests/transport/dpdk/dpdk_harness.cc
#include "tests/transport/dpdk/dpdk_harness.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include <rte_version.h>

#include "absl/strings/str_cat.h"
#include "tests/transport/dpdk/test_eal.h"
#include "tests/transport/dpdk/test_netns.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/mbuf_pool.h"

namespace atp::transport::testing {
namespace {

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }

// The kernel interfaces of the tap medium's two ports (inside its namespace).
constexpr const char* kTapA = "atpta";
constexpr const char* kTapB = "atptb";

// PairKeepAlive: what a pair's devices need to outlive them.
struct PairKeepAlive {
  std::unique_ptr<TestNetns> netns;        // veth media: destroyed last
  std::unique_ptr<DpdkRingLink> ring_link;  // ring medium
};

class DpdkHarness final : public BackendHarness {
 public:
  explicit DpdkHarness(DpdkMedium medium) : medium_(medium) {}

  absl::StatusOr<DevicePair> Open(const DeviceOptions& options) override {
    if (absl::Status s = EnsureTestEal(); !s.ok()) return s;
    auto keep_alive = std::make_shared<PairKeepAlive>();
    DpdkOptions a = DpdkPairOptions(options, DpdkRingLink::Side::kA);
    DpdkOptions b = DpdkPairOptions(options, DpdkRingLink::Side::kB);
    switch (medium_) {
      case DpdkMedium::kRing: {
        DpdkRingLinkOptions link;
        link.name = UniqueTestName("r");
        link.num_queues = options.num_queues;
        link.ring_frames = options.rx_ring_frames;
        absl::StatusOr<std::unique_ptr<DpdkRingLink>> created = DpdkRingLink::Create(link);
        if (!created.ok()) return created.status();
        keep_alive->ring_link = *std::move(created);
        a.port = keep_alive->ring_link->port_name(DpdkRingLink::Side::kA);
        b.port = keep_alive->ring_link->port_name(DpdkRingLink::Side::kB);
        break;
      }
      case DpdkMedium::kMemif: {
        MemifOptions memif;
        memif.socket = "/" + UniqueTestName("atpm");
        memif.ring_frames = options.rx_ring_frames;
        const std::string name = UniqueTestName("net_memif");
        a.port = name + "s";
        a.source = DpdkPortSource::kCreateVdev;
        memif.role = MemifRole::kServer;
        a.vdev_args = MemifVdevArgs(memif);
        a.link_timeout = TimeDelta::Zero();  // the client is not there yet
        b.port = name + "c";
        b.source = DpdkPortSource::kCreateVdev;
        memif.role = MemifRole::kClient;
        b.vdev_args = MemifVdevArgs(memif);
        break;
      }
      case DpdkMedium::kAfPacket:
      case DpdkMedium::kAfXdp: {
#if RTE_VERSION < RTE_VERSION_NUM(25, 7, 0, 0)
        // The kernel side works (an XDP socket binds to any of the veth's
        // queues; veth delivers A's TX queue i to B's RX queue i), but this
        // driver caps queue_count at ethtool's combined channels, and a veth
        // has none (it reports separate RX and TX queues, max_combined 0), so
        // the driver refuses queue_count > 1. DPDK 25.07 reads RX/TX queues
        // too (commit 5933943107, "net/af_xdp: support Rx/Tx queue").
        if (medium_ == DpdkMedium::kAfXdp && options.num_queues > 1) {
          return absl::FailedPreconditionError(absl::StrCat(
              "af_xdp on a veth gives one queue with ", rte_version(),
              ": its net_af_xdp caps queue_count at ethtool's combined channel count, and a "
              "veth reports separate RX/TX queues (max_combined 0), which the driver takes as 1 "
              "(\"Specified queue count ", options.num_queues,
              " is larger than combined queue count 1\"); DPDK >= 25.07 reads RX/TX queues "
              "(see docs/transports.md, DPDK)"));
        }
#endif
        absl::StatusOr<std::unique_ptr<TestNetns>> netns = TestNetns::Create(options.num_queues);
        if (!netns.ok()) return netns.status();
        keep_alive->netns = *std::move(netns);
        const bool xdp = medium_ == DpdkMedium::kAfXdp;
        const std::string name = UniqueTestName(xdp ? "net_af_xdp" : "net_af_packet");
        for (auto [options_of, iface, suffix] :
             {std::tuple{&a, TestNetns::kVethA, "a"}, std::tuple{&b, TestNetns::kVethB, "b"}}) {
          options_of->port = name + suffix;
          options_of->source = DpdkPortSource::kCreateVdev;
          options_of->netns = keep_alive->netns->name();
          options_of->vdev_args =
              xdp ? absl::StrCat("iface=", iface, ",start_queue=0,queue_count=", options.num_queues)
                  : absl::StrCat("iface=", iface, ",qpairs=", options.num_queues,
                                 ",framecnt=", options.rx_ring_frames * 2);
        }
        break;
      }
      case DpdkMedium::kTap: {
        absl::StatusOr<std::unique_ptr<TestNetns>> netns = TestNetns::CreateWithBridge();
        if (!netns.ok()) return netns.status();
        keep_alive->netns = *std::move(netns);
        const std::string name = UniqueTestName("net_tap");
        for (auto [options_of, iface, suffix] :
             {std::tuple{&a, kTapA, "a"}, std::tuple{&b, kTapB, "b"}}) {
          options_of->port = name + suffix;
          options_of->source = DpdkPortSource::kCreateVdev;
          options_of->netns = keep_alive->netns->name();
          options_of->vdev_args = absl::StrCat("iface=", iface);
        }
        break;
      }
    }
    absl::StatusOr<std::unique_ptr<DpdkDevice>> device_a = OpenDpdkDevice(a);
    if (!device_a.ok()) return device_a.status();
    absl::StatusOr<std::unique_ptr<DpdkDevice>> device_b = OpenDpdkDevice(b);
    if (!device_b.ok()) return device_b.status();
    if (medium_ == DpdkMedium::kTap) {
      for (const char* iface : {kTapA, kTapB}) {
        if (absl::Status s = keep_alive->netns->Join(iface); !s.ok()) return s;
      }
    }
    if (absl::Status s = (*device_a)->WaitForLink(TimeDelta::FromSeconds(5)); !s.ok()) return s;
    return DevicePair{keep_alive, *std::move(device_a), *std::move(device_b)};
  }

  std::string NoBackpressureReason() const override {
    // Measured: with the skip removed, both media take all 1024 frames the
    // test offers while B does not drain.
    if (medium_ == DpdkMedium::kAfPacket) {
      return "a veth hands every frame to the receiving socket's ring at once, and the kernel "
             "drops it there when that TPACKET RX ring is full: the sender never sees "
             "back-pressure";
    }
    if (medium_ == DpdkMedium::kTap) {
      return "a tap port writes every frame into the kernel at once, which bridges it to the "
             "other tap's queue and drops it there when that queue (the tap's txqueuelen) is "
             "full: the sender never sees back-pressure";
    }
    if (medium_ == DpdkMedium::kAfXdp) {
      return "a veth hands every frame to the receiving side's XDP program at once, which "
             "redirects it into the XDP socket's RX ring, and the kernel drops it there when "
             "that ring (or the fill ring) is full: the sender never sees back-pressure";
    }
    return "";
  }

  // InjectMalformed: sends, on A's hardware TX queue `queue` and bypassing
  // libatp's own checks, alternately a 100-byte frame and a whole-size frame
  // that is not IPv4, from A's MAC to B's; the media pair A's TX queue i with
  // B's RX queue i (tap: the kernel picks B's RX queue, so `queue` is that
  // queue only when B has one).
  absl::Status InjectMalformed(DevicePair& pair, uint32_t queue, int count) override {
    auto& a = static_cast<DpdkDevice&>(*pair.a);
    for (int i = 0; i < count; ++i) {
      FrameRef frame;
      if (a.queue(queue).tx_pool().AllocBurst({&frame, 1}) != 1) {
        return absl::ResourceExhaustedError("A's TX pool is empty");
      }
      rte_mbuf* mbuf = internal::MbufOf(frame);
      const uint16_t size = i % 2 == 0 ? 100 : kFrameBytes;
      std::memset(frame.data, 0x5A, size);
      // Addressed from A to B, so that a learning bridge (tap) forwards it.
      std::memcpy(frame.data, pair.b->address().mac.bytes.data(), 6);
      std::memcpy(frame.data + 6, a.address().mac.bytes.data(), 6);
      // EtherType 0x88B5 (local experimental): not IPv4. (The tap medium's
      // bridge drops malformed IPv6, 0x86DD, instead of forwarding it.)
      frame.data[12] = 0x88;
      frame.data[13] = 0xB5;
      mbuf->data_len = size;
      mbuf->pkt_len = size;
      internal::MbufsToDriver(&mbuf, 1);
      if (rte_eth_tx_burst(a.port_id(), static_cast<uint16_t>(queue), &mbuf, 1) != 1) {
        internal::FreeMbuf(mbuf);
        return absl::UnavailableError("A's port refused the malformed frame");
      }
    }
    return absl::OkStatus();
  }

 private:
  const DpdkMedium medium_;
};

}  // namespace

std::string_view DpdkMediumName(DpdkMedium medium) {
  switch (medium) {
    case DpdkMedium::kRing: return "ring";
    case DpdkMedium::kMemif: return "memif";
    case DpdkMedium::kAfPacket: return "af_packet";
    case DpdkMedium::kAfXdp: return "af_xdp";
    case DpdkMedium::kTap: return "tap";
  }
  return "unknown";
}

DpdkOptions DpdkPairOptions(const DeviceOptions& device, DpdkRingLink::Side side) {
  const bool side_a = side == DpdkRingLink::Side::kA;
  const DeviceAddress address_a{Ip("10.0.0.1"), DefaultMacFor(Ip("10.0.0.1"))};
  const DeviceAddress address_b{Ip("10.0.0.2"), DefaultMacFor(Ip("10.0.0.2"))};
  DpdkOptions options;
  options.device = device;
  options.address = side_a ? address_a : address_b;
  options.peers.push_back(DpdkPeer{side_a ? address_b : address_a, device.num_queues});
  return options;
}

absl::StatusOr<RingPair> OpenRingPair(std::string_view name_prefix, const DeviceOptions& device) {
  RingPair pair;
  DpdkRingLinkOptions link;
  link.name = UniqueTestName(std::string(name_prefix));
  link.num_queues = device.num_queues;
  link.ring_frames = device.rx_ring_frames;
  absl::StatusOr<std::unique_ptr<DpdkRingLink>> created = DpdkRingLink::Create(link);
  if (!created.ok()) return created.status();
  pair.link = *std::move(created);
  DpdkOptions a = DpdkPairOptions(device, DpdkRingLink::Side::kA);
  a.port = pair.link->port_name(DpdkRingLink::Side::kA);
  DpdkOptions b = DpdkPairOptions(device, DpdkRingLink::Side::kB);
  b.port = pair.link->port_name(DpdkRingLink::Side::kB);
  absl::StatusOr<std::unique_ptr<DpdkDevice>> device_a = OpenDpdkDevice(a);
  if (!device_a.ok()) return device_a.status();
  pair.a = *std::move(device_a);
  absl::StatusOr<std::unique_ptr<DpdkDevice>> device_b = OpenDpdkDevice(b);
  if (!device_b.ok()) return device_b.status();
  pair.b = *std::move(device_b);
  return pair;
}

std::unique_ptr<BackendHarness> MakeDpdkHarness(DpdkMedium medium) {
  return std::make_unique<DpdkHarness>(medium);
}

}  // namespace atp::transport::testing
