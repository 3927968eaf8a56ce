// atp/transport/frame_pool.h: frames and the pools they live in.
//
// Every frame a transport queue hands out or takes in is a FrameRef: a view of
// a fixed-size buffer that belongs to a FramePool. Pools are created at setup
// (each transport queue owns an RX pool and a TX pool; see atp/transport.h) and
// never grow, so the datapath never allocates, and a pool's free_count() tells
// a test whether every buffer came back.
//
//   FrameRef frames[32];
//   size_t n = queue.tx_pool().AllocBurst(frames);
//   for (size_t i = 0; i < n; ++i) { Encode(frames[i].data); frames[i].length = kFrameBytes; }
//   size_t sent = queue.TxBurst({frames, n});      // the queue owns frames[0, sent)
//   ReleaseFrames({frames + sent, n - sent});       // or retry them later
//
// Thread safety: a pool is used by one thread at a time: the thread that runs
// the queue owning it. A frame received on one queue may be passed to another
// queue's TxBurst only on that same thread (a switch core forwarding between
// its ports); the sending queue returns it to its pool when it is done.
#ifndef ATP_TRANSPORT_FRAME_POOL_H_
#define ATP_TRANSPORT_FRAME_POOL_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/wire.h"

namespace atp::transport {

class FramePool;

// kDefaultHeadroom: bytes a HeapFramePool leaves in front of each frame. With
// 70, a frame's payload (at offset 58) starts on a 64-byte boundary, so the
// quantizer writes and the aggregator reads whole cache lines.
inline constexpr uint32_t kDefaultHeadroom = 70;
inline constexpr size_t kCacheLineBytes = 64;
static_assert((kDefaultHeadroom + wire::kPayloadOffset) % kCacheLineBytes == 0);

// FrameRef: one frame in a pool buffer. Plain data, 32 bytes, copied freely;
// whoever holds it at a given moment owns the buffer (see FramePool).
struct FrameRef {
  uint8_t* data = nullptr;    // first byte of the frame (the Ethernet header)
  FramePool* pool = nullptr;  // where the buffer goes back to
  uint64_t handle = 0;        // private to the pool: a buffer index, an rte_mbuf*, ...
  uint32_t length = 0;        // bytes of frame at `data`; kFrameBytes for an ATP frame

  std::span<uint8_t> bytes() const { return {data, length}; }
};
static_assert(sizeof(FrameRef) == 32, "a burst of 32 refs is 16 cache lines");

// FramePool: fixed-size frame buffers. Backends whose buffers come from
// elsewhere (DPDK mbufs, registered RDMA memory) implement it over their own
// memory; HeapFramePool below is the plain one.
class FramePool {
 public:
  virtual ~FramePool() = default;

  // AllocBurst: fills up to frames.size() refs with free buffers and returns how
  // many it filled (fewer when the pool runs low). Each has length 0 and `data`
  // `headroom()` bytes into its buffer, with `frame_capacity()` bytes writable.
  virtual size_t AllocBurst(std::span<FrameRef> frames) = 0;

  // FreeBurst: returns buffers. Each frame must come from this pool and be held
  // by the caller; it must not be used afterwards.
  virtual void FreeBurst(std::span<const FrameRef> frames) = 0;

  // free_count: buffers not held by anyone. Equal to capacity() once every
  // frame has come back: the no-leak check.
  virtual size_t free_count() const = 0;
  virtual size_t capacity() const = 0;
  // frame_capacity: bytes writable from FrameRef::data (at least kFrameBytes).
  virtual size_t frame_capacity() const = 0;
  // headroom: bytes in front of FrameRef::data a backend may prepend into.
  virtual size_t headroom() const = 0;
};

// ReleaseFrames: returns each frame to its own pool (frames of several pools
// may be mixed; consecutive frames of one pool go back in one FreeBurst).
void ReleaseFrames(std::span<const FrameRef> frames);

// FramePoolOptions: the shape of a HeapFramePool.
struct FramePoolOptions {
  uint32_t frames = 2048;                                // buffers in the pool
  uint32_t headroom = kDefaultHeadroom;                  // bytes before FrameRef::data
  uint32_t frame_capacity = uint32_t{wire::kFrameBytes};  // bytes usable from data

  // Validate: frames in [1, 2^24], frame_capacity >= kFrameBytes, headroom
  // <= 4096, and the whole pool under 4 GiB.
  absl::Status Validate() const;
};

// HeapFramePool: one cache-line-aligned allocation cut into buffers of
// stride() bytes (headroom + frame_capacity, rounded up to 64), and a stack of
// free buffer indices. Alloc and Free are O(1) and never allocate.
class HeapFramePool final : public FramePool {
 public:
  static absl::StatusOr<std::unique_ptr<HeapFramePool>> Create(const FramePoolOptions& options);

  HeapFramePool(const HeapFramePool&) = delete;
  HeapFramePool& operator=(const HeapFramePool&) = delete;
  ~HeapFramePool() override;

  size_t AllocBurst(std::span<FrameRef> frames) override;
  void FreeBurst(std::span<const FrameRef> frames) override;
  size_t free_count() const override { return free_top_; }
  size_t capacity() const override { return buffers_; }
  size_t frame_capacity() const override { return frame_capacity_; }
  size_t headroom() const override { return headroom_; }

  // Alloc / Free: one buffer, without a virtual call, for the backends that
  // own a HeapFramePool. Alloc returns false when the pool is empty.
  bool Alloc(FrameRef* frame) {
    if (free_top_ == 0) return false;
    const uint32_t index = free_[--free_top_];
    *frame = FrameRef{memory_ + size_t{index} * stride_ + headroom_, this, index, 0};
    return true;
  }
  void Free(const FrameRef& frame) {
    assert(frame.pool == this && frame.handle < buffers_);
    assert(free_top_ < buffers_ && "more frees than buffers: a frame was freed twice");
    free_[free_top_++] = static_cast<uint32_t>(frame.handle);
  }

  // region: the whole buffer memory, for a backend that registers it with a
  // device (ibv_reg_mr); stride: bytes from one buffer to the next.
  std::span<uint8_t> region() const { return {memory_, size_t{buffers_} * stride_}; }
  size_t stride() const { return stride_; }

 private:
  HeapFramePool(const FramePoolOptions& options, size_t stride, uint8_t* memory);

  uint8_t* memory_;  // owned; operator new with 64-byte alignment
  size_t stride_;
  uint32_t buffers_;
  uint32_t headroom_;
  uint32_t frame_capacity_;
  uint32_t free_top_ = 0;
  std::vector<uint32_t> free_;  // indices of free buffers, [0, free_top_)
};

}  // namespace atp::transport

#endif  // ATP_TRANSPORT_FRAME_POOL_H_
