#include "testbed/reflector_queue.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "atp/transport/segmentation.h"
#include "atp/wire.h"
#include "lib/wire/frame_view.h"

namespace atp::testbed {
namespace {

std::unique_ptr<transport::HeapFramePool> MakePool(uint32_t frames) {
  transport::FramePoolOptions options;
  options.frames = frames;
  return *transport::HeapFramePool::Create(options);
}

}  // namespace

ReflectorQueue::ReflectorQueue(uint32_t index, Mode mode, uint32_t capacity,
                               transport::TxSegmentation tx_segmentation)
    : index_(index),
      mode_(mode),
      capacity_(capacity),
      rx_pool_(MakePool(capacity + 256)),
      tx_pool_(MakePool(1024)) {
  capabilities_.steering = transport::Steering::kDirect;
  capabilities_.tx_segmentation = tx_segmentation;
  if (tx_segmentation != transport::TxSegmentation::kSoftware) {
    capabilities_.max_offload_segments = 64;
  }
  if (mode_ == Mode::kHold) held_.reserve(capacity);
}

ReflectorQueue::~ReflectorQueue() {
  for (const transport::FrameRef& frame : rx_) rx_pool_->Free(frame);
}

bool ReflectorQueue::Answer(const uint8_t* frame) {
  if (rx_.size() >= capacity_) return false;
  transport::FrameRef ref;
  if (!rx_pool_->Alloc(&ref)) return false;
  std::memcpy(ref.data, frame, wire::kFrameBytes);
  ref.length = wire::kFrameBytes;
  // The parameter packet of a one-worker job: the gradient itself, acked,
  // from the PS it was sent to (sources and destinations swapped, as the PS
  // would address it: the worker's source check admits it). Swapping the
  // IPv4 addresses keeps the header's checksum (a sum of its words).
  wire::FrameView(ref.data).set_flag(wire::FrameView::kAck, true);
  constexpr size_t kMacBytes = 6;
  constexpr size_t kIpv4Bytes = 4;
  constexpr size_t kIpv4Source = wire::kIpv4Offset + 12;
  std::swap_ranges(ref.data, ref.data + kMacBytes, ref.data + kMacBytes);
  std::swap_ranges(ref.data + kIpv4Source, ref.data + kIpv4Source + kIpv4Bytes,
                   ref.data + kIpv4Source + kIpv4Bytes);
  rx_.push_back(ref);
  return true;
}

bool ReflectorQueue::InjectRx(std::span<const uint8_t> frame) {
  if (frame.size() != wire::kFrameBytes || rx_.size() >= capacity_) return false;
  transport::FrameRef ref;
  if (!rx_pool_->Alloc(&ref)) return false;
  std::memcpy(ref.data, frame.data(), wire::kFrameBytes);
  ref.length = wire::kFrameBytes;
  rx_.push_back(ref);
  return true;
}

size_t ReflectorQueue::RxBurst(std::span<transport::FrameRef> frames) {
  size_t n = 0;
  while (n < frames.size() && !rx_.empty()) {
    frames[n++] = rx_.front();
    rx_.pop_front();
  }
  stats_.rx_frames += n;
  return n;
}

size_t ReflectorQueue::TxBurst(std::span<const transport::FrameRef> frames) {
  if (on_transmit_) on_transmit_();
  size_t taken = 0;
  for (; taken < frames.size(); ++taken) {
    const transport::FrameRef& frame = frames[taken];
    if (frame.length != wire::kFrameBytes) {
      ++stats_.tx_bad_frames;
    } else if (mode_ == Mode::kDiscard) {
      ++discarded_;
      if (taken + 1 == frames.size()) std::memcpy(last_discarded_.data(), frame.data, wire::kFrameBytes);
    } else if (mode_ == Mode::kHold) {
      if (!Hold(frame.data)) break;
    } else if (!Answer(frame.data)) {
      break;
    }
    frame.pool->FreeBurst({&frame, 1});
  }
  stats_.tx_frames += taken;
  if (taken < frames.size()) ++stats_.tx_backpressure;
  return taken;
}

size_t ReflectorQueue::TxSegmented(const transport::SegmentationJob& job) {
  if (on_transmit_) on_transmit_();
  std::array<uint8_t, wire::kFrameBytes> frame;
  size_t n = 0;
  if (mode_ == Mode::kDiscard && !job.empty()) {
    // Dropped unseen, like an offload that hands the job on whole: only the
    // last segment is built (last_discarded()).
    n = job.size();
    discarded_ += n;
    transport::WriteSegmentFrame(job, n - 1, last_discarded_);
  }
  for (; n < job.size(); ++n) {
    transport::WriteSegmentFrame(job, n, frame);
    if (mode_ == Mode::kHold) {
      if (!Hold(frame.data())) break;
    } else if (!Answer(frame.data())) {
      break;
    }
  }
  stats_.tx_frames += n;
  if (n > 0) ++stats_.tx_segmentation_jobs;
  if (capabilities_.tx_segmentation != transport::TxSegmentation::kSoftware) {
    stats_.tx_offloaded_segments += n;
  }
  if (n < job.size()) ++stats_.tx_backpressure;
  return n;
}

bool ReflectorQueue::Hold(const uint8_t* frame) {
  if (held_.size() == held_.capacity()) {
    if (held_head_ == 0) return false;  // full: back-pressure
    held_.erase(held_.begin(), held_.begin() + static_cast<ptrdiff_t>(held_head_));
    held_head_ = 0;
  }
  held_.emplace_back();
  std::memcpy(held_.back().data(), frame, wire::kFrameBytes);
  return true;
}

size_t ReflectorQueue::ReleaseHeld() {
  size_t n = 0;
  while (held_head_ < held_.size() && Answer(held_[held_head_].data())) {
    ++held_head_;
    ++n;
  }
  if (held_head_ == held_.size()) {
    held_.clear();
    held_head_ = 0;
  }
  return n;
}

}  // namespace atp::testbed
