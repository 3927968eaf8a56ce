// atp/transport.h: the transport interface every backend implements
// (loopback, kernel UDP, DPDK, mlx5 RAW Ethernet).
//
// A Device is one NIC, virtual port or socket set; it has num_queues() Queues,
// one per I/O thread. Queue i receives exactly the frames whose UDP destination
// port is base_port + i (ATP-SPEC section 2: the top 4 bits of seq), whatever
// the backend does to get them there (a socket per port, a NIC flow rule, a
// software dispatcher). Queues move bursts of whole 306-byte ATP frames; a
// backend that carries less on its medium (kernel UDP carries the 264-byte ATP
// message) rebuilds the frame, so upper layers never know which backend they
// run on.
//
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<KernelUdpDevice> device, OpenKernelUdpDevice(opts));
//   Queue& q = device->queue(0);                    // owned by this I/O thread from now on
//   FrameRef rx[32];
//   size_t n = q.RxBurst(rx);                       // never blocks
//   ... decode, hand to the engine ...
//   ReleaseFrames({rx, n});
//   size_t sent = q.TxBurst(tx);                    // the queue owns tx[0, sent)
//   q.Flush();
//
// Ownership: RxBurst hands frames to the caller, who returns them with
// ReleaseFrames or passes them to a TxBurst. TxBurst takes the frames it
// reports sent and returns their buffers to their pools when the medium is done
// with them; the caller keeps the rest. Nothing is lost on back-pressure.
//
// Errors: opening a device returns absl::Status saying why it cannot (no
// device, no permission, port in use, missing hugepages, ...). The datapath
// returns counts and keeps QueueStats; it never logs or throws.
//
// Threads: a Queue is used by one thread at a time (never shared); different
// queues of one device may run on different threads. Device methods are
// control path: call them before the I/O threads start or after they stop.
#ifndef ATP_TRANSPORT_H_
#define ATP_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/status/status.h"
#include "atp/transport/frame_pool.h"
#include "atp/transport/segmentation.h"
#include "atp/wire.h"

namespace atp::transport {

inline constexpr size_t kFrameBytes = wire::kFrameBytes;
inline constexpr uint32_t kMaxQueues = wire::kMaxQueues;
static_assert(kMaxQueues == 16, "seq names 16 queues");

// DeviceAddress: the addresses a device's node puts into the frames it sends
// (source) and that other nodes use to reach it (destination).
struct DeviceAddress {
  wire::Ipv4Address ipv4;
  wire::MacAddress mac;
  friend bool operator==(const DeviceAddress&, const DeviceAddress&) = default;
};

// DefaultMacFor: a locally administered unicast MAC derived from an IPv4
// address (02:00:a:b:c:d), for backends whose medium has no MACs.
wire::MacAddress DefaultMacFor(wire::Ipv4Address ipv4);

// DeviceOptions: what every backend's options contain. Sizes are in frames.
struct DeviceOptions {
  uint32_t num_queues = 1;                       // 1..16, one per I/O thread
  uint16_t base_port = wire::kDefaultBasePort;   // queue i gets UDP dst port base_port + i
  uint32_t max_burst = 32;                       // frames per RxBurst/TxBurst the caller plans
  uint32_t rx_ring_frames = 1024;                // receive ring per queue (power of two)
  uint32_t tx_ring_frames = 1024;                // transmit ring per queue (power of two)
  uint32_t rx_pool_frames = 2048;                // buffers of each queue's RX pool
  uint32_t tx_pool_frames = 2048;                // buffers of each queue's TX pool
  uint32_t headroom = kDefaultHeadroom;          // bytes before FrameRef::data in both pools

  // Validate: the message names the offending field.
  absl::Status Validate() const;
};

// TxSegmentation: how a queue sends a SegmentationJob.
enum class TxSegmentation : uint8_t {
  kSoftware,     // replicates the template into k frames (loopback, DPDK without TSO)
  kKernelGso,    // UDP_SEGMENT: one send of k 264-byte messages
  kHardwareTso,  // the NIC cuts one work request into k frames (mlx5)
};

// RxCoalescing: how a queue receives many frames per medium operation.
enum class RxCoalescing : uint8_t {
  kNone,           // one frame per receive
  kKernelGro,      // UDP_GRO: one recvmmsg entry may hold many messages
  kMultiPacketRq,  // striding receive queue (mlx5)
};

// Steering: what puts a frame on the queue its UDP destination port names.
enum class Steering : uint8_t {
  kDirect,           // the medium delivers to the queue itself (loopback wire)
  kSocketPerQueue,   // one UDP socket bound per queue (kernel)
  kHardwareFlow,     // a NIC flow rule per queue (rte_flow, ibv_create_flow)
  kSoftware,         // one hardware queue, dispatched in software
};

std::string_view TxSegmentationName(TxSegmentation value);
std::string_view RxCoalescingName(RxCoalescing value);
std::string_view SteeringName(Steering value);

// QueueCapabilities: what a queue declares about itself; fixed once opened.
struct QueueCapabilities {
  uint32_t max_burst = 32;            // burst size the queue is built for; larger
                                      // bursts work but may be taken in part
  uint32_t mtu = kFrameBytes;         // largest frame, bytes, Ethernet header included
  uint32_t headroom = 0;              // bytes before FrameRef::data in its pools
  uint32_t max_offload_segments = 1;  // segments one offload operation carries
  TxSegmentation tx_segmentation = TxSegmentation::kSoftware;
  RxCoalescing rx_coalescing = RxCoalescing::kNone;
  Steering steering = Steering::kSoftware;

