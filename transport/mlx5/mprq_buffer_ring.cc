// transport/mlx5/mprq_buffer_ring.cc: striding receive buffers and the frames
// handed out of them.
#include "transport/mlx5/mprq_buffer_ring.h"

#include <cassert>

namespace atp::transport::mlx5 {

MprqBufferRing::MprqBufferRing(const MprqGeometry& geometry, uint8_t* memory)
    : geometry_(geometry),
      memory_(memory),
      chunks_(geometry.chunks),
      entry_chunk_(geometry.wq_depth, kNoChunk),
      free_(geometry.chunks) {
  assert(geometry.wq_depth != 0 && (geometry.wq_depth & (geometry.wq_depth - 1)) == 0);
  assert(geometry.wq_depth <= 65536 && "wqe_id is 16 bits");
  // Hand chunks out as 0, 1, 2, ... at first.
  for (uint32_t c = geometry.chunks; c > 0; --c) free_[free_top_++] = c - 1;
}

std::optional<uint32_t> MprqBufferRing::TakeFreeChunk() {
  if (free_top_ == 0) return std::nullopt;
  return free_[--free_top_];
}

void MprqBufferRing::MarkPosted(uint32_t wq_counter, uint32_t chunk) {
  Chunk& c = chunks_[chunk];
  assert(c.state == ChunkState::kFree && c.held_frames == 0);
  c.state = ChunkState::kPosted;
  c.consumed_strides = 0;
  entry_chunk_[wq_counter & (geometry_.wq_depth - 1)] = chunk;
}

MprqArrival MprqBufferRing::Arrive(const StridedCompletion& completion) {
  MprqArrival arrival;
  uint32_t& entry = entry_chunk_[completion.wqe_id & (geometry_.wq_depth - 1)];
  if (entry == kNoChunk) {
    arrival.malformed = true;  // no chunk is posted in that entry
    return arrival;
  }
  arrival.chunk = entry;
  Chunk& chunk = chunks_[arrival.chunk];
  assert(chunk.state == ChunkState::kPosted);
  chunk.consumed_strides += completion.strides;
  arrival.completes_wqe = chunk.consumed_strides >= geometry_.strides_per_wqe;
  // The entry is the NIC's no more: a stray completion for it is malformed.
  if (arrival.completes_wqe) entry = kNoChunk;
  const uint32_t end = uint32_t{completion.stride_index} + completion.strides;
  if (completion.strides == 0 || end > geometry_.strides_per_wqe ||
      completion.bytes > uint32_t{completion.strides} * geometry_.stride_bytes) {
    // Still counted above, so that the entry ends.
    arrival.malformed = true;
    return arrival;
  }
  if (!completion.filler) {
    arrival.data =
        chunk_data(arrival.chunk) + size_t{completion.stride_index} * geometry_.stride_bytes;
    arrival.bytes = completion.bytes;
  }
  return arrival;
}

FrameRef MprqBufferRing::Keep(const MprqArrival& arrival) {
  assert(arrival.data != nullptr);
  ++chunks_[arrival.chunk].held_frames;
  ++held_frames_;
  return FrameRef{const_cast<uint8_t*>(arrival.data), this, arrival.chunk, arrival.bytes};
}

void MprqBufferRing::Settle(const MprqArrival& arrival) {
  if (!arrival.completes_wqe) return;
  Chunk& chunk = chunks_[arrival.chunk];
  if (chunk.state != ChunkState::kPosted) return;
  chunk.state = ChunkState::kDone;
  if (chunk.held_frames == 0) Free(arrival.chunk);
}

size_t MprqBufferRing::AllocBurst(std::span<FrameRef>) { return 0; }

void MprqBufferRing::FreeBurst(std::span<const FrameRef> frames) {
  for (const FrameRef& frame : frames) {
    assert(frame.pool == this && frame.handle < chunks_.size());
    Chunk& chunk = chunks_[frame.handle];
    assert(chunk.held_frames > 0 && "a frame was freed twice");
    --chunk.held_frames;
    --held_frames_;
    if (chunk.held_frames == 0 && chunk.state == ChunkState::kDone) {
      Free(static_cast<uint32_t>(frame.handle));
    }
  }
}

void MprqBufferRing::Free(uint32_t chunk) {
  chunks_[chunk].state = ChunkState::kFree;
  free_[free_top_++] = chunk;
}

}  // namespace atp::transport::mlx5
