// transport/mlx5/mlx5_device.h: ATP over an NVIDIA/Mellanox ConnectX NIC
// (mlx5) as RAW Ethernet, through upstream rdma-core only (libibverbs +
// libmlx5 direct verbs; never the MLNX_OFED ibv_exp_* verbs).
//
// Each queue owns:
//   - a send side: a RAW_PACKET QP created with max_tso_header, whose work
//     requests carry either one frame (a gather entry, or the frame inline)
//     or a whole segmentation job (one TSO work request: the 42-byte
//     Ethernet/IPv4/UDP header inline, then k 264-byte ATP messages the NIC
//     cuts into k frames), with a completion requested every
//     `signal_every` sends and at the end of every Flush;
//   - a receive side: a striding (multi-packet) receive queue from
//     mlx5dv_create_wq (each work queue entry is a buffer of 2^m strides; the
//     NIC packs many frames into one and reports each with a stride index),
//     or, as a fallback, an ordinary receive queue with one buffer per entry
//     polled with ibv_poll_cq; behind it a one-entry indirection table and an
//     RSS RAW_PACKET QP;
//   - a flow rule (ibv_create_flow) on that QP matching UDP destination port
//     base_port + i (and this node's MAC and IPv4 unless FlowMatch::kPortOnly).
//
//   Mlx5Options options;
//   options.device_name = "mlx5_0";
//   options.address = {ip, mac_of_the_port};
//   options.device.num_queues = 4;
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<Mlx5Device> device, OpenMlx5Device(options));
//   Queue& q = device->queue(0);   // then as any atp::transport::Queue
//
// Frames are sent as they are: the caller writes the Ethernet addresses (the
// NIC has no neighbour table), so the transport counts no tx_unroutable.
// Received frames are zero-copy views into the receive buffers; hold them
// briefly (a striding buffer is re-posted only once every frame in it is
// released).
//
// Errors: OpenMlx5Device says why it cannot open: no RDMA devices (no driver,
// or no RDMA support in this kernel), the named device missing, a port that
// is down or not Ethernet, no permission (RAW_PACKET QPs and flow rules need
// CAP_NET_RAW), a capability the options insist on (TSO, striding RQ), or
// missing hugepages. See docs/transports.md, "mlx5 RAW Ethernet".
//
// Threads: as atp/transport.h. wait_fd() is -1: the queue is polled.
#ifndef ATP_TRANSPORT_MLX5_MLX5_DEVICE_H_
#define ATP_TRANSPORT_MLX5_MLX5_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/transport.h"

namespace atp::transport {

// Mlx5RxMode: how a queue receives.
enum class Mlx5RxMode : uint8_t {
  kAuto,           // striding RQ when the device has it, else kPlainCq
  kMultiPacketRq,  // striding RQ; fail to open without it
  kPlainCq,        // one buffer per receive entry, ibv_poll_cq
};

// Mlx5TxSegmentation: how a queue sends a SegmentationJob.
enum class Mlx5TxSegmentation : uint8_t {
  kAuto,         // TSO when the device does it on RAW_PACKET QPs with IP checksum
  kHardwareTso,  // TSO; fail to open without it
  kSoftware,     // k frames, one send each
};

// FlowMatch: what a queue's flow rule matches besides the UDP destination port.
enum class FlowMatch : uint8_t {
  kAddressAndPort,  // destination MAC and IPv4 = Mlx5Options::address (an endpoint)
  kPortOnly,        // any frame to the port (a switch process that forwards)
};

// Mlx5Memory: where receive buffers and TSO staging live.
enum class Mlx5Memory : uint8_t {
  kHeap,       // page-aligned heap memory
  kHugePages,  // 2 MiB pages (MAP_HUGETLB); fail to open without free ones
};

// Mlx5Options: DeviceOptions plus what the NIC needs. Sizes in frames unless
// named otherwise. DeviceOptions::tx_ring_frames is the send queue depth in
// work requests; rx_ring_frames the frames the receive queue can take before
// software re-posts; rx_pool_frames how many received frames the caller may
// hold at once (extra striding buffers, or the plain pool's size).
struct Mlx5Options {
  DeviceOptions device;
  std::string device_name;  // "mlx5_0"; empty: the first mlx5 device
  uint8_t port = 1;         // the device's port, 1-based
  DeviceAddress address;    // this node; written in no frame, matched by the flow rules
  FlowMatch flow_match = FlowMatch::kAddressAndPort;
  uint16_t flow_priority = 0;  // ibv_flow_attr::priority (0 = highest)

  Mlx5RxMode rx_mode = Mlx5RxMode::kAuto;
  // Striding RQ geometry: strides of 2^log_stride_bytes bytes (a frame takes
  // ceil(306 / stride) of them), 2^log_strides_per_wqe strides per entry.
  uint32_t log_stride_bytes = 6;     // 64 B: 5 strides per frame, 320 B
  uint32_t log_strides_per_wqe = 9;  // 512 strides: 32 KiB, 102 frames

  Mlx5TxSegmentation tx_segmentation = Mlx5TxSegmentation::kAuto;
  uint32_t max_tso_segments = 64;   // segments per TSO work request (further capped by the device)
  uint32_t tso_staging_slots = 64;  // TSO work requests in flight per queue
  uint16_t max_tso_header = 64;     // asked of the QP; >= 42 (the header TSO replicates)
  // max_inline_frame: frames up to this many bytes are copied into the work
  // request (no DMA read, buffer freed at post); 0: never.
  uint32_t max_inline_frame = 0;
  // signal_every: a completion is requested every N sends (and at the end of
  // every Flush); 1 <= N <= tx_ring_frames / 2.
  uint32_t signal_every = 32;
  Mlx5Memory memory = Mlx5Memory::kHeap;

  // Validate: the checks that need no device; the message names the field.
  absl::Status Validate() const;
};

// Mlx5Device: a Device with what the NIC granted at open.
class Mlx5Device : public Device {
 public:
  // device_name: the verbs name of the device opened ("mlx5_0").
  virtual const std::string& device_name() const = 0;
  // rx_mode / tx_segmentation: what kAuto became (never kAuto).
  virtual Mlx5RxMode rx_mode() const = 0;
  virtual Mlx5TxSegmentation tx_segmentation() const = 0;
};

// OpenMlx5Device: opens the device and builds every queue (CQs, QPs, work
// queues, flow rules, registered memory). Fails, saying why, on invalid
// options or when the device cannot (see the header comment).
absl::StatusOr<std::unique_ptr<Mlx5Device>> OpenMlx5Device(const Mlx5Options& options);

std::string_view Mlx5RxModeName(Mlx5RxMode mode);
std::string_view Mlx5TxSegmentationName(Mlx5TxSegmentation mode);

}  // namespace atp::transport

#endif  // ATP_TRANSPORT_MLX5_MLX5_DEVICE_H_
