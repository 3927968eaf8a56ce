// transport/loopback/loopback_queue.cc: the datapath of a loopback endpoint.
#include "transport/loopback/loopback_queue.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <optional>
#include <utility>

#include "atp/transport/segmentation.h"
#include "transport/common/copy.h"

namespace atp::transport::internal {
namespace {

absl::StatusOr<std::unique_ptr<HeapFramePool>> MakePool(uint32_t frames, uint32_t headroom) {
  FramePoolOptions options;
  options.frames = frames;
  options.headroom = headroom;
  return HeapFramePool::Create(options);
}

}  // namespace

class LoopbackQueue::SlotLender final : public FramePool {
 public:
  explicit SlotLender(LoopbackQueue* queue) : queue_(queue) {}

  size_t AllocBurst(std::span<FrameRef>) override { return 0; }  // lends, never allocates
  void FreeBurst(std::span<const FrameRef> frames) override { queue_->ReturnSlots(frames); }
  size_t free_count() const override { return capacity() - queue_->lent_; }
  size_t capacity() const override { return queue_->rx_ring_.capacity(); }
  size_t frame_capacity() const override { return kFrameBytes; }
  size_t headroom() const override { return 0; }

 private:
  LoopbackQueue* const queue_;
};

absl::StatusOr<std::unique_ptr<LoopbackQueue>> LoopbackQueue::Create(
    LoopbackWireImpl* wire, EndpointId id, uint32_t index, const LoopbackEndpointOptions& options) {
  absl::StatusOr<std::unique_ptr<HeapFramePool>> rx_pool =
      MakePool(options.device.rx_pool_frames, options.device.headroom);
  if (!rx_pool.ok()) return rx_pool.status();
  // With a stepped processor the wire's ingress ring is the transmit pool
  // and ring (TxBurstToIngress): none of the queue's own.
  std::unique_ptr<HeapFramePool> tx_pool;
  if (!wire->stepped()) {
    absl::StatusOr<std::unique_ptr<HeapFramePool>> made =
        MakePool(options.device.tx_pool_frames, options.device.headroom);
    if (!made.ok()) return made.status();
    tx_pool = *std::move(made);
  }
  return std::unique_ptr<LoopbackQueue>(
      new LoopbackQueue(wire, id, index, options, *std::move(rx_pool), std::move(tx_pool)));
}

LoopbackQueue::LoopbackQueue(LoopbackWireImpl* wire, EndpointId id, uint32_t index,
                             const LoopbackEndpointOptions& endpoint,
                             std::unique_ptr<HeapFramePool> rx_pool,
                             std::unique_ptr<HeapFramePool> tx_pool)
    : wire_(wire),
      id_(id),
      index_(index),
      base_port_(endpoint.device.base_port),
      rx_ring_(wire->ring(id, index)),
      signal_(wire->signal(id, index)),
      ingress_(wire->stepped() ? &wire->ingress(id, index) : nullptr),
      rx_pool_(std::move(rx_pool)),
      tx_pool_(std::move(tx_pool)),
      tx_ring_(wire->stepped() ? 0 : endpoint.device.tx_ring_frames),
      scratch_(wire->stepped() ? 0 : endpoint.device.tx_ring_frames) {
  const DeviceOptions& options = endpoint.device;
  if (endpoint.zero_copy_rx) {
    lender_ = std::make_unique<SlotLender>(this);
    returned_.assign(rx_ring_.capacity(), 0);
  }
  capabilities_.max_burst = options.max_burst;
  capabilities_.mtu = kFrameBytes;
  capabilities_.headroom = options.headroom;
  capabilities_.max_offload_segments = 1;
  capabilities_.tx_segmentation = TxSegmentation::kSoftware;
  capabilities_.rx_coalescing = RxCoalescing::kNone;
  capabilities_.steering = Steering::kDirect;
}

LoopbackQueue::~LoopbackQueue() {
  // Frames still waiting for their receiver go back to their pools.
  const size_t mask = tx_ring_.size() - 1;
  for (; tx_count_ > 0; --tx_count_, tx_head_ = (tx_head_ + 1) & mask) {
    FreeFrame(tx_ring_[tx_head_].frame);
  }
}

void LoopbackQueue::FreeFrame(const FrameRef& frame) {
  if (frame.pool == tx_pool_.get()) {
    tx_pool_->Free(frame);
  } else {
    frame.pool->FreeBurst({&frame, 1});
  }
}

void LoopbackQueue::PushTx(const FrameRef& frame, const RoutableFrame& route) {
  tx_ring_[(tx_head_ + tx_count_) & (tx_ring_.size() - 1)] = TxEntry{frame, route};
  ++tx_count_;
}

size_t LoopbackQueue::RxBurst(std::span<FrameRef> frames) {
  if (lender_ != nullptr) return RxBurstInPlace(frames);
  size_t n = 0;
  bool looked_again = false;
  while (n < frames.size()) {
    const uint8_t* slot = rx_ring_.Front();
    if (slot == nullptr) {
      // Empty: lower the wait_fd, then look once more (a sender may have
      // pushed just before it raised).
      if (looked_again || !signal_.LowerIfRaised()) break;
      looked_again = true;
      continue;
    }
    if (!rx_pool_->Alloc(&frames[n])) break;
    CopyBytes<kFrameBytes>(frames[n].data, slot);
    frames[n].length = kFrameBytes;
    rx_ring_.PopQuietly();
    ++n;
  }
  if (n > 0) rx_ring_.PublishHead();
  stats_.rx_frames += n;
  return n;
}

size_t LoopbackQueue::RxBurstInPlace(std::span<FrameRef> frames) {
  size_t n = 0;
  bool looked_again = false;
  while (n < frames.size()) {
    uint8_t* slot = rx_ring_.FrontAt(lent_);
    if (slot == nullptr) {
      // As RxBurst: lower the wait_fd, then look once more.
      if (looked_again || !signal_.LowerIfRaised()) break;
      looked_again = true;
      continue;
    }
    frames[n] =
        FrameRef{slot, lender_.get(), rx_ring_.head() + lent_, static_cast<uint32_t>(kFrameBytes)};
    ++lent_;
    ++n;
  }
  stats_.rx_frames += n;
  return n;
}

void LoopbackQueue::ReturnSlots(std::span<const FrameRef> frames) {
  const uint64_t mask = rx_ring_.capacity() - 1;
  for (const FrameRef& frame : frames) {
    assert(frame.handle >= rx_ring_.head() && frame.handle < rx_ring_.head() + lent_ &&
           "a frame this queue did not lend, or lent and returned already");
    returned_[frame.handle & mask] = 1;
  }
  // Usually the frames come back in the order lent: each pops at once.
  bool popped = false;
  while (lent_ > 0 && returned_[rx_ring_.head() & mask] != 0) {
    returned_[rx_ring_.head() & mask] = 0;
    rx_ring_.PopQuietly();
    --lent_;
    popped = true;
  }
  if (popped) rx_ring_.PublishHead();
}

size_t LoopbackQueue::TxBurst(std::span<const FrameRef> frames) {
  if (ingress_ != nullptr) return TxBurstToIngress(frames);
  size_t taken = 0;
  for (; taken < frames.size(); ++taken) {
    if (tx_full()) {
      Drain();
      if (tx_full()) break;
    }
    const FrameRef& frame = frames[taken];
    RoutableFrame route;
    if (!ClassifyFrame(frame.bytes(), base_port_, &route)) {
      ++stats_.tx_bad_frames;
      FreeFrame(frame);
      continue;
    }
    PushTx(frame, route);
    ++stats_.tx_frames;
  }
  Drain();
  if (taken < frames.size()) ++stats_.tx_backpressure;
  return taken;
}

size_t LoopbackQueue::TxSegmented(const SegmentationJob& job) {
  if (!IsValidSegmentationJob(job, base_port_)) {
    stats_.tx_bad_frames += job.size();
    return job.size();
  }
  if (ingress_ != nullptr) return TxSegmentedToIngress(job);
  RoutableFrame route;
  route.dst_ipv4 = LoadBig32(job.header.data() + kIpDstOffset);
  route.queue = uint32_t{LoadBig16(job.header.data() + kUdpDstPortOffset)} - base_port_;
  route.tos = job.header[kIpTosOffset];
  size_t n = 0;
  while (n < job.size()) {
    if (tx_full()) {
      Drain();
      if (tx_full()) break;
    }
    FrameRef frame;
    if (!tx_pool_->Alloc(&frame)) {
      Drain();  // delivered frames give their buffers back
      if (!tx_pool_->Alloc(&frame)) break;
    }
    WriteSegmentFrame(job, n, std::span<uint8_t, kFrameBytes>(frame.data, kFrameBytes));
    frame.length = kFrameBytes;
    PushTx(frame, route);
    ++n;
  }
  Drain();
  stats_.tx_frames += n;
  if (n > 0) ++stats_.tx_segmentation_jobs;
  if (n < job.size()) ++stats_.tx_backpressure;
  return n;
}

size_t LoopbackQueue::TxBurstToIngress(std::span<const FrameRef> frames) {
  size_t taken = 0;
  for (; taken < frames.size(); ++taken) {
    const FrameRef& frame = frames[taken];
    RoutableFrame route;  // unused: the processor routes; this checks the frame
    if (!ClassifyFrame(frame.bytes(), base_port_, &route)) {
      ++stats_.tx_bad_frames;
      FreeFrame(frame);
      continue;
    }
    if (frame.pool == ingress_) {
      ingress_->MarkSent(frame);
    } else {
      // Written elsewhere: copied into a slot of the ring.
      FrameRef slot;
      if (ingress_->AllocBurst({&slot, 1}) == 0) break;  // the processor frees slots
      CopyBytes<kFrameBytes>(slot.data, frame.data);
      slot.length = kFrameBytes;
      ingress_->MarkSent(slot);
      FreeFrame(frame);
    }
    ++stats_.tx_frames;
  }
  ingress_->Publish();
  if (taken < frames.size()) ++stats_.tx_backpressure;
  return taken;
}

size_t LoopbackQueue::TxSegmentedToIngress(const SegmentationJob& job) {
  size_t n = 0;
  while (n < job.size()) {
    FrameRef frame;
    if (ingress_->AllocBurst({&frame, 1}) == 0) break;
    WriteSegmentFrame(job, n, std::span<uint8_t, kFrameBytes>(frame.data, kFrameBytes));
    frame.length = kFrameBytes;
    ingress_->MarkSent(frame);
    ++n;
  }
  ingress_->Publish();
  stats_.tx_frames += n;
  if (n > 0) ++stats_.tx_segmentation_jobs;
  if (n < job.size()) ++stats_.tx_backpressure;
  return n;
}

size_t LoopbackQueue::Flush() {
  if (ingress_ != nullptr) {
    ingress_->Publish();
    return ingress_->Unprocessed();
  }
  Drain();
  return tx_count_;
}

void LoopbackQueue::Drain() {
  if (tx_count_ == 0) return;
  if (wire_->has_processor()) {
    DrainThroughProcessor();
  } else {
    DrainDirect();
  }
}

void LoopbackQueue::DrainDirect() {
  const size_t mask = tx_ring_.size() - 1;
  // The receive queue frames were last pushed to: raised when the run of
  // frames to it ends (one flag exchange per run, not per frame).
  std::optional<std::pair<EndpointId, uint32_t>> to_raise;
  const auto raise = [&] {
    if (to_raise) wire_->Raise(to_raise->first, to_raise->second);
    to_raise.reset();
  };
  while (tx_count_ > 0) {
    const TxEntry& entry = tx_ring_[tx_head_];
    if (!cached_endpoint_ || cached_ipv4_ != entry.route.dst_ipv4) {
      cached_endpoint_ = wire_->FindEndpoint(wire::Ipv4Address{entry.route.dst_ipv4});
      cached_ipv4_ = entry.route.dst_ipv4;
    }
    if (!cached_endpoint_) {
      ++stats_.tx_unroutable;
    } else {
      const PushResult result = wire_->PushDirect(*cached_endpoint_, entry.route.queue,
                                                  entry.frame.data);
      if (result == PushResult::kRingFull) break;  // head-of-line: keep order
      if (result == PushResult::kUnroutable) ++stats_.tx_unroutable;
      if (result == PushResult::kDelivered) {
        const std::pair<EndpointId, uint32_t> target{*cached_endpoint_, entry.route.queue};
        if (to_raise && *to_raise != target) raise();
        to_raise = target;
      }
    }
    FreeFrame(entry.frame);
    tx_head_ = (tx_head_ + 1) & mask;
    --tx_count_;
  }
  raise();
}

void LoopbackQueue::DrainThroughProcessor() {
  // The processor consumes every frame: hand it the ring as one contiguous run.
  const size_t mask = tx_ring_.size() - 1;
  const size_t n = tx_count_;
  for (size_t i = 0; i < n; ++i) scratch_[i] = tx_ring_[(tx_head_ + i) & mask].frame;
  const std::span<const FrameRef> run(scratch_.data(), n);
  wire_->ProcessAndDeliver(id_, run);
  ReleaseFrames(run);
  tx_head_ = (tx_head_ + n) & mask;
  tx_count_ = 0;
}

QueueStats LoopbackQueue::stats() const {
  QueueStats s = stats_;
  s.rx_dropped = wire_->ring_drops(id_, index_).load(std::memory_order_relaxed);
  return s;
}

LoopbackDevice::LoopbackDevice(std::shared_ptr<LoopbackWireImpl> wire, EndpointId id,
                               const LoopbackEndpointOptions& options,
                               std::vector<std::unique_ptr<LoopbackQueue>> queues)
    : wire_(std::move(wire)),
      id_(id),
      address_(options.address),
      base_port_(options.device.base_port),
      queues_(std::move(queues)) {}

LoopbackDevice::~LoopbackDevice() { wire_->Close(id_); }

}  // namespace atp::transport::internal