  // OffloadsSegmentation: TxSegmented hands a job to the medium (GSO, TSO)
  // rather than writing its frames one by one, so a host gains by building
  // segmentation jobs; on other queues it sends frames with TxBurst.
  bool OffloadsSegmentation() const {
    return tx_segmentation != TxSegmentation::kSoftware && max_offload_segments > 1;
  }
};

// QueueStats: counters of one queue, all monotonic. Read them with
// Queue::stats() on the queue's thread (or once it has stopped).
struct QueueStats {
  uint64_t rx_frames = 0;             // frames RxBurst handed out
  uint64_t rx_bad_frames = 0;         // arrived, not a whole ATP frame (size, sender): dropped
  uint64_t rx_dropped = 0;            // lost before the queue saw them (socket buffer or
                                      // ring overflow on the receive side)
  uint64_t tx_frames = 0;             // frames and segments taken by TxBurst / TxSegmented
  uint64_t tx_segmentation_jobs = 0;  // TxSegmented calls that took at least one segment
  uint64_t tx_offloaded_segments = 0; // segments sent by GSO/TSO rather than one by one
  uint64_t tx_bad_frames = 0;         // taken but not sendable ATP frames: dropped
  uint64_t tx_unroutable = 0;         // taken, no route to the destination node or queue: dropped
  uint64_t tx_backpressure = 0;       // calls that took fewer than offered: ring/socket full
  uint64_t tx_errors = 0;             // medium errors other than back-pressure: dropped
};

// Queue: one I/O thread's view of a device.
class Queue {
 public:
  virtual ~Queue() = default;

  // index: i, the queue that receives UDP destination port base_port + i.
  virtual uint32_t index() const = 0;
  virtual const QueueCapabilities& capabilities() const = 0;

  // RxBurst: never blocks. Fills frames[0, n) with received frames, each a
  // whole kFrameBytes ATP frame whose UDP destination port names this queue,
  // and returns n (0 when nothing is waiting or the RX pool is empty). The
  // caller owns them. Frames from one sender queue arrive in the order sent.
  virtual size_t RxBurst(std::span<FrameRef> frames) = 0;

  // TxBurst: takes frames[0, n) and returns n, n <= frames.size(); fewer when
  // the transmit ring or socket is full (the caller still owns frames[n, ...)
  // and may retry them). Frames may come from any pool; those from this
  // queue's tx_pool() are the fast path. A taken frame that is not a whole ATP
  // frame (tx_bad_frames), or whose destination is unknown (tx_unroutable), is
  // dropped and counted. Taken frames are on their way: they may leave only at
  // Flush(), so call Flush() before waiting for an answer.
  virtual size_t TxBurst(std::span<const FrameRef> frames) = 0;

  // TxSegmented: sends the first n segments of `job` as n frames (see
  // atp/transport/segmentation.h) and returns n; fewer on back-pressure (the
  // caller advances the job and retries). An invalid job is taken whole and
  // counted as tx_bad_frames. Payloads are copied before the call returns.
  virtual size_t TxSegmented(const SegmentationJob& job) = 0;

  // Flush: pushes out what TxBurst/TxSegmented took and reclaims the buffers
  // the medium is done with. Returns how many taken frames the queue still
  // holds (waiting for room at the receiver, or for a completion); 0 means
  // every taken frame is gone and its buffer back in its pool.
  virtual size_t Flush() = 0;

  // rx_pool: where RxBurst's frames come from. tx_pool: buffers for TxBurst.
  virtual FramePool& rx_pool() = 0;
  virtual FramePool& tx_pool() = 0;

  virtual QueueStats stats() const = 0;

  // wait_fd: a file descriptor that polls readable when RxBurst may return
  // frames (for a runtime's back-off to sleep on), or -1 if the backend has
  // none. The queue owns it.
  virtual int wait_fd() const { return -1; }
};

// Device: one NIC, virtual port or socket set, and its queues.
class Device {
 public:
  virtual ~Device() = default;

  // backend: "loopback", "kernel_udp", "dpdk", "mlx5".
  virtual std::string_view backend() const = 0;
  // address: this node's IPv4 and MAC.
  virtual const DeviceAddress& address() const = 0;
  virtual uint16_t base_port() const = 0;
  virtual uint32_t num_queues() const = 0;
  // queue: 0 <= index < num_queues(); lives as long as the device. Release
  // every frame of a queue's pools before destroying the device.
  virtual Queue& queue(uint32_t index) = 0;
};

}  // namespace atp::transport

#endif  // ATP_TRANSPORT_H_
