#include "lib/ps/fp_buffer_pool.h"

#include <utility>

namespace atp::ps {

FpBufferPool::FpBufferPool(size_t floats_per_buffer, size_t idle_buffers)
    : floats_per_buffer_(floats_per_buffer), idle_buffers_(idle_buffers) {
  free_.reserve(idle_buffers_);
  for (size_t i = 0; i < idle_buffers_; ++i) {
    free_.push_back(std::make_unique_for_overwrite<float[]>(floats_per_buffer_));
  }
}

FpBufferPool::Buffer FpBufferPool::Acquire() {
  ++in_use_;
  if (free_.empty()) return std::make_unique_for_overwrite<float[]>(floats_per_buffer_);
  Buffer buffer = std::move(free_.back());
  free_.pop_back();
  return buffer;
}

void FpBufferPool::Release(Buffer buffer) {
  --in_use_;
  if (free_.size() < idle_buffers_) free_.push_back(std::move(buffer));
  // Otherwise `buffer` is freed here: the pool shrinks back to its idle size.
}

}  // namespace atp::ps
