#include "lib/host/ps_io_loop.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "atp/transport/frame_pool.h"
#include "atp/transport/segmentation.h"
#include "lib/wire/byte_order.h"

namespace atp::host {
namespace {

constexpr TimeDelta kPublishInterval = TimeDelta::FromMilliseconds(1);
// kOrphanScanInterval: the orphan scan runs at most this often.
constexpr TimeDelta kOrphanScanInterval = TimeDelta::FromMilliseconds(1);

using FrameHead = std::array<uint8_t, wire::kPayloadOffset>;
static_assert(transport::kSegmentTemplateBytes == wire::kPayloadOffset);
constexpr size_t kSeqBytes = 3;
static_assert(transport::kSeqOffset + kSeqBytes < transport::kAggregatorOffset);

uint32_t SeqOf(const FrameHead& head) {
  return (uint32_t{head[transport::kSeqOffset]} << 16) |
         (uint32_t{head[transport::kSeqOffset + 1]} << 8) | head[transport::kSeqOffset + 2];
}

// ContinuesRun: the frame with head `next` can be segment i of a job whose
// template is `first`: every byte the same (addresses, ports, flags, bitmaps)
// but the seq, which is first's position + i, and the aggregator index
// (carried per segment).
bool ContinuesRun(const FrameHead& first, const FrameHead& next, size_t i) {
  using transport::kAggregatorOffset;
  using transport::kSeqOffset;
  return SeqOf(next) == transport::SegmentSeq(SeqOf(first), i) &&
         std::memcmp(first.data(), next.data(), kSeqOffset) == 0 &&
         std::memcmp(first.data() + kSeqOffset + kSeqBytes, next.data() + kSeqOffset + kSeqBytes,
                     kAggregatorOffset - kSeqOffset - kSeqBytes) == 0;
}

}  // namespace

PsIoLoop::PsIoLoop(std::unique_ptr<PsShard> shard, std::vector<transport::Queue*> queues,
                   uint16_t base_port, uint32_t max_burst)
    : shard_(std::move(shard)),
      queues_(std::move(queues)),
      held_(queues_.size(), 0),
      base_port_(base_port),
      burst_(max_burst),
      rx_(max_burst) {
  stage_.reserve(burst_);
  for (const transport::Queue* q : queues_) offloads_.push_back(q->capabilities().OffloadsSegmentation());
  if (std::find(offloads_.begin(), offloads_.end(), true) != offloads_.end()) {
    segment_headers_.resize(burst_);
    segment_messages_.resize(burst_ * wire::kMessageBytes);
    segment_aggregators_.resize(burst_);
  }
}

PsIoLoop::~PsIoLoop() {
  ReleaseLent();
  transport::ReleaseFrames(stage_);
}

std::vector<int> PsIoLoop::wait_fds() const {
  std::vector<int> fds;
  for (const transport::Queue* q : queues_) fds.push_back(q->wait_fd());
  return fds;
}

StepResult PsIoLoop::Step(TimePoint now) {
  now_ = now;
  StepResult result;
  for (size_t i = 0; i < queues_.size(); ++i) {
    current_ = queues_[i];
    current_offloads_ = offloads_[i];
    handed_to_queue_ = false;
    for (int b = 0; b < kRxBurstsPerQueue; ++b) {
      const size_t n = current_->RxBurst(rx_);
      for (size_t k = 0; k < n; ++k) {
        const wire::DecodeError error =
            wire::DecodeFrame(rx_[k].bytes(), base_port_, &rx_fields_, &rx_message_.payload);
        if (error != wire::DecodeError::kOk) {
          ++decode_errors_;
          continue;
        }
        if (!shard_->Admits(rx_fields_)) [[unlikely]] continue;
        rx_message_.header = rx_fields_.header;
        shard_->CarryCongestion(rx_fields_, rx_message_);
        shard_->OnMessage(rx_message_, now, *this);
      }
      transport::ReleaseFrames(std::span(rx_).first(n));
      frames_received_ += n;
      if (n > 0) result.did_work = true;
      FlushSegments();
      FlushStage();
      ReleaseLent();
      if (n < rx_.size()) break;
    }
    if (handed_to_queue_ || held_[i] > 0) held_[i] = current_->Flush();
    if (held_[i] > 0) result.deadline = now + TimeDelta::FromMicroseconds(50);
  }
  current_ = nullptr;
  // Free what dead or aborted jobs left behind (nearly free when nothing is
  // partially aggregated). Not "work": the thread may go on backing off.
  bool released = false;
  const TimeDelta since_scan = now - last_orphan_scan_;
  if (since_scan >= kOrphanScanInterval) {
    released = shard_->ScanOrphans(now, shard_->engine().OrphanScanBudget(since_scan)) > 0;
    last_orphan_scan_ = now;
    shard_->LogAbandoned();  // orphans released by this scan or by messages
  }
  // Name the workers that long-incomplete fragments wait for (rate-limited
  // inside), on the first queue: the frame's seq picks its UDP port.
  if (shard_->engine().live_slots() > 0 && !queues_.empty()) {
    current_ = queues_[0];
    current_offloads_ = offloads_[0];
    if (shard_->ReportWaiting(now, *this) > 0) {
      FlushSegments();
      FlushStage();
      ReleaseLent();
      held_[0] = current_->Flush();
    }
    current_ = nullptr;
  }
  if (shard_->WantsOrphanScans()) {
    result.deadline = Earliest(result.deadline, last_orphan_scan_ + kOrphanScanInterval);
  }
  // Publish again after every step that did work (the receive and drop counts
  // of its last burst; FlushStage published before each burst left) or
  // released orphans, and now and then when idle.
  if (result.did_work || released || now >= next_publish_) {
    Publish();
    next_publish_ = now + kPublishInterval;
  }
  return result;
}

void PsIoLoop::SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) {
  if (current_offloads_) return StageSegment(frame);
  if (frame.data() == lent_.data && lent_.data != nullptr) {
    // Written in place (FrameBuffer made room in the stage for it).
    lent_.length = wire::kFrameBytes;
    stage_.push_back(lent_);
    lent_ = {};
    return;
  }
  StageFrame(frame.data());
}

