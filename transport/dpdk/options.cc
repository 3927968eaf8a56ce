// transport/dpdk/options.cc: DpdkOptions::Validate and MemifVdevArgs.
#include <bit>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "atp/transport/dpdk.h"

namespace atp::transport {
namespace {

constexpr uint32_t kMaxMempoolCache = 512;  // RTE_MEMPOOL_CACHE_MAX_SIZE
constexpr uint32_t kMaxMemifRingFrames = 1u << 15;

}  // namespace

absl::Status DpdkOptions::Validate() const {
  if (absl::Status s = device.Validate(); !s.ok()) return s;
  if (device.rx_ring_frames > UINT16_MAX || device.tx_ring_frames > UINT16_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DpdkOptions.device.rx_ring_frames / tx_ring_frames = ", device.rx_ring_frames, " / ",
        device.tx_ring_frames, ": DPDK descriptor rings hold at most 32768"));
  }
  if (device.headroom > UINT16_MAX - 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("DpdkOptions.device.headroom = ", device.headroom, ": too large for an mbuf"));
  }
  if (port.empty() || port.find_first_of(", \t\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DpdkOptions.port = '", port, "': a DPDK device name (net_memif0, 0000:3b:00.0)"));
  }
  if (source == DpdkPortSource::kProbed && !vdev_args.empty()) {
    return absl::InvalidArgumentError(
        "DpdkOptions.vdev_args: only with DpdkPortSource::kCreateVdev (a probed port has its "
        "arguments already)");
  }
  if (source == DpdkPortSource::kCreateVdev && port.compare(0, 4, "net_") != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DpdkOptions.port = '", port, "': a virtual device to create is named net_<driver><n>"));
  }
  if (mempool_cache > kMaxMempoolCache) {
    return absl::InvalidArgumentError(absl::StrCat("DpdkOptions.mempool_cache = ", mempool_cache,
                                                   ": at most ", kMaxMempoolCache));
  }
  if (link_timeout < TimeDelta::Zero()) {
    return absl::InvalidArgumentError("DpdkOptions.link_timeout: negative");
  }
  for (const DpdkPeer& peer : peers) {
    if (peer.num_queues < 1 || peer.num_queues > kMaxQueues) {
      return absl::InvalidArgumentError(absl::StrCat("DpdkOptions.peers: ",
                                                     peer.address.ipv4.ToString(), " has ",
                                                     peer.num_queues, " queues (1..16)"));
    }
  }
  return absl::OkStatus();
}

std::string MemifVdevArgs(const MemifOptions& options) {
  const uint32_t frames = options.ring_frames < 2 ? 2
                          : options.ring_frames > kMaxMemifRingFrames
                              ? kMaxMemifRingFrames
                              : std::bit_floor(options.ring_frames);
  return absl::StrCat("role=", options.role == MemifRole::kServer ? "server" : "client",
                      ",id=", options.id, ",socket=", options.socket,
                      ",socket-abstract=", options.socket_kind == MemifSocket::kAbstract ? "yes" : "no",
                      ",rsize=", std::countr_zero(frames));
}

}  // namespace atp::transport
