// transport/dpdk/dpdk_queue.cc: the datapath of a DPDK queue.
#include "transport/dpdk/dpdk_queue.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "atp/transport/segmentation.h"
#include "transport/dpdk/thread_lcore.h"

namespace atp::transport::internal {

DpdkQueue::DpdkQueue(const DpdkQueueConfig& config, const PeerTable* peers,
                     SteeringRings* steering_rings, std::unique_ptr<MbufPool> rx_pool,
                     std::unique_ptr<MbufPool> tx_pool)
    : config_(config),
      peers_(peers),
      steering_rings_(steering_rings),
      rx_pool_(std::move(rx_pool)),
      tx_pool_(std::move(tx_pool)),
      tx_ring_(config.tx_ring_frames),
      outbox_(size_t{config.num_queues} * kChunk) {
  capabilities_.max_burst = config.max_burst;
  capabilities_.mtu = kFrameBytes;
  capabilities_.headroom = static_cast<uint32_t>(rx_pool_->headroom());
  capabilities_.max_offload_segments = 1;
  capabilities_.tx_segmentation = TxSegmentation::kSoftware;
  capabilities_.rx_coalescing = RxCoalescing::kNone;
  capabilities_.steering = Steering::kSoftware;
  gate_slot_.port_id = config.port_id;
  if (config_.gate != nullptr) config_.gate->Register(&gate_slot_);
  restart_check_cycles_ = static_cast<uint64_t>(
      static_cast<double>(rte_get_tsc_hz()) *
      static_cast<double>(kRestartCheckEvery.ToNanoseconds()) / 1e9);
}

DpdkQueue::~DpdkQueue() {
  if (config_.gate != nullptr) config_.gate->Unregister(&gate_slot_);
  const size_t mask = tx_ring_.size() - 1;
  for (; tx_count_ > 0; --tx_count_, tx_head_ = (tx_head_ + 1) & mask) {
    FreeMbuf(tx_ring_[tx_head_]);
  }
}

// ---------------------------------------------------------------------------
// Receive

size_t DpdkQueue::RxBurst(std::span<FrameRef> frames) {
  EnsureThreadLcore();
  size_t n = Receive(frames);
  if (n == 0 && rx_wait_ != nullptr) {
    // Idle: arm the wake-ups, then look once more (a frame may have come
    // between the look and the arming; rx_wait.h).
    const bool steered = steering_rings_->LowerIfRaised(config_.index);
    if (rx_wait_->OnEmpty() || steered) n = Receive(frames);
  }
  rx_pool_->NoteHandedOut(n);
  stats_.rx_frames += n;
  return n;
}

size_t DpdkQueue::Receive(std::span<FrameRef> frames) {
  rte_mbuf* mbufs[kChunk];
  size_t n = 0;
  // First what other queues' threads steered here: frames of one flow take
  // one path only (this ring or this hardware queue), so reading the two in
  // either order keeps every flow in order.
  while (config_.num_queues > 1 && n < frames.size()) {
    const size_t want = std::min(kChunk, frames.size() - n);
    const size_t got = steering_rings_->Take(config_.index, mbufs, want);
    for (size_t i = 0; i < got; ++i) frames[n + i] = FrameOf(mbufs[i], rx_pool_.get());
    n += got;
    if (got < want) break;
  }
  // Then this queue's own hardware RX queue, which only this thread reads
  // (memif: while the interrupt gate keeps the driver's teardown out).
  InterruptGate* const gate = config_.gate;
  if (n < frames.size() && (gate == nullptr || gate->TryEnter(gate_slot_))) {
    while (n < frames.size()) {
      const size_t want = std::min(kChunk, frames.size() - n);
      const uint16_t got = rte_eth_rx_burst(config_.port_id, static_cast<uint16_t>(config_.index),
                                            mbufs, static_cast<uint16_t>(want));
      MbufsFromDriver(mbufs, got);
      if (got > 0 && rx_wait_ != nullptr) rx_wait_->OnFrames();
      n += SortReceived(mbufs, got, frames.data() + n);
      if (config_.num_queues > 1) PostOutboxes();
      if (got == 0 && config_.restarter != nullptr) MaybeRestartPort();
      if (got < want) break;
    }
    if (gate != nullptr) gate->Leave(gate_slot_);
  }
  return n;
}

size_t DpdkQueue::SortReceived(rte_mbuf** mbufs, size_t n, FrameRef* out) {
  rte_mbuf* bad[kChunk];
  size_t bad_count = 0;
  size_t mine = 0;
  constexpr size_t kPrefetchAhead = 4;  // a NIC's frames are not in cache yet
  for (size_t i = 0; i < std::min(n, kPrefetchAhead); ++i) {
    rte_prefetch0(rte_pktmbuf_mtod(mbufs[i], void*));
  }
  for (size_t i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) rte_prefetch0(rte_pktmbuf_mtod(mbufs[i + kPrefetchAhead], void*));
    rte_mbuf* mbuf = mbufs[i];
    RoutableFrame route;
    const bool whole = mbuf->nb_segs == 1 && mbuf->pkt_len == mbuf->data_len;
    if (!whole ||
        !ClassifyFrame({rte_pktmbuf_mtod(mbuf, const uint8_t*), mbuf->data_len}, config_.base_port,
                       &route) ||
        route.queue >= config_.num_queues) {
      bad[bad_count++] = mbuf;
      continue;
    }
    if (route.queue == config_.index) {
      out[mine++] = FrameOf(mbuf, rx_pool_.get());
    } else {
      outbox_[route.queue * kChunk + outbox_count_[route.queue]++] = mbuf;
    }
  }
  FreeMbufs(bad, bad_count);
  stats_.rx_bad_frames += bad_count;
  return mine;
}

