// transport/kernel/kernel_udp_queue.h: one kernel UDP queue: a socket, its
// sendmmsg/recvmmsg batches, the datagrams taken but not yet sent (they leave
// together at Flush, or once kSendAtSegments wait: one sendmmsg with long GSO
// runs for several bursts), and its GRO staging buffers, in either
// encapsulation (a datagram = the 264-byte ATP message, or the whole 306-byte
// frame). Private to transport/kernel.
#ifndef ATP_TRANSPORT_KERNEL_KERNEL_UDP_QUEUE_H_
#define ATP_TRANSPORT_KERNEL_KERNEL_UDP_QUEUE_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/transport.h"
#include "atp/transport/frame_pool.h"
#include "atp/transport/kernel_udp.h"
#include "transport/kernel/node_table.h"

namespace atp::transport::internal {

// KernelUdpQueueConfig: what a queue needs from its device.
struct KernelUdpQueueConfig {
  uint32_t index = 0;
  DeviceOptions device;
  DeviceAddress local;
  bool gso = false;
  bool gro = false;
  TxCoalescing tx_coalescing = TxCoalescing::kGsoRuns;
  uint32_t max_gso_segments = 64;
  uint32_t gro_buffers = 8;
  KernelUdpEncapsulation encapsulation = KernelUdpEncapsulation::kAtpMessage;
  std::optional<SocketAddress> gateway;  // kWholeFrame: where frames to strangers go
};

class KernelUdpQueue final : public Queue {
 public:
  // Create: takes ownership of `fd` (a bound, non-blocking UDP socket) even
  // on failure. `table` outlives the queue and does not change while it runs.
  static absl::StatusOr<std::unique_ptr<KernelUdpQueue>> Create(int fd, const NodeTable* table,
                                                                const KernelUdpQueueConfig& config);
  ~KernelUdpQueue() override;

  uint32_t index() const override { return config_.index; }
  const QueueCapabilities& capabilities() const override { return capabilities_; }
  size_t RxBurst(std::span<FrameRef> frames) override;
  size_t TxBurst(std::span<const FrameRef> frames) override;
  size_t TxSegmented(const SegmentationJob& job) override;
  // Flush: sends what TxBurst and whole-frame TxSegmented took since the last
  // Flush; returns how many datagrams stay pending (the socket was full).
  size_t Flush() override;
  FramePool& rx_pool() override { return *rx_pool_; }
  FramePool& tx_pool() override { return *tx_pool_; }
  QueueStats stats() const override;
  int wait_fd() const override { return fd_; }

  // Batch limits: messages per sendmmsg/recvmmsg, segments per sendmmsg.
  static constexpr size_t kMaxMessages = 64;
  static constexpr size_t kMaxSegments = 1024;
  // Datagrams taken and not yet sent, at most (room for a segmentation job
  // beside TxBurst's frames).
  static constexpr size_t kMaxPendingSegments = 256;
  // kSendAtSegments: pending datagrams that leave at once, before Flush: a
  // full GSO send (or a full sendmmsg without GSO). Holding more saves few
  // calls, and what waits here was stamped as sent by the caller (a step cut
  // short by the scheduler turned whole windows into retransmissions).
  static constexpr size_t kSendAtSegments = 64;
  // kGroBufferBytes: one receive buffer with GRO: the largest UDP datagram.
  static constexpr size_t kGroBufferBytes = 65536;

 private:
  // A 64-byte control buffer per message: UDP_SEGMENT + IP_TOS on send;
  // IP_TOS + SO_RXQ_OVFL + UDP_GRO on receive.
  struct alignas(alignof(cmsghdr)) Control {
    uint8_t bytes[64];
  };
  // PendingSegment: one datagram taken and not yet sent. `frame` is the
  // taken frame its bytes are in (freed once sent), or has no pool when the
  // bytes are in staging_ (whole-frame segmentation).
  struct PendingSegment {
    const uint8_t* data = nullptr;  // datagram_bytes_ of it
    FrameRef frame;
    sockaddr_in dest{};             // a copy: the node table's may move
    uint8_t tos = 0;
  };
  // SendOutcome: how far a sendmmsg batch got.
  struct SendOutcome {
    size_t messages_done = 0;  // sent, or dropped on a hard error
    bool backpressure = false;
    bool gso_refused = false;  // the route refused GSO: rebuild without it and go on
  };

  KernelUdpQueue(int fd, const NodeTable* table, const KernelUdpQueueConfig& config,
                 std::unique_ptr<HeapFramePool> rx_pool, std::unique_ptr<HeapFramePool> tx_pool);

