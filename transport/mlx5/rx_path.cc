// transport/mlx5/rx_path.cc: striding and plain receive.
#include "transport/mlx5/rx_path.h"

#include <algorithm>
#include <cassert>

#include "transport/common/frame_layout.h"
#include "transport/mlx5/dma_barrier.h"

namespace atp::transport::mlx5 {
namespace {

constexpr int kPollBatch = 32;
constexpr uint32_t kPostBatch = 32;

// StoreDoorbell: a doorbell record is read by the NIC: store it for real.
void StoreDoorbell(uint32_t* record, uint32_t value) {
  *static_cast<volatile uint32_t*>(record) = value;
}

}  // namespace

bool AcceptFrame(const uint8_t* data, uint32_t bytes, const RxSteering& steering) {
  internal::RoutableFrame routable;
  return internal::ClassifyFrame({data, bytes}, steering.base_port, &routable) &&
         routable.queue == steering.queue;
}

// ---------------------------------------------------------------------------
// Striding.

StridingRxPath::StridingRxPath(const StridingRings& rings, MprqBufferRing* ring,
                               const RxSteering& steering, QueueStats* stats)
    : rings_(rings),
      ring_(ring),
      steering_(steering),
      stats_(stats),
      cursor_(rings.cq_buffer, rings.cq_entries, rings.cq_entry_bytes) {
  assert(ring->geometry().wq_depth == rings.wq_entries);
  assert(rings.wq_stride >= kMprqWqeBytes);
}

void StridingRxPath::Repost() {
  bool posted = false;
  while (wq_head_ - wq_tail_ < rings_.wq_entries) {
    const std::optional<uint32_t> chunk = ring_->TakeFreeChunk();
    if (!chunk.has_value()) break;
    uint8_t* entry =
        rings_.wq_buffer + size_t{wq_head_ & (rings_.wq_entries - 1)} * rings_.wq_stride;
    WriteMprqWqe(entry, reinterpret_cast<uintptr_t>(ring_->chunk_data(*chunk)),
                 ring_->geometry().wqe_bytes, rings_.lkey);
    ring_->MarkPosted(wq_head_, *chunk);
    ++wq_head_;
    posted = true;
  }
  if (posted) {
    // The entries must reach memory before the doorbell record that publishes them.
    DmaWriteBarrier();
    StoreDoorbell(rings_.wq_doorbell, RqDoorbellValue(wq_head_));
  }
}

size_t StridingRxPath::Receive(std::span<FrameRef> frames) {
  Repost();
  size_t n = 0;
  bool consumed = false;
  while (n < frames.size()) {
    const uint8_t* cqe = cursor_.Peek();
    if (cqe == nullptr) break;
    consumed = true;
    if (ClassifyCqe(cqe) == CqeClass::kReceive) {
      const MprqArrival arrival = ring_->Arrive(ParseStridedCqe(cqe));
      if (arrival.malformed) {
        ++stats_->rx_bad_frames;
      } else if (arrival.data != nullptr) {
        if (AcceptFrame(arrival.data, arrival.bytes, steering_)) {
          frames[n++] = ring_->Keep(arrival);
          ++stats_->rx_frames;
        } else {
          ++stats_->rx_bad_frames;
        }
      }
      if (arrival.completes_wqe) ++wq_tail_;
      ring_->Settle(arrival);
    } else {
      // An entry completed in error (or a CQE this queue never asks for):
      // whatever it held is lost.
      ++stats_->rx_dropped;
    }
    cursor_.Pop();
  }
  if (consumed) {
    StoreDoorbell(rings_.cq_doorbell, CqDoorbellValue(cursor_.consumer_index()));
    // Entries the NIC just finished can take chunks freed meanwhile.
    Repost();
  }
  return n;
}

// ---------------------------------------------------------------------------
// Plain.

PlainRxPath::PlainRxPath(ibv_wq* wq, ibv_cq* cq, PostedFramePool* pool, uint32_t lkey,
                         uint32_t entries, const RxSteering& steering, QueueStats* stats)
    : wq_(wq),
      cq_(cq),
      pool_(pool),
      lkey_(lkey),
      steering_(steering),
      stats_(stats),
      posted_(entries) {
  assert(entries != 0 && (entries & (entries - 1)) == 0);
}

void PlainRxPath::Repost() {
  if (wq_ == nullptr) return;
  const uint32_t entries = static_cast<uint32_t>(posted_.size());
  const uint32_t mask = entries - 1;
  while (head_ - tail_ < entries) {
    ibv_recv_wr wrs[kPostBatch];
    ibv_sge sges[kPostBatch];
    uint32_t count = 0;
    while (count < kPostBatch && head_ + count - tail_ < entries) {
      FrameRef frame;
      if (!pool_->TakeForPosting(&frame)) break;
      posted_[(head_ + count) & mask] = frame;
      sges[count] = ibv_sge{reinterpret_cast<uintptr_t>(frame.data),
                            static_cast<uint32_t>(pool_->frame_capacity()), lkey_};
      wrs[count] = ibv_recv_wr{};
      wrs[count].wr_id = head_ + count;
      wrs[count].sg_list = &sges[count];
      wrs[count].num_sge = 1;
      if (count > 0) wrs[count - 1].next = &wrs[count];
      ++count;
    }
    if (count == 0) return;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_wq_recv(wq_, wrs, &bad) != 0) {
      // Entries from `bad` on were not posted: their buffers go back.
      const uint32_t posted = bad == nullptr ? 0 : static_cast<uint32_t>(bad - wrs);
      for (uint32_t i = posted; i < count; ++i) {
        const FrameRef frame = posted_[(head_ + i) & mask];
        pool_->Completed();
        pool_->FreeBurst({&frame, 1});
      }
      head_ += posted;
      return;
    }
    head_ += count;
  }
}

size_t PlainRxPath::Receive(std::span<FrameRef> frames) {
  if (cq_ == nullptr) return 0;
  const uint32_t mask = static_cast<uint32_t>(posted_.size()) - 1;
  size_t n = 0;
  ibv_wc completions[kPollBatch];
  while (n < frames.size()) {
    const int want = static_cast<int>(std::min<size_t>(frames.size() - n, kPollBatch));
    const int got = ibv_poll_cq(cq_, want, completions);
    if (got <= 0) break;
    for (int i = 0; i < got; ++i) {
      const ibv_wc& wc = completions[i];
      FrameRef frame = posted_[wc.wr_id & mask];
      ++tail_;
      pool_->Completed();
      if (wc.status != IBV_WC_SUCCESS) {
        ++stats_->rx_dropped;
        pool_->FreeBurst({&frame, 1});
        continue;
      }
      frame.length = wc.byte_len;
      if (wc.byte_len <= pool_->frame_capacity() &&
          AcceptFrame(frame.data, wc.byte_len, steering_)) {
        frames[n++] = frame;
        ++stats_->rx_frames;
      } else {
        ++stats_->rx_bad_frames;
        pool_->FreeBurst({&frame, 1});
      }
    }
    if (got < want) break;
  }
  Repost();
  return n;
}

void PlainRxPath::Stop() {
  wq_ = nullptr;
  cq_ = nullptr;
  const uint32_t mask = static_cast<uint32_t>(posted_.size()) - 1;
  for (; tail_ != head_; ++tail_) {
    const FrameRef frame = posted_[tail_ & mask];
    pool_->Completed();
    pool_->FreeBurst({&frame, 1});
  }
}

}  // namespace atp::transport::mlx5
