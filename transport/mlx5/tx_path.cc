// transport/mlx5/tx_path.cc: building, posting and completing send requests.
#include "transport/mlx5/tx_path.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "transport/common/frame_layout.h"

namespace atp::transport::mlx5 {
namespace {

constexpr int kPollBatch = 32;

}  // namespace

TxPath::TxPath(const TxPathConfig& config, const TxPathMemory& memory, ibv_qp_ex* qpx, ibv_cq* cq,
               QueueStats* stats)
    : config_(config),
      memory_(memory),
      qpx_(qpx),
      cq_(cq),
      stats_(stats),
      tracker_(std::bit_ceil(std::max(config.depth, 1u))),
      cadence_(std::max(config.signal_every, 1u)),
      pending_capacity_(std::clamp(config.max_burst, 1u, std::max(config.depth, 1u))) {
  pending_.reserve(pending_capacity_);
  if (config.tso_segments_per_request > 0) {
    staging_.emplace(memory.staging, memory.staging_slot_bytes, memory.staging_slots);
  }
}

uint32_t TxPath::room() const {
  const uint32_t used = tracker_.size() + static_cast<uint32_t>(pending_.size());
  return used >= config_.depth ? 0 : config_.depth - used;
}

uint32_t TxPath::PrepareRoom(uint32_t wanted) {
  if (room() < wanted) ReapCompletions();
  return room();
}

void TxPath::ReleaseRecord(const TxRecord& record) {
  if (record.frame.pool != nullptr) ReleaseFrames({&record.frame, 1});
  if (record.slot != kNoSlot) staging_->Release(record.slot);
}

void TxPath::Drop(const TxRequest& request) {
  stats_->tx_errors += request.record.frames;
  ReleaseRecord(request.record);
  if (request.release_at_post.pool != nullptr) ReleaseFrames({&request.release_at_post, 1});
}

void TxPath::ReapCompletions() {
  if (cq_ == nullptr) return;
  ibv_wc completions[kPollBatch];
  for (;;) {
    const int n = ibv_poll_cq(cq_, kPollBatch, completions);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      const uint64_t frames = tracker_.CompleteThrough(
          completions[i].wr_id, [this](const TxRecord& record) { ReleaseRecord(record); });
      if (completions[i].status != IBV_WC_SUCCESS) {
        // An error completion moves the QP to the error state: the requests
        // up to it are lost, and so is everything after it.
        stats_->tx_errors += frames;
        failed_ = true;
      }
    }
    if (n < kPollBatch) return;
  }
}

void TxPath::Enqueue(const TxRequest& request) {
  if (pending_.size() == pending_capacity_) PostPending(BatchEnd::kNo);
  pending_.push_back(request);
}

void TxPath::PostPending(BatchEnd end) {
  if (pending_.empty()) return;
  if (failed_ || qpx_ == nullptr) {
    for (const TxRequest& request : pending_) Drop(request);
    pending_.clear();
    return;
  }
  ibv_wr_start(qpx_);
  uint64_t wr_id = tracker_.next_id();
  for (size_t i = 0; i < pending_.size(); ++i) {
    const TxRequest& request = pending_[i];
    const BatchEnd position = i + 1 == pending_.size() ? end : BatchEnd::kNo;
    const unsigned int signalled = cadence_.Next(position) ? IBV_SEND_SIGNALED : 0;
    qpx_->wr_id = wr_id++;
    switch (request.opcode) {
      case TxOpcode::kSend:
        qpx_->wr_flags = signalled;
        ibv_wr_send(qpx_);
        ibv_wr_set_sge(qpx_, request.sge.lkey, request.sge.addr, request.sge.length);
        break;
      case TxOpcode::kSendInline:
        qpx_->wr_flags = signalled;
        ibv_wr_send(qpx_);
        ibv_wr_set_inline_data(qpx_,
                               reinterpret_cast<void*>(static_cast<uintptr_t>(request.sge.addr)),
                               request.sge.length);
        break;
      case TxOpcode::kTso:
        // The NIC rewrites each segment's IPv4 header (identification) and so
        // must compute its checksum.
        qpx_->wr_flags = signalled | IBV_SEND_IP_CSUM;
        ibv_wr_send_tso(qpx_, const_cast<uint8_t*>(request.tso_header), request.tso_header_bytes,
                        request.mss);
        ibv_wr_set_sge(qpx_, request.sge.lkey, request.sge.addr, request.sge.length);
        break;
    }
  }
  if (ibv_wr_complete(qpx_) != 0) {
    // The provider posted none of the batch.
    for (const TxRequest& request : pending_) Drop(request);
    pending_.clear();
    return;
  }
  for (const TxRequest& request : pending_) {
    tracker_.Push(request.record);
    if (request.release_at_post.pool != nullptr) ReleaseFrames({&request.release_at_post, 1});
  }
  pending_.clear();
}