  // Resolve: the node and queue socket a frame to (dst_ipv4, queue) goes to
  // (the gateway's queue socket for a destination that is no node, when there
  // is a gateway), or null when there is none.
  const sockaddr_in* Resolve(uint32_t dst_ipv4, uint32_t queue);
  // SetControl: writes a message's control data into `control` (GSO segment
  // size when `segments` > 1 and tos when not ECT(0)).
  void SetControl(msghdr& header, Control& control, size_t segments, uint8_t tos);
  // SendBatch: sendmmsg of msgs[0, count), retried past hard errors.
  SendOutcome SendBatch(mmsghdr* msgs, size_t count);
  // SendPending: sends pending_ (GSO runs of one destination and TOS, up to
  // kMaxMessages per sendmmsg) until it is empty or the socket is full;
  // false when some stay pending.
  bool SendPending();
  // BuildPendingChunk: tx_msgs_ for pending_[first, ...): returns the
  // messages built and sets *segments to the datagrams they carry.
  size_t BuildPendingChunk(size_t first, size_t* segments);
  // TxSegmentedDeferred: kWholeFrame: builds the job's frames in staging_ and
  // adds them to pending_.
  size_t TxSegmentedDeferred(const SegmentationJob& job, const sockaddr_in& dest, uint8_t tos);
  size_t TxSegmentedChunk(const SegmentationJob& job, size_t first, const sockaddr_in* dest,
                          uint8_t tos, bool* backpressure);
  size_t RxPlain(std::span<FrameRef> frames);
  size_t RxGro(std::span<FrameRef> frames);
  // ReceiveGroBatch: recvmmsg of up to gro_buffers datagrams into the GRO
  // buffers; false when none came. *drained: fewer came than asked for (the
  // socket was empty then: no point in asking again within this RxBurst).
  bool ReceiveGroBatch(bool* drained);
  // ReadControl: TOS, drops and GRO segment size from message m's control data.
  void ReadControl(size_t m, uint8_t* tos, uint32_t* gso_size);
  // PrefixFor: the 42-byte L2-L4 header of a frame from `from` (valid until
  // the next call), or null for an unknown sender.
  const uint8_t* PrefixFor(const sockaddr_in& from, uint8_t tos);
  // AcceptWholeFrame: kWholeFrame. Whether `frame` (kFrameBytes) is an ATP
  // frame for this queue (IPv4 without options, UDP, destination port =
  // base_port + index); if so, an outer CE mark is copied onto an inner ECT
  // frame (RFC 6040), its IPv4 checksum updated.
  bool AcceptWholeFrame(uint8_t* frame, uint8_t outer_tos) const;
  // IsWholeFrameFor: the same check, without touching the frame.
  bool IsWholeFrameFor(const uint8_t* frame) const;
  // FromPeer: kWholeFrame. Whether a datagram from `from` came from a
  // configured peer: a queue socket of the gateway or of a node of the table
  // (this node included). Others' datagrams are dropped and counted
  // (rx_bad_frames), as kAtpMessage drops an unknown sender's: the overlay's
  // links are bound to their sockets (docs/security.md).
  bool FromPeer(const sockaddr_in& from);
  void FreeFrame(const FrameRef& frame);

  const int fd_;
  const NodeTable* const table_;
  const KernelUdpQueueConfig config_;
  const uint16_t port_;  // base_port + index: the ports rebuilt frames carry
  // What a datagram carries: whole_frame_ ? the frame : the message after
  // the 42-byte prefix; datagram_bytes_ of it, at frame offset
  // datagram_offset_.
  const bool whole_frame_;
  const size_t datagram_bytes_;
  const size_t datagram_offset_;
  std::vector<sockaddr_in> gateway_sockets_;  // queue i's socket at the gateway; empty: none
  QueueCapabilities capabilities_;
  std::unique_ptr<HeapFramePool> rx_pool_;
  std::unique_ptr<HeapFramePool> tx_pool_;
  bool gso_active_;  // config_.gso until a route refuses GSO

  // Receiving, and kAtpMessage segmentation jobs (sent before they return).
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  std::vector<sockaddr_in> names_;
  std::vector<Control> controls_;
  std::vector<uint8_t> msg_failed_;   // TX: the message hit a hard error (dropped)
  std::vector<uint8_t> staging_;      // TX segmentation: kMaxSegments datagrams
  // Pending datagrams (TxBurst's frames, whole-frame segments in staging_,
  // pending_staged_ of them there), in the order taken, and the sendmmsg
  // batch SendPending builds from them.
  std::vector<PendingSegment> pending_;
  size_t pending_staged_ = 0;
  std::vector<mmsghdr> tx_msgs_;
  std::vector<iovec> tx_iovs_;
  std::vector<Control> tx_controls_;
  // Receive with GRO: datagrams land in gro_buffers buffers of 64 KiB; each
  // 264-byte segment is then copied once into a frame of the RX pool (cheaper
  // than letting the kernel scatter them: 64 small copies per datagram cost it
  // more than one large one).
  struct Staged {
    const uint8_t* data = nullptr;
    uint32_t bytes = 0;      // the datagram's length
    uint32_t segment = 0;    // GRO segment size (the length when not coalesced)
    uint32_t offset = 0;     // the next segment
    const uint8_t* prefix = nullptr;  // kAtpMessage: into prefixes_; null: an unknown sender
    bool from_peer = false;           // kWholeFrame: FromPeer of its sender
    uint8_t tos = 0;                  // the outer TOS as received
  };
  std::vector<uint8_t> gro_memory_;
  std::vector<Staged> staged_;
  std::vector<std::array<uint8_t, wire::kL2L4HeaderBytes>> prefixes_;  // one per staged datagram
  size_t staged_count_ = 0;
  size_t staged_next_ = 0;
  uint64_t socket_drops_ = 0;  // SO_RXQ_OVFL: the socket's drops so far
  uint64_t truncated_ = 0;     // bytes beyond a GRO buffer, in whole segments

  // One-entry caches: the last destination's node (or that it has none, as
  // of table generation cached_generation_), the last sender's prefix.
  uint32_t cached_ipv4_ = 0;
  uint64_t cached_generation_ = ~uint64_t{0};
  std::optional<NodeTable::NodeIndex> cached_node_;
  uint64_t last_prefix_key_ = 0;  // sender address, port and TOS
  bool last_prefix_valid_ = false;
  std::array<uint8_t, wire::kL2L4HeaderBytes> last_prefix_{};
  uint64_t last_peer_key_ = 0;  // the last sender FromPeer accepted (address, port)
  bool last_peer_valid_ = false;
  QueueStats stats_;
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_KERNEL_KERNEL_UDP_QUEUE_H_
