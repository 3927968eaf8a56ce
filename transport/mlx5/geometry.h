// transport/mlx5/geometry.h: the sizes and limits of an mlx5 queue, planned
// from the options and the device's capabilities before any verbs object is
// made. Pure functions (no device), so every limit is unit-tested. Private to
// transport/mlx5.
//
//   Mlx5DeviceCaps caps = ...;  // from ibv_query_device_ex + mlx5dv_query_device
//   ATP_ASSIGN_OR_RETURN(MprqGeometry rx, PlanMprq(MprqRequest{6, 9, 1024, 2048}, caps));
//   ATP_ASSIGN_OR_RETURN(TsoPlan tso, PlanTso(64, caps));
#ifndef ATP_TRANSPORT_MLX5_GEOMETRY_H_
#define ATP_TRANSPORT_MLX5_GEOMETRY_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/wire.h"

namespace atp::transport::mlx5 {

// TSO: the NIC replicates the Ethernet, IPv4 and UDP headers (42 bytes, inline
// in the work request) in front of each `mss` bytes of the payload. The ATP
// header differs per segment (seq, aggregator), so it travels in the payload:
// each segment is one 264-byte ATP message.
inline constexpr uint32_t kTsoHeaderBytes = wire::kL2L4HeaderBytes;
inline constexpr uint32_t kTsoSegmentBytes = wire::kMessageBytes;
static_assert(kTsoHeaderBytes == 42 && kTsoSegmentBytes == 264);
static_assert(kTsoHeaderBytes + kTsoSegmentBytes == wire::kFrameBytes,
              "a TSO segment plus the replicated header is one whole ATP frame");
// The provider's smallest TSO header (an Ethernet header).
inline constexpr uint32_t kMinTsoHeaderBytes = wire::kEthernetHeaderBytes;

// Send work queue entries (mlx5 "WQE"): a control segment (16 bytes) and an
// Ethernet segment (32, with room for 18 bytes of inline header), then the
// TSO header room padded to 16, then 16 bytes per gather entry; or, inline, 4
// + the data padded to 16 after the two segments. The provider (rdma-core
// providers/mlx5, mlx5_calc_send_wqe) sizes every entry for the largest
// request the QP allows, in 64-byte basic blocks, up to the device's
// descriptor limit (512 bytes on ConnectX-4..7).
inline constexpr uint32_t kSendWqeBasicBlockBytes = 64;
inline constexpr uint32_t kSendWqeOverheadBytes = 48;
inline constexpr uint32_t kDataSegmentBytes = 16;
inline constexpr uint32_t kInlineSegmentHeaderBytes = 4;
inline constexpr uint32_t kMaxSendWqeBytes = 512;

// Mlx5DeviceCaps: the device limits a queue is planned against.
struct Mlx5DeviceCaps {
  uint32_t max_qp_wr = 0;  // ibv_device_attr::max_qp_wr (send and receive entries)
  uint32_t max_cqe = 0;    // ibv_device_attr::max_cqe
  uint32_t max_sge = 0;    // ibv_device_attr::max_sge
  // max_tso_bytes: ibv_tso_caps::max_tso (payload bytes of one TSO request),
  // 0 when RAW_PACKET QPs are not in tso_caps.supported_qpts.
  uint32_t max_tso_bytes = 0;
  // raw_ip_checksum: IBV_RAW_PACKET_CAP_IP_CSUM; TSO needs it (the NIC
  // rewrites each segment's IPv4 header and so its checksum).
  bool raw_ip_checksum = false;
  // striding_rq: MLX5DV_CONTEXT_MASK_STRIDING_RQ with RAW_PACKET in
  // supported_qpts; then the log2 ranges below are valid.
  bool striding_rq = false;
  uint32_t min_log_stride_bytes = 0;
  uint32_t max_log_stride_bytes = 0;
  uint32_t min_log_strides_per_wqe = 0;
  uint32_t max_log_strides_per_wqe = 0;
};

// SendQueueShape: what a send QP is created with (ibv_qp_init_attr_ex::cap
// and max_tso_header).
struct SendQueueShape {
  uint32_t max_tso_header = 0;  // 0: no TSO on this QP
  uint32_t max_send_sge = 1;
  uint32_t max_inline_data = 0;  // bytes
};

// SendWqeBytes: the bytes the provider reserves per send entry for `shape`
// (a multiple of 64).
uint32_t SendWqeBytes(const SendQueueShape& shape);

// CheckSendQueueShape: a TSO QP's header room holds the 42-byte L2-L4 header
// and one entry fits kMaxSendWqeBytes; the message names the field.
absl::Status CheckSendQueueShape(const SendQueueShape& shape);

// MaxInlineData: the inline bytes an entry of `shape` holds (what the
// provider reports back as cap.max_inline_data).
uint32_t MaxInlineData(const SendQueueShape& shape);

// TsoPlan: how a queue cuts a segmentation job into TSO requests.
struct TsoPlan {
  uint32_t segments_per_request = 0;  // 1..; k segments per work request at most
  uint32_t slot_bytes = 0;            // staging per request: header + segments, 64-aligned
};

// PlanTso: at most `wanted_segments` per request, no more than the device's
// max_tso_bytes of payload. Fails without TSO or checksum offload, or when the
// device cannot carry a single segment.
absl::StatusOr<TsoPlan> PlanTso(uint32_t wanted_segments, const Mlx5DeviceCaps& caps);

// MprqRequest: what a striding receive queue is asked for.
struct MprqRequest {
  uint32_t log_stride_bytes = 6;
  uint32_t log_strides_per_wqe = 9;
  uint32_t ring_frames = 1024;  // frames the posted entries hold together
  uint32_t held_frames = 2048;  // frames the caller may hold at once
};

// MprqGeometry: a striding receive queue and its buffers. A "chunk" is one
// entry's buffer (wqe_bytes); there are more chunks than entries so that
// entries can be re-posted while the caller holds frames of older chunks.
struct MprqGeometry {
  uint32_t log_stride_bytes = 0;
  uint32_t log_strides_per_wqe = 0;
  uint32_t stride_bytes = 0;
  uint32_t strides_per_wqe = 0;
  uint32_t wqe_bytes = 0;          // stride_bytes * strides_per_wqe
  uint32_t strides_per_frame = 0;  // ceil(kFrameBytes / stride_bytes)
  uint32_t frames_per_wqe = 0;     // strides_per_wqe / strides_per_frame
  uint32_t wq_depth = 0;           // entries (a power of two, >= 2)
  uint32_t chunks = 0;             // wq_depth + chunks for held frames
  uint32_t cq_entries = 0;         // a completion per stride of the posted entries

  size_t memory_bytes() const { return size_t{chunks} * wqe_bytes; }
};

// PlanMprq: checks every value against the device's ranges (the message names
// the option: log_stride_bytes, log_strides_per_wqe, rx_ring_frames, ...).
absl::StatusOr<MprqGeometry> PlanMprq(const MprqRequest& request, const Mlx5DeviceCaps& caps);

// DepthRequest: the queue depths and batch sizes of one queue.
struct DepthRequest {
  uint32_t max_burst = 32;
  uint32_t tx_ring = 1024;  // send entries
  uint32_t signal_every = 32;
  uint32_t rx_frames = 1024;  // frames the receive queue holds
};

// CheckDepths: max_burst <= tx_ring and <= rx_frames (a burst fits both
// rings); 1 <= signal_every <= tx_ring / 2 (a completion arrives before the
// ring fills); tx_ring within the device's max_qp_wr.
absl::Status CheckDepths(const DepthRequest& request, const Mlx5DeviceCaps& caps);

// CqEntriesFor: the completion queue size for `entries` completions (the next
// power of two), or 0 when the device's max_cqe is smaller.
uint32_t CqEntriesFor(uint32_t entries, const Mlx5DeviceCaps& caps);

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_GEOMETRY_H_