void DpdkQueue::PostOutboxes() {
  for (uint32_t q = 0; q < config_.num_queues; ++q) {
    if (outbox_count_[q] == 0) continue;
    steering_rings_->Post(q, &outbox_[q * kChunk], outbox_count_[q]);
    outbox_count_[q] = 0;
  }
}

// ---------------------------------------------------------------------------
// Transmit

bool DpdkQueue::Routable(const RoutableFrame& route) {
  if (config_.destinations == DpdkDestinations::kAny) return true;
  if (route.dst_ipv4 != cached_ipv4_ || cached_queues_ == 0) {
    cached_ipv4_ = route.dst_ipv4;
    cached_queues_ = peers_->QueuesOf(route.dst_ipv4);
  }
  return route.queue < cached_queues_;
}

void DpdkQueue::ReleaseTaken(const FrameRef& frame) { frame.pool->FreeBurst({&frame, 1}); }

rte_mbuf* DpdkQueue::TxMbufFor(const FrameRef& frame) {
  if (frame.pool == tx_pool_.get()) {
    rte_mbuf* mbuf = MbufOf(frame);
    SyncMbuf(frame, mbuf);
    ++own_frames_taken_;
    return mbuf;
  }
  if (config_.tx_free == TxFreePolicy::kAnyMbuf) {
    MbufPool* pool = frame.pool == rx_pool_.get() ? rx_pool_.get() : AsMbufPool(frame);
    if (pool != nullptr) {  // zero-copy: the mbuf leaves the application
      rte_mbuf* mbuf = MbufOf(frame);
      SyncMbuf(frame, mbuf);
      mbuf->ol_flags = 0;  // a received mbuf carries RX flags
      pool->NoteReturned(1);
      return mbuf;
    }
  }
  rte_mbuf* copy = nullptr;
  if (tx_pool_->AllocMbufs(&copy, 1) == 0) return nullptr;
  std::memcpy(rte_pktmbuf_mtod(copy, uint8_t*), frame.data, frame.length);
  copy->data_len = static_cast<uint16_t>(frame.length);
  copy->pkt_len = frame.length;
  ReleaseTaken(frame);
  return copy;
}

