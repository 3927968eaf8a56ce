// lib/ps/fp_buffer_pool.h: buffers for the PS's overflow (float32) path.
//
// A seq on the float path keeps every worker's 62 float32 values until all
// have arrived, so that it can sum them in worker order. That path is rare, so
// the pool keeps only `idle_buffers` allocated while idle; Acquire beyond them
// allocates, and Release frees what is beyond them again. in_use() is the
// memory the PS holds beyond its idle size (ATP-SPEC section 8, "no leak").
//
//   FpBufferPool::Buffer buffer = pool.Acquire();
//   ...
//   pool.Release(std::move(buffer));
//
// Not thread-safe: one pool per engine.
#ifndef ATP_LIB_PS_FP_BUFFER_POOL_H_
#define ATP_LIB_PS_FP_BUFFER_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

namespace atp::ps {

class FpBufferPool {
 public:
  using Buffer = std::unique_ptr<float[]>;

  // FpBufferPool: every buffer holds `floats_per_buffer` floats; `idle_buffers`
  // of them are allocated now and kept for reuse.
  FpBufferPool(size_t floats_per_buffer, size_t idle_buffers);

  // Acquire: a buffer with unspecified contents; never null.
  Buffer Acquire();
  // Release: gives back a buffer from Acquire.
  void Release(Buffer buffer);

  // in_use: buffers acquired and not yet released.
  size_t in_use() const { return in_use_; }
  size_t floats_per_buffer() const { return floats_per_buffer_; }

 private:
  size_t floats_per_buffer_;
  size_t idle_buffers_;
  size_t in_use_ = 0;
  std::vector<Buffer> free_;  // capacity idle_buffers_: Release never allocates
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_FP_BUFFER_POOL_H_
