// transport/mlx5/tx_tracker.h: the bookkeeping of posted send work requests.
// Pure (no device). Private to transport/mlx5.
//
// The NIC completes a send queue's requests in order and reports only the
// signalled ones (SignalCadence); a completion for request id w proves every
// request up to w done. TxCompletionRing keeps one record per posted request
// (what to give back when it is done) and releases them in order;
// StagingSlots hands out the fixed-size buffers TSO requests are built in,
// which come back in the same order.
//
//   uint64_t id = ring.Push(TxRecord{frame, 1, kNoSlot});   // = the request's wr_id
//   ... ibv_poll_cq -> wc.wr_id ...
//   ring.CompleteThrough(wc.wr_id, [&](const TxRecord& r) { give back r.frame / r.slot; });
#ifndef ATP_TRANSPORT_MLX5_TX_TRACKER_H_
#define ATP_TRANSPORT_MLX5_TX_TRACKER_H_

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "atp/transport/frame_pool.h"

namespace atp::transport::mlx5 {

inline constexpr uint32_t kNoSlot = UINT32_MAX;

// TxRecord: what one posted request holds until it completes.
struct TxRecord {
  FrameRef frame;           // returned to frame.pool when done; pool null: none
  uint32_t frames = 0;      // ATP frames the request carries (k for a TSO request)
  uint32_t slot = kNoSlot;  // TSO staging slot released when done, or kNoSlot
};

// TxCompletionRing: records of posted requests, ids 0, 1, 2, ... in post order.
class TxCompletionRing {
 public:
  // capacity: a power of two >= the send queue depth.
  explicit TxCompletionRing(uint32_t capacity) : records_(capacity), mask_(capacity - 1) {
    assert(std::has_single_bit(capacity));
  }

  uint32_t size() const { return static_cast<uint32_t>(next_id_ - oldest_id_); }
  uint32_t capacity() const { return mask_ + 1; }
  // next_id: the id (wr_id) the next Push gets.
  uint64_t next_id() const { return next_id_; }
  // frames_outstanding: ATP frames carried by requests not yet completed.
  uint64_t frames_outstanding() const { return frames_outstanding_; }

  // Push: records a posted request; the ring must not be full.
  uint64_t Push(const TxRecord& record) {
    assert(size() < capacity());
    records_[next_id_ & mask_] = record;
    frames_outstanding_ += record.frames;
    return next_id_++;
  }

  // CompleteThrough: every request with id <= `wr_id` is done: calls
  // release(record) for each, oldest first, and returns how many frames they
  // carried. An id already completed, or never posted, completes nothing
  // beyond what was posted.
  template <typename Release>
  uint64_t CompleteThrough(uint64_t wr_id, Release&& release) {
    if (wr_id < oldest_id_) return 0;
    const uint64_t end = wr_id >= next_id_ ? next_id_ : wr_id + 1;
    return CompleteUntil(end, release);
  }

  // CompleteAll: every posted request (the queue is being torn down or went
  // into an error state).
  template <typename Release>
  uint64_t CompleteAll(Release&& release) {
    return CompleteUntil(next_id_, release);
  }

 private:
  template <typename Release>
  uint64_t CompleteUntil(uint64_t end, Release& release) {
    uint64_t frames = 0;
    for (; oldest_id_ < end; ++oldest_id_) {
      const TxRecord& record = records_[oldest_id_ & mask_];
      frames += record.frames;
      release(record);
    }
    frames_outstanding_ -= frames;
    return frames;
  }

  std::vector<TxRecord> records_;
  uint64_t mask_;
  uint64_t next_id_ = 0;
  uint64_t oldest_id_ = 0;
  uint64_t frames_outstanding_ = 0;
};

// StagingSlots: `count` buffers of `slot_bytes` each in one memory region,
// acquired and released in ring order (requests complete in post order).
class StagingSlots {
 public:
  StagingSlots(std::span<uint8_t> memory, uint32_t slot_bytes, uint32_t count)
      : memory_(memory), slot_bytes_(slot_bytes), count_(count) {
    assert(size_t{slot_bytes} * count <= memory.size());
  }

  // Acquire: the next slot, or nothing when all are in flight.
  std::optional<uint32_t> Acquire() {
    if (acquired_ - released_ == count_) return std::nullopt;
    return static_cast<uint32_t>(acquired_++ % count_);
  }
  // Release: the oldest acquired slot (must be `slot`).
  void Release([[maybe_unused]] uint32_t slot) {
    assert(acquired_ != released_ && slot == released_ % count_);
    ++released_;
  }

  std::span<uint8_t> slot(uint32_t index) const {
    return memory_.subspan(size_t{index} * slot_bytes_, slot_bytes_);
  }
  uint32_t in_flight() const { return static_cast<uint32_t>(acquired_ - released_); }
  uint32_t count() const { return count_; }
  uint32_t slot_bytes() const { return slot_bytes_; }

 private:
  std::span<uint8_t> memory_;
  uint32_t slot_bytes_;
  uint32_t count_;
  uint64_t acquired_ = 0;
  uint64_t released_ = 0;
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_TX_TRACKER_H_
