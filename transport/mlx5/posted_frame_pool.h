// transport/mlx5/posted_frame_pool.h: the receive pool of a plain (one buffer
// per entry) receive queue. Pure (no device). Private to transport/mlx5.
//
// Buffers posted to the receive queue are held by the queue, not by the
// caller, so they count as free: free_count() is capacity() again once the
// caller has released every frame it received, the same no-leak check as any
// pool.
//
//   PostedFramePool pool(std::move(heap));
//   FrameRef f;  if (pool.TakeForPosting(&f)) post(f);   // the queue's side
//   FrameRef got = pool.Completed(posted_ref);             // the NIC filled it
#ifndef ATP_TRANSPORT_MLX5_POSTED_FRAME_POOL_H_
#define ATP_TRANSPORT_MLX5_POSTED_FRAME_POOL_H_

#include <cassert>
#include <cstddef>
#include <memory>
#include <span>
#include <utility>

#include "atp/transport/frame_pool.h"

namespace atp::transport::mlx5 {

class PostedFramePool final : public FramePool {
 public:
  explicit PostedFramePool(std::unique_ptr<HeapFramePool> heap) : heap_(std::move(heap)) {}

  // TakeForPosting: a buffer for the receive queue; false when none is free.
  bool TakeForPosting(FrameRef* frame) {
    if (!heap_->Alloc(frame)) return false;
    frame->pool = this;
    ++posted_;
    return true;
  }
  // Completed: the NIC is done with a posted buffer; the queue now hands it
  // to the caller or frees it.
  void Completed() {
    assert(posted_ > 0);
    --posted_;
  }

  size_t AllocBurst(std::span<FrameRef> frames) override {
    const size_t n = heap_->AllocBurst(frames);
    for (size_t i = 0; i < n; ++i) frames[i].pool = this;
    return n;
  }
  void FreeBurst(std::span<const FrameRef> frames) override {
    for (const FrameRef& frame : frames) {
      assert(frame.pool == this);
      FrameRef own = frame;
      own.pool = heap_.get();
      heap_->Free(own);
    }
  }
  size_t free_count() const override { return heap_->free_count() + posted_; }
  size_t capacity() const override { return heap_->capacity(); }
  size_t frame_capacity() const override { return heap_->frame_capacity(); }
  size_t headroom() const override { return heap_->headroom(); }

  size_t posted() const { return posted_; }
  // region: the buffers' memory, to register.
  std::span<uint8_t> region() const { return heap_->region(); }

 private:
  std::unique_ptr<HeapFramePool> heap_;
  size_t posted_ = 0;
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_POSTED_FRAME_POOL_H_
