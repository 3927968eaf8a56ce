// transport/mlx5/mlx5_queue.cc: an mlx5 queue: its datapaths wired to the
// verbs objects the control path (mlx5_device.cc) made.
#include "transport/mlx5/mlx5_queue.h"

#include <utility>

namespace atp::transport::mlx5 {

absl::StatusOr<std::unique_ptr<Mlx5Queue>> Mlx5Queue::Create(const Mlx5QueueConfig& config,
                                                             SendResources send,
                                                             ReceiveResources receive) {
  std::unique_ptr<Mlx5Queue> queue(new Mlx5Queue(config, std::move(send), std::move(receive)));
  if (queue->striding_ != nullptr) {
    queue->striding_->Repost();
    if (queue->striding_->posted_entries() == 0) {
      return absl::InternalError("mlx5: could not post any striding receive entry");
    }
  } else {
    queue->plain_->Repost();
    if (queue->plain_->posted_entries() == 0) {
      return absl::InternalError("mlx5: could not post any receive buffer");
    }
  }
  return queue;
}

Mlx5Queue::Mlx5Queue(const Mlx5QueueConfig& config, SendResources send, ReceiveResources receive)
    : config_(config), send_(std::move(send)), receive_(std::move(receive)) {
  const bool tso = config.tso.segments_per_request > 0;
  TxPathConfig tx;
  tx.base_port = config.device.base_port;
  tx.depth = send_.depth;
  tx.max_burst = config.device.max_burst;
  tx.signal_every = config.signal_every;
  tx.max_inline_frame = config.max_inline_frame;
  tx.tso_segments_per_request = config.tso.segments_per_request;
  TxPathMemory memory;
  memory.tx_pool = send_.tx_pool.get();
  memory.tx_lkey = send_.tx_pool_mr->lkey;
  if (tso) {
    memory.staging = send_.staging.bytes();
    memory.staging_slot_bytes = config.tso.slot_bytes;
    memory.staging_slots = config.tso_staging_slots;
    memory.staging_lkey = send_.staging_mr->lkey;
  }
  tx_ = std::make_unique<TxPath>(tx, memory, send_.qpx, send_.cq.get(), &stats_);

  const RxSteering steering{config.device.base_port, config.index};
  if (receive_.mode == Mlx5RxMode::kMultiPacketRq) {
    ring_ = std::make_unique<MprqBufferRing>(receive_.geometry, receive_.memory.data());
    StridingRings rings;
    rings.wq_buffer = static_cast<uint8_t*>(receive_.dv_wq.buf);
    rings.wq_entries = receive_.dv_wq.wqe_cnt;
    rings.wq_stride = receive_.dv_wq.stride;
    rings.wq_doorbell = reinterpret_cast<uint32_t*>(receive_.dv_wq.dbrec);
    rings.cq_buffer = static_cast<uint8_t*>(receive_.dv_cq.buf);
    rings.cq_entries = receive_.dv_cq.cqe_cnt;
    rings.cq_entry_bytes = receive_.dv_cq.cqe_size;
    rings.cq_doorbell =
        reinterpret_cast<uint32_t*>(receive_.dv_cq.dbrec) + kCqDoorbellConsumerIndex;
    rings.lkey = receive_.mr->lkey;
    striding_ = std::make_unique<StridingRxPath>(rings, ring_.get(), steering, &stats_);
  } else {
    plain_ =
        std::make_unique<PlainRxPath>(receive_.wq.get(), receive_.cq.get(), receive_.pool.get(),
                                      receive_.mr->lkey, receive_.ring, steering, &stats_);
  }

  capabilities_.max_burst = config.device.max_burst;
  capabilities_.mtu = kFrameBytes;
  capabilities_.headroom = static_cast<uint32_t>(rx_pool().headroom());
  capabilities_.steering = Steering::kHardwareFlow;
  capabilities_.tx_segmentation = tso ? TxSegmentation::kHardwareTso : TxSegmentation::kSoftware;
  capabilities_.max_offload_segments = tso ? config.tso.segments_per_request : 1;
  capabilities_.rx_coalescing =
      striding_ != nullptr ? RxCoalescing::kMultiPacketRq : RxCoalescing::kNone;
}

Mlx5Queue::~Mlx5Queue() { Shutdown(); }

void Mlx5Queue::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // Stop the NIC first: nothing may read or write the buffers given back.
  receive_.flow.reset();
  receive_.qp.reset();
  send_.qp.reset();
  send_.qpx = nullptr;
  tx_->Stop();
  if (plain_ != nullptr) plain_->Stop();
}

FramePool& Mlx5Queue::rx_pool() {
  if (ring_ != nullptr) return *ring_;
  return *receive_.pool;
}

size_t Mlx5Queue::RxBurst(std::span<FrameRef> frames) {
  if (frames.empty() || shut_down_) return 0;
  return striding_ != nullptr ? striding_->Receive(frames) : plain_->Receive(frames);
}

}  // namespace atp::transport::mlx5
