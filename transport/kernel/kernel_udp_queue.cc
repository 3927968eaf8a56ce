// transport/kernel/kernel_udp_queue.cc: a kernel UDP queue's setup, pools,
// counters and route cache. Sending is in kernel_udp_tx.cc, receiving in
// kernel_udp_rx.cc.
#include "transport/kernel/kernel_udp_queue.h"

#include <unistd.h>

#include <utility>

namespace atp::transport::internal {
namespace {

constexpr size_t kPrefixBytes = wire::kL2L4HeaderBytes;
constexpr size_t kMessageBytes = wire::kMessageBytes;
static_assert(kPrefixBytes + kMessageBytes == kFrameBytes);

absl::StatusOr<std::unique_ptr<HeapFramePool>> MakePool(uint32_t frames, uint32_t headroom) {
  FramePoolOptions options;
  options.frames = frames;
  options.headroom = headroom;
  return HeapFramePool::Create(options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<KernelUdpQueue>> KernelUdpQueue::Create(
    int fd, const NodeTable* table, const KernelUdpQueueConfig& config) {
  auto rx_pool = MakePool(config.device.rx_pool_frames, config.device.headroom);
  auto tx_pool = MakePool(config.device.tx_pool_frames, config.device.headroom);
  if (!rx_pool.ok() || !tx_pool.ok()) {
    ::close(fd);
    return rx_pool.ok() ? tx_pool.status() : rx_pool.status();
  }
  return std::unique_ptr<KernelUdpQueue>(
      new KernelUdpQueue(fd, table, config, *std::move(rx_pool), *std::move(tx_pool)));
}

KernelUdpQueue::KernelUdpQueue(int fd, const NodeTable* table, const KernelUdpQueueConfig& config,
                               std::unique_ptr<HeapFramePool> rx_pool,
                               std::unique_ptr<HeapFramePool> tx_pool)
    : fd_(fd),
      table_(table),
      config_(config),
      port_(static_cast<uint16_t>(config.device.base_port + config.index)),
      whole_frame_(config.encapsulation == KernelUdpEncapsulation::kWholeFrame),
      datagram_bytes_(whole_frame_ ? kFrameBytes : kMessageBytes),
      datagram_offset_(whole_frame_ ? 0 : kPrefixBytes),
      rx_pool_(std::move(rx_pool)),
      tx_pool_(std::move(tx_pool)),
      gso_active_(config.gso),
      msgs_(kMaxMessages),
      iovs_(kMaxSegments),
      names_(kMaxMessages),
      controls_(kMaxMessages),
      msg_failed_(kMaxMessages),
      staging_(kMaxSegments * datagram_bytes_),
      tx_msgs_(kMaxMessages),
      tx_iovs_(kMaxPendingSegments),
      tx_controls_(kMaxMessages) {
  pending_.reserve(kMaxPendingSegments);
  if (config.gateway.has_value()) {
    for (uint32_t q = 0; q < kMaxQueues; ++q) {
      gateway_sockets_.push_back(ToSockaddr(
          SocketAddress{config.gateway->ip, static_cast<uint16_t>(config.gateway->port + q)}));
    }
  }
  if (config.gro) {
    gro_memory_.resize(size_t{config.gro_buffers} * kGroBufferBytes);
    staged_.resize(config.gro_buffers);
    prefixes_.resize(config.gro_buffers);
  }
  capabilities_.max_burst = config.device.max_burst;
  capabilities_.mtu = kFrameBytes;
  capabilities_.headroom = config.device.headroom;
  capabilities_.max_offload_segments = config.gso ? config.max_gso_segments : 1;
  capabilities_.tx_segmentation = config.gso ? TxSegmentation::kKernelGso : TxSegmentation::kSoftware;
  capabilities_.rx_coalescing = config.gro ? RxCoalescing::kKernelGro : RxCoalescing::kNone;
  capabilities_.steering = Steering::kSocketPerQueue;
}

KernelUdpQueue::~KernelUdpQueue() {
  // Whatever is still pending leaves now if the socket takes it; the frames
  // go back to their pools either way.
  (void)SendPending();
  for (const PendingSegment& p : pending_) {
    if (p.frame.pool != nullptr) FreeFrame(p.frame);
  }
  ::close(fd_);
}

QueueStats KernelUdpQueue::stats() const {
  QueueStats s = stats_;
  s.rx_dropped = socket_drops_ + truncated_;
  return s;
}

void KernelUdpQueue::FreeFrame(const FrameRef& frame) {
  if (frame.pool == tx_pool_.get()) {
    tx_pool_->Free(frame);
  } else if (frame.pool == rx_pool_.get()) {
    rx_pool_->Free(frame);
  } else {
    frame.pool->FreeBurst({&frame, 1});
  }
}

const sockaddr_in* KernelUdpQueue::Resolve(uint32_t dst_ipv4, uint32_t queue) {
  if (cached_ipv4_ != dst_ipv4 || cached_generation_ != table_->generation()) {
    cached_node_ = table_->FindNode(dst_ipv4);
    cached_ipv4_ = dst_ipv4;
    cached_generation_ = table_->generation();
  }
  if (!cached_node_) {
    // queue < kMaxQueues: ClassifyFrame and IsValidSegmentationJob saw to it.
    return gateway_sockets_.empty() ? nullptr : &gateway_sockets_[queue];
  }
  const NodeTable::Node& node = table_->node(*cached_node_);
  if (queue >= node.queue_sockets.size()) return nullptr;
  return &node.queue_sockets[queue];
}

}  // namespace atp::transport::internal