bool TxPath::FrameRequest(const FrameRef& frame, TxRequest* request) {
  if (frame.pool == memory_.tx_pool) {
    *request = BuildFrameRequest(frame, memory_.tx_lkey, config_.max_inline_frame);
    return true;
  }
  if (lkeys_ != nullptr) {
    if (std::optional<uint32_t> lkey = lkeys_->Find(frame.data, frame.length)) {
      *request = BuildFrameRequest(frame, *lkey, config_.max_inline_frame);
      return true;
    }
  }
  if (frame.length <= config_.max_inline_frame) {
    *request = BuildFrameRequest(frame, 0, config_.max_inline_frame);
    return true;
  }
  // Memory the NIC cannot read: copy into a buffer of ours.
  FrameRef copy;
  if (!memory_.tx_pool->Alloc(&copy)) return false;
  std::memcpy(copy.data, frame.data, frame.length);
  copy.length = frame.length;
  ReleaseFrames({&frame, 1});
  *request = BuildFrameRequest(copy, memory_.tx_lkey, config_.max_inline_frame);
  return true;
}

size_t TxPath::TxBurst(std::span<const FrameRef> frames) {
  uint32_t free_entries = PrepareRoom(static_cast<uint32_t>(frames.size()));
  size_t taken = 0;
  for (; taken < frames.size(); ++taken) {
    const FrameRef& frame = frames[taken];
    internal::RoutableFrame routable;
    if (!internal::ClassifyFrame(frame.bytes(), config_.base_port, &routable)) {
      ++stats_->tx_bad_frames;
      ReleaseFrames({&frame, 1});
      continue;
    }
    if (free_entries == 0) break;
    TxRequest request;
    if (!FrameRequest(frame, &request)) break;
    Enqueue(request);
    --free_entries;
    ++stats_->tx_frames;
  }
  if (taken < frames.size()) ++stats_->tx_backpressure;
  return taken;
}

size_t TxPath::TxSegmented(const SegmentationJob& job) {
  if (job.empty()) return 0;
  if (!IsValidSegmentationJob(job, config_.base_port)) {
    stats_->tx_bad_frames += job.size();
    return job.size();
  }
  const size_t taken = staging_.has_value() ? SegmentedTso(job) : SegmentedSoftware(job);
  stats_->tx_frames += taken;
  if (taken > 0) ++stats_->tx_segmentation_jobs;
  if (taken < job.size()) ++stats_->tx_backpressure;
  return taken;
}

size_t TxPath::SegmentedTso(const SegmentationJob& job) {
  const size_t per_request = config_.tso_segments_per_request;
  uint32_t free_entries =
      PrepareRoom(static_cast<uint32_t>((job.size() + per_request - 1) / per_request));
  size_t taken = 0;
  while (taken < job.size() && free_entries > 0) {
    std::optional<uint32_t> slot = staging_->Acquire();
    if (!slot.has_value()) {
      ReapCompletions();
      slot = staging_->Acquire();
      if (!slot.has_value()) break;
    }
    const size_t count = std::min(job.size() - taken, per_request);
    Enqueue(BuildTsoRequest(job, taken, count, staging_->slot(*slot), *slot, memory_.staging_lkey));
    if (count > 1) stats_->tx_offloaded_segments += count;
    taken += count;
    --free_entries;
  }
  return taken;
}

size_t TxPath::SegmentedSoftware(const SegmentationJob& job) {
  uint32_t free_entries = PrepareRoom(static_cast<uint32_t>(job.size()));
  size_t taken = 0;
  for (; taken < job.size() && free_entries > 0; ++taken, --free_entries) {
    FrameRef frame;
    if (!memory_.tx_pool->Alloc(&frame)) break;
    WriteSegmentFrame(job, taken, std::span<uint8_t, wire::kFrameBytes>(frame.data, kFrameBytes));
    frame.length = kFrameBytes;
    Enqueue(BuildFrameRequest(frame, memory_.tx_lkey, config_.max_inline_frame));
  }
  return taken;
}

size_t TxPath::Flush() {
  PostPending(BatchEnd::kYes);
  ReapCompletions();
  if (failed_) {
    // No completion will come for what is left: give it back as lost.
    stats_->tx_errors +=
        tracker_.CompleteAll([this](const TxRecord& record) { ReleaseRecord(record); });
  }
  return static_cast<size_t>(tracker_.frames_outstanding());
}

void TxPath::Stop() {
  qpx_ = nullptr;
  for (const TxRequest& request : pending_) {
    ReleaseRecord(request.record);
    if (request.release_at_post.pool != nullptr) ReleaseFrames({&request.release_at_post, 1});
  }
  pending_.clear();
  tracker_.CompleteAll([this](const TxRecord& record) { ReleaseRecord(record); });
}

}  // namespace atp::transport::mlx5
