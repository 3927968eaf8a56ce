// transport/common/device_options.cc: DeviceOptions::Validate and the small
// value helpers of atp/transport.h.
#include <bit>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "atp/transport.h"

namespace atp::transport {
namespace {

constexpr uint32_t kMaxRingFrames = 1u << 20;
constexpr uint32_t kMaxBurst = 1024;

absl::Status CheckRing(const char* field, uint32_t frames) {
  if (frames < 2 || frames > kMaxRingFrames || !std::has_single_bit(frames)) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceOptions.", field, " = ", frames,
                                                   ": must be a power of two in [2, ",
                                                   kMaxRingFrames, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DeviceOptions::Validate() const {
  if (num_queues < 1 || num_queues > kMaxQueues) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceOptions.num_queues = ", num_queues,
                                                   ": must be in [1, ", kMaxQueues, "]"));
  }
  if (base_port == 0 || uint32_t{base_port} + kMaxQueues - 1 > 0xFFFF) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceOptions.base_port = ", base_port, ": must be in [1, ",
                     0xFFFF - kMaxQueues + 1, "] so that base_port + 15 is a port"));
  }
  if (max_burst < 1 || max_burst > kMaxBurst) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceOptions.max_burst = ", max_burst,
                                                   ": must be in [1, ", kMaxBurst, "]"));
  }
  if (absl::Status s = CheckRing("rx_ring_frames", rx_ring_frames); !s.ok()) return s;
  if (absl::Status s = CheckRing("tx_ring_frames", tx_ring_frames); !s.ok()) return s;
  if (rx_pool_frames < max_burst || tx_pool_frames < max_burst) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceOptions.rx_pool_frames / tx_pool_frames = ", rx_pool_frames, " / ", tx_pool_frames,
        ": each must hold at least one burst (max_burst = ", max_burst, ")"));
  }
  FramePoolOptions pool;
  pool.frames = rx_pool_frames > tx_pool_frames ? rx_pool_frames : tx_pool_frames;
  pool.headroom = headroom;
  if (absl::Status s = pool.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("DeviceOptions pools: ", s.message()));
  }
  return absl::OkStatus();
}

wire::MacAddress DefaultMacFor(wire::Ipv4Address ipv4) {
  wire::MacAddress mac;
  mac.bytes = {0x02,
               0x00,
               static_cast<uint8_t>(ipv4.value >> 24),
               static_cast<uint8_t>(ipv4.value >> 16),
               static_cast<uint8_t>(ipv4.value >> 8),
               static_cast<uint8_t>(ipv4.value)};
  return mac;
}

std::string_view TxSegmentationName(TxSegmentation value) {
  switch (value) {
    case TxSegmentation::kSoftware: return "software";
    case TxSegmentation::kKernelGso: return "kernel_gso";
    case TxSegmentation::kHardwareTso: return "hardware_tso";
  }
  return "unknown";
}

std::string_view RxCoalescingName(RxCoalescing value) {
  switch (value) {
    case RxCoalescing::kNone: return "none";
    case RxCoalescing::kKernelGro: return "kernel_gro";
    case RxCoalescing::kMultiPacketRq: return "multi_packet_rq";
  }
  return "unknown";
}

std::string_view SteeringName(Steering value) {
  switch (value) {
    case Steering::kDirect: return "direct";
    case Steering::kSocketPerQueue: return "socket_per_queue";
    case Steering::kHardwareFlow: return "hardware_flow";
    case Steering::kSoftware: return "software";
  }
  return "unknown";
}

}  // namespace atp::transport