size_t DpdkQueue::TxBurst(std::span<const FrameRef> frames) {
  EnsureThreadLcore();
  size_t taken = 0;
  for (; taken < frames.size(); ++taken) {
    if (tx_room() == 0) {
      DrainTx();
      if (tx_room() == 0) break;
    }
    const FrameRef& frame = frames[taken];
    RoutableFrame route;
    if (!ClassifyFrame(frame.bytes(), config_.base_port, &route)) {
      ++stats_.tx_bad_frames;
      ReleaseTaken(frame);
      continue;
    }
    if (!Routable(route)) {
      ++stats_.tx_unroutable;
      ReleaseTaken(frame);
      continue;
    }
    rte_mbuf* mbuf = TxMbufFor(frame);
    if (mbuf == nullptr) {
      DrainTx();  // a driver that copies (memif) frees what it sent
      mbuf = TxMbufFor(frame);
      if (mbuf == nullptr) break;
    }
    PushTx(mbuf);
    ++stats_.tx_frames;
  }
  DrainTx();
  tx_pool_->NoteReturned(own_frames_taken_);
  own_frames_taken_ = 0;
  if (taken < frames.size()) ++stats_.tx_backpressure;
  return taken;
}

size_t DpdkQueue::TxSegmented(const SegmentationJob& job) {
  EnsureThreadLcore();
  if (!IsValidSegmentationJob(job, config_.base_port)) {
    stats_.tx_bad_frames += job.size();
    return job.size();
  }
  RoutableFrame route;
  route.dst_ipv4 = LoadBig32(job.header.data() + kIpDstOffset);
  route.queue = uint32_t{LoadBig16(job.header.data() + kUdpDstPortOffset)} - config_.base_port;
  route.tos = job.header[kIpTosOffset];
  if (!Routable(route)) {
    stats_.tx_unroutable += job.size();
    return job.size();
  }
  rte_mbuf* mbufs[kChunk];
  size_t n = 0;
  while (n < job.size()) {
    if (tx_room() == 0) DrainTx();
    const size_t want = std::min({kChunk, job.size() - n, tx_room()});
    if (want == 0) break;
    size_t got = tx_pool_->AllocMbufs(mbufs, want);
    if (got == 0) {
      DrainTx();
      got = tx_pool_->AllocMbufs(mbufs, want);
      if (got == 0) break;
    }
    for (size_t i = 0; i < got; ++i) {
      uint8_t* data = rte_pktmbuf_mtod(mbufs[i], uint8_t*);
      WriteSegmentFrame(job, n + i, std::span<uint8_t, kFrameBytes>(data, kFrameBytes));
      mbufs[i]->data_len = static_cast<uint16_t>(kFrameBytes);
      mbufs[i]->pkt_len = kFrameBytes;
      PushTx(mbufs[i]);
    }
    n += got;
  }
  DrainTx();
  stats_.tx_frames += n;
  if (n > 0) ++stats_.tx_segmentation_jobs;
  if (n < job.size()) ++stats_.tx_backpressure;
  return n;
}

void DpdkQueue::MaybeRestartPort() {
  const uint64_t now = rte_get_tsc_cycles();
  if (now < next_restart_check_) return;
  next_restart_check_ = now + restart_check_cycles_;
  config_.restarter->RestartIfDown();
}

void DpdkQueue::DrainTx() {
  if (tx_count_ == 0) return;
  InterruptGate* const gate = config_.gate;
  if (gate != nullptr && !gate->TryEnter(gate_slot_)) return;  // frames wait on the ring
  const size_t size = tx_ring_.size();
  while (tx_count_ > 0) {
    const size_t run = std::min({tx_count_, size - tx_head_, kChunk});
    MbufsToDriver(&tx_ring_[tx_head_], run);
    const uint16_t sent = rte_eth_tx_burst(config_.port_id, static_cast<uint16_t>(config_.index),
                                           &tx_ring_[tx_head_], static_cast<uint16_t>(run));
    tx_head_ = (tx_head_ + sent) & (size - 1);
    tx_count_ -= sent;
    if (sent < run) break;
  }
  // Frames the port refuses (a memif client whose link is down): the
  // restarter's turn too, for a queue that only sends.
  if (tx_count_ > 0 && config_.restarter != nullptr) MaybeRestartPort();
  if (gate != nullptr) gate->Leave(gate_slot_);
}

size_t DpdkQueue::Flush() {
  EnsureThreadLcore();
  DrainTx();
  return tx_count_;
}

QueueStats DpdkQueue::stats() const {
  QueueStats stats = stats_;
  stats.rx_dropped = steering_rings_->drops(config_.index);
  return stats;
}

}  // namespace atp::transport::internal
