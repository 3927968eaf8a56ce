// transport/mlx5/mlx5_options.cc: Mlx5Options::Validate (the checks that need
// no device) and the enum names.
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "transport/mlx5/geometry.h"
#include "transport/mlx5/mlx5_device.h"

namespace atp::transport {
namespace {

// The widest ranges any mlx5 device reports for a striding RQ; the device's
// own ranges are checked at open (mlx5::PlanMprq).
constexpr uint32_t kMinLogStrideBytes = 6;
constexpr uint32_t kMaxLogStrideBytes = 13;
constexpr uint32_t kMinLogStridesPerWqe = 3;
constexpr uint32_t kMaxLogStridesPerWqe = 16;
constexpr uint32_t kMaxTsoSegments = 256;  // 64 KiB of 264-byte segments
constexpr uint32_t kMaxStagingSlots = 1u << 16;

absl::Status Range(const char* field, uint32_t value, uint32_t low, uint32_t high,
                   const char* why = "") {
  if (value >= low && value <= high) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("Mlx5Options.", field, " = ", value,
                                                 ": must be in [", low, ", ", high, "]", why));
}

}  // namespace

absl::Status Mlx5Options::Validate() const {
  if (absl::Status s = device.Validate(); !s.ok()) return s;
  if (port == 0) {
    return absl::InvalidArgumentError("Mlx5Options.port = 0: device ports are numbered from 1");
  }
  if (flow_match == FlowMatch::kAddressAndPort) {
    if (address.ipv4.value == 0) {
      return absl::InvalidArgumentError(
          "Mlx5Options.address.ipv4 must be set (the flow rules match it; or use "
          "FlowMatch::kPortOnly)");
    }
    if (address.mac == wire::MacAddress{} || address.mac.IsMulticast()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Mlx5Options.address.mac = ", address.mac.ToString(),
                       ": must be the port's unicast MAC (the flow rules match it; or use "
                       "FlowMatch::kPortOnly)"));
    }
  }
  if (absl::Status s =
          Range("log_stride_bytes", log_stride_bytes, kMinLogStrideBytes, kMaxLogStrideBytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Range("log_strides_per_wqe", log_strides_per_wqe, kMinLogStridesPerWqe,
                             kMaxLogStridesPerWqe);
      !s.ok()) {
    return s;
  }
  if ((uint64_t{1} << (log_stride_bytes + log_strides_per_wqe)) < wire::kFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Mlx5Options.log_stride_bytes + log_strides_per_wqe = ",
                     log_stride_bytes + log_strides_per_wqe, ": an entry must hold a ",
                     wire::kFrameBytes, "-byte frame"));
  }
  if (absl::Status s = Range("max_tso_segments", max_tso_segments, 1, kMaxTsoSegments); !s.ok()) {
    return s;
  }
  if (absl::Status s =
          Range("tso_staging_slots", tso_staging_slots, 1,
                device.tx_ring_frames < kMaxStagingSlots ? device.tx_ring_frames : kMaxStagingSlots,
                " (no more than send entries, DeviceOptions.tx_ring_frames)");
      !s.ok()) {
    return s;
  }
  mlx5::SendQueueShape shape;
  shape.max_tso_header = max_tso_header;
  shape.max_inline_data = max_inline_frame;
  if (max_tso_header < mlx5::kTsoHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Mlx5Options.max_tso_header = ", max_tso_header, ": must be >= ", mlx5::kTsoHeaderBytes,
        " (TSO replicates the Ethernet, IPv4 and UDP headers in front of each segment)"));
  }
  if (absl::Status s = mlx5::CheckSendQueueShape(shape); !s.ok()) return s;
  if (absl::Status s = Range("signal_every", signal_every, 1, device.tx_ring_frames / 2,
                             " (half the send ring, so that completions free it in time)");
      !s.ok()) {
    return s;
  }
  if (device.max_burst > device.tx_ring_frames || device.max_burst > device.rx_ring_frames) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceOptions.max_burst = ", device.max_burst, ": must fit tx_ring_frames (",
                     device.tx_ring_frames, ") and rx_ring_frames (", device.rx_ring_frames, ")"));
  }
  return absl::OkStatus();
}

std::string_view Mlx5RxModeName(Mlx5RxMode mode) {
  switch (mode) {
    case Mlx5RxMode::kAuto:
      return "auto";
    case Mlx5RxMode::kMultiPacketRq:
      return "multi_packet_rq";
    case Mlx5RxMode::kPlainCq:
      return "plain_cq";
  }
  return "unknown";
}

std::string_view Mlx5TxSegmentationName(Mlx5TxSegmentation mode) {
  switch (mode) {
    case Mlx5TxSegmentation::kAuto:
      return "auto";
    case Mlx5TxSegmentation::kHardwareTso:
      return "hardware_tso";
    case Mlx5TxSegmentation::kSoftware:
      return "software";
  }
  return "unknown";
}

}  // namespace atp::transport