uint8_t* PsIoLoop::FrameBuffer() {
  if (current_ == nullptr || current_offloads_) return nullptr;
  if (lent_.data == nullptr) {
    if (stage_.size() == burst_) FlushStage();
    if (!AllocFrame(&lent_)) {
      lent_ = {};
      return nullptr;
    }
  }
  return lent_.data;
}

bool PsIoLoop::AllocFrame(transport::FrameRef* frame) {
  if (current_->tx_pool().AllocBurst({frame, 1}) == 1) return true;
  FlushStage();
  current_->Flush();  // delivered frames return their buffers
  return current_->tx_pool().AllocBurst({frame, 1}) == 1;
}

void PsIoLoop::ReleaseLent() {
  if (lent_.data == nullptr) return;
  transport::ReleaseFrames({&lent_, 1});
  lent_ = {};
}

void PsIoLoop::StageFrame(const uint8_t* frame) {
  if (stage_.size() == burst_) FlushStage();
  transport::FrameRef ref;
  if (!AllocFrame(&ref)) {
    ++tx_dropped_;
    return;
  }
  std::memcpy(ref.data, frame, wire::kFrameBytes);
  ref.length = wire::kFrameBytes;
  stage_.push_back(ref);
}

void PsIoLoop::StageSegment(std::span<const uint8_t, wire::kFrameBytes> frame) {
  if (segments_ == burst_) FlushSegments();
  std::memcpy(segment_headers_[segments_].data(), frame.data(), wire::kPayloadOffset);
  std::memcpy(&segment_messages_[segments_ * wire::kMessageBytes], frame.data() + wire::kAtpOffset,
              wire::kMessageBytes);
  segment_aggregators_[segments_] = wire::internal::LoadBig16(frame.data() + transport::kAggregatorOffset);
  ++segments_;
}

void PsIoLoop::FlushSegments() {
  size_t first = 0;
  while (first < segments_) {
    size_t k = 1;
    while (first + k < segments_ &&
           ContinuesRun(segment_headers_[first], segment_headers_[first + k], k)) {
      ++k;
    }
    SendRun(first, k);
    first += k;
  }
  segments_ = 0;
}

void PsIoLoop::SendRun(size_t first, size_t count) {
  if (count == 1) {  // alone: with the other single frames, one burst
    std::array<uint8_t, wire::kFrameBytes> frame;
    std::memcpy(frame.data(), segment_headers_[first].data(), wire::kAtpOffset);
    std::memcpy(frame.data() + wire::kAtpOffset, &segment_messages_[first * wire::kMessageBytes],
                wire::kMessageBytes);
    return StageFrame(frame.data());
  }
  FlushStage();  // what was staged before this run leaves before it
  Publish();     // before the run leaves (see FlushStage)
  transport::SegmentationJob job;
  job.header = segment_headers_[first];
  job.messages = std::span(segment_messages_).subspan(first * wire::kMessageBytes,
                                                      count * wire::kMessageBytes);
  job.aggregators = std::span(segment_aggregators_).subspan(first, count);
  size_t taken = current_->TxSegmented(job);
  handed_to_queue_ = true;
  if (taken < count) {
    current_->Flush();
    job.Advance(taken);
    taken += current_->TxSegmented(job);
  }
  tx_dropped_ += count - taken;
}

void PsIoLoop::FlushStage() {
  if (stage_.empty()) return;
  // The statistics count these frames' completions before the frames leave:
  // a worker that holds a result then finds it in statistics(), whichever
  // thread reads them and however soon.
  Publish();
  size_t taken = current_->TxBurst(stage_);
  handed_to_queue_ = true;
  if (taken < stage_.size()) {
    current_->Flush();
    taken += current_->TxBurst(std::span(stage_).subspan(taken));
  }
  if (taken < stage_.size()) {
    const auto rest = std::span(stage_).subspan(taken);
    tx_dropped_ += rest.size();
    transport::ReleaseFrames(rest);
  }
  stage_.clear();
}

void PsIoLoop::Publish() {
  ParameterServerStats s;
  s.frames_received = frames_received_;
  s.decode_errors = decode_errors_;
  s.tx_dropped = tx_dropped_;
  shard_->AddTo(s);
  s.frames_sent -= tx_dropped_;  // AddTo counts frames encoded
  std::lock_guard<std::mutex> lock(published_mu_);
  published_ = s;
}

ParameterServerStats PsIoLoop::statistics() const {
  std::lock_guard<std::mutex> lock(published_mu_);
  return published_;
}

}  // namespace atp::host
