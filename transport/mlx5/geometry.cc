// transport/mlx5/geometry.cc: queue sizes and limits, planned before any
// verbs object exists.
#include "transport/mlx5/geometry.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace atp::transport::mlx5 {
namespace {

constexpr uint32_t AlignUp(uint32_t value, uint32_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}
constexpr uint32_t CeilDiv(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// kMaxRxMemoryBytes: a sanity bound on one queue's striding buffers.
constexpr uint64_t kMaxRxMemoryBytes = uint64_t{4} << 30;

absl::Status OutOfRange(const char* field, uint32_t value, uint32_t low, uint32_t high) {
  return absl::InvalidArgumentError(absl::StrCat("Mlx5Options.", field, " = ", value,
                                                 ": this device allows [", low, ", ", high, "]"));
}

}  // namespace

uint32_t SendWqeBytes(const SendQueueShape& shape) {
  uint32_t gather = kSendWqeOverheadBytes;
  if (shape.max_tso_header != 0) gather += AlignUp(shape.max_tso_header, 16);
  gather += shape.max_send_sge * kDataSegmentBytes;
  uint32_t inline_bytes = 0;
  if (shape.max_inline_data != 0) {
    inline_bytes =
        kSendWqeOverheadBytes + AlignUp(kInlineSegmentHeaderBytes + shape.max_inline_data, 16);
  }
  return AlignUp(std::max(gather, inline_bytes), kSendWqeBasicBlockBytes);
}

uint32_t MaxInlineData(const SendQueueShape& shape) {
  return SendWqeBytes(shape) - kSendWqeOverheadBytes - kInlineSegmentHeaderBytes;
}

absl::Status CheckSendQueueShape(const SendQueueShape& shape) {
  if (shape.max_tso_header != 0 && shape.max_tso_header < kTsoHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Mlx5Options.max_tso_header = ", shape.max_tso_header, ": must be >= ", kTsoHeaderBytes,
        " (TSO replicates the Ethernet, IPv4 and UDP headers in front of each segment)"));
  }
  if (shape.max_send_sge == 0) {
    return absl::InvalidArgumentError("send queue: max_send_sge must be >= 1");
  }
  const uint32_t bytes = SendWqeBytes(shape);
  if (bytes > kMaxSendWqeBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("Mlx5Options.max_tso_header / max_inline_frame = ", shape.max_tso_header,
                     " / ", shape.max_inline_data, ": one send entry would take ", bytes,
                     " bytes, more than the device's ", kMaxSendWqeBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<TsoPlan> PlanTso(uint32_t wanted_segments, const Mlx5DeviceCaps& caps) {
  if (wanted_segments == 0) {
    return absl::InvalidArgumentError("Mlx5Options.max_tso_segments = 0: must be >= 1");
  }
  if (caps.max_tso_bytes == 0) {
    return absl::UnimplementedError("the device does no TSO on RAW_PACKET QPs (tso_caps)");
  }
  if (!caps.raw_ip_checksum) {
    return absl::UnimplementedError(
        "the device has no IP checksum offload on RAW_PACKET QPs, which TSO needs");
  }
  const uint32_t fit = caps.max_tso_bytes / kTsoSegmentBytes;
  if (fit == 0) {
    return absl::UnimplementedError(absl::StrCat("the device's max_tso = ", caps.max_tso_bytes,
                                                 " bytes holds no ", kTsoSegmentBytes,
                                                 "-byte segment"));
  }
  TsoPlan plan;
  plan.segments_per_request = std::min(wanted_segments, fit);
  plan.slot_bytes = AlignUp(kTsoHeaderBytes + plan.segments_per_request * kTsoSegmentBytes,
                            kSendWqeBasicBlockBytes);
  return plan;
}

absl::StatusOr<MprqGeometry> PlanMprq(const MprqRequest& request, const Mlx5DeviceCaps& caps) {
  if (!caps.striding_rq) {
    return absl::UnimplementedError(
        "the device has no striding (multi-packet) receive queue for RAW_PACKET QPs");
  }
  if (request.log_stride_bytes < caps.min_log_stride_bytes ||
      request.log_stride_bytes > caps.max_log_stride_bytes) {
    return OutOfRange("log_stride_bytes", request.log_stride_bytes, caps.min_log_stride_bytes,
                      caps.max_log_stride_bytes);
  }
  if (request.log_strides_per_wqe < caps.min_log_strides_per_wqe ||
      request.log_strides_per_wqe > caps.max_log_strides_per_wqe) {
    return OutOfRange("log_strides_per_wqe", request.log_strides_per_wqe,
                      caps.min_log_strides_per_wqe, caps.max_log_strides_per_wqe);
  }
  if (request.log_stride_bytes >= 31 || request.log_strides_per_wqe >= 31 ||
      request.log_stride_bytes + request.log_strides_per_wqe >= 31) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Mlx5Options.log_stride_bytes + log_strides_per_wqe = ",
        request.log_stride_bytes + request.log_strides_per_wqe, ": an entry must be under 2 GiB"));
  }
  MprqGeometry g;
  g.log_stride_bytes = request.log_stride_bytes;
  g.log_strides_per_wqe = request.log_strides_per_wqe;
  g.stride_bytes = 1u << request.log_stride_bytes;
  g.strides_per_wqe = 1u << request.log_strides_per_wqe;
  g.wqe_bytes = g.stride_bytes * g.strides_per_wqe;
  if (g.wqe_bytes < wire::kFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Mlx5Options.log_stride_bytes / log_strides_per_wqe = ", request.log_stride_bytes, " / ",
        request.log_strides_per_wqe, ": an entry of ", g.wqe_bytes, " bytes cannot hold a ",
        wire::kFrameBytes, "-byte frame"));
  }
  g.strides_per_frame = CeilDiv(uint32_t{wire::kFrameBytes}, g.stride_bytes);
  g.frames_per_wqe = g.strides_per_wqe / g.strides_per_frame;
  if (request.ring_frames == 0) {
    return absl::InvalidArgumentError("DeviceOptions.rx_ring_frames = 0: must be >= 1");
  }
  g.wq_depth = std::max(2u, std::bit_ceil(CeilDiv(request.ring_frames, g.frames_per_wqe)));
  if (g.wq_depth > caps.max_qp_wr) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceOptions.rx_ring_frames = ", request.ring_frames, ": needs ", g.wq_depth,
                     " striding entries, more than the device's max_qp_wr = ", caps.max_qp_wr));
  }
  g.chunks = g.wq_depth + CeilDiv(request.held_frames, g.frames_per_wqe);
  if (g.memory_bytes() > kMaxRxMemoryBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceOptions.rx_ring_frames / rx_pool_frames: the striding buffers would take ",
        g.memory_bytes(), " bytes per queue (at most ", kMaxRxMemoryBytes, ")"));
  }
  // Every completion (a packet of any size, or a filler) consumes at least
  // one stride, so the posted entries can produce one per stride; short
  // junk frames must not overrun the queue.
  const uint32_t completions = g.wq_depth * g.strides_per_wqe;
  g.cq_entries = CqEntriesFor(completions, caps);
  if (g.cq_entries == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceOptions.rx_ring_frames = ", request.ring_frames, ": needs a completion queue of ",
        completions, " entries, more than the device's max_cqe = ", caps.max_cqe));
  }
  return g;
}

absl::Status CheckDepths(const DepthRequest& request, const Mlx5DeviceCaps& caps) {
  if (request.tx_ring > caps.max_qp_wr) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceOptions.tx_ring_frames = ", request.tx_ring,
                     ": the device's max_qp_wr is ", caps.max_qp_wr));
  }
  if (request.max_burst > request.tx_ring || request.max_burst > request.rx_frames) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DeviceOptions.max_burst = ", request.max_burst, ": must fit the send ring (",
        request.tx_ring, " entries) and the receive ring (", request.rx_frames, " frames)"));
  }
  if (request.signal_every < 1 || request.signal_every > request.tx_ring / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Mlx5Options.signal_every = ", request.signal_every, ": must be in [1, ",
        request.tx_ring / 2, "] (half the send ring) so that completions free it in time"));
  }
  return absl::OkStatus();
}

uint32_t CqEntriesFor(uint32_t entries, const Mlx5DeviceCaps& caps) {
  const uint64_t n = std::bit_ceil(uint64_t{std::max(entries, 1u)});
  return n > caps.max_cqe ? 0 : static_cast<uint32_t>(n);
}

}  // namespace atp::transport::mlx5
