// transport/common/frame_pool.cc: HeapFramePool and ReleaseFrames.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <numeric>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "atp/transport/frame_pool.h"

namespace atp::transport {
namespace {

constexpr uint32_t kMaxPoolFrames = 1u << 24;
constexpr uint32_t kMaxHeadroom = 4096;
constexpr uint64_t kMaxPoolBytes = uint64_t{1} << 32;

size_t StrideOf(const FramePoolOptions& options) {
  const size_t raw = size_t{options.headroom} + options.frame_capacity;
  return (raw + kCacheLineBytes - 1) / kCacheLineBytes * kCacheLineBytes;
}

}  // namespace

absl::Status FramePoolOptions::Validate() const {
  if (frames == 0 || frames > kMaxPoolFrames) {
    return absl::InvalidArgumentError(
        absl::StrCat("FramePoolOptions.frames = ", frames, ": must be in [1, ", kMaxPoolFrames, "]"));
  }
  if (frame_capacity < wire::kFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("FramePoolOptions.frame_capacity = ",
                                                   frame_capacity, ": must be at least ",
                                                   wire::kFrameBytes, " (one ATP frame)"));
  }
  if (headroom > kMaxHeadroom) {
    return absl::InvalidArgumentError(absl::StrCat("FramePoolOptions.headroom = ", headroom,
                                                   ": must be at most ", kMaxHeadroom));
  }
  if (uint64_t{frames} * StrideOf(*this) > kMaxPoolBytes) {
    return absl::InvalidArgumentError("FramePoolOptions: the pool would exceed 4 GiB");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HeapFramePool>> HeapFramePool::Create(
    const FramePoolOptions& options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  const size_t stride = StrideOf(options);
  auto* memory = static_cast<uint8_t*>(
      ::operator new(stride * options.frames, std::align_val_t{kCacheLineBytes}, std::nothrow));
  if (memory == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("HeapFramePool: cannot allocate ", stride * options.frames, " bytes"));
  }
  return std::unique_ptr<HeapFramePool>(new HeapFramePool(options, stride, memory));
}

HeapFramePool::HeapFramePool(const FramePoolOptions& options, size_t stride, uint8_t* memory)
    : memory_(memory),
      stride_(stride),
      buffers_(options.frames),
      headroom_(options.headroom),
      frame_capacity_(options.frame_capacity),
      free_top_(options.frames),
      free_(options.frames) {
  // Hand buffers out in address order first: the first frames of a run are
  // neighbours in memory.
  for (uint32_t i = 0; i < buffers_; ++i) free_[i] = buffers_ - 1 - i;
}

HeapFramePool::~HeapFramePool() {
  ::operator delete(memory_, std::align_val_t{kCacheLineBytes});
}

size_t HeapFramePool::AllocBurst(std::span<FrameRef> frames) {
  size_t n = 0;
  while (n < frames.size() && Alloc(&frames[n])) ++n;
  return n;
}

void HeapFramePool::FreeBurst(std::span<const FrameRef> frames) {
  for (const FrameRef& frame : frames) Free(frame);
}

void ReleaseFrames(std::span<const FrameRef> frames) {
  size_t begin = 0;
  while (begin < frames.size()) {
    FramePool* pool = frames[begin].pool;
    size_t end = begin + 1;
    while (end < frames.size() && frames[end].pool == pool) ++end;
    pool->FreeBurst(frames.subspan(begin, end - begin));
    begin = end;
  }
}

}  // namespace atp::transport
