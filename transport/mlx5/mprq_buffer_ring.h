// transport/mlx5/mprq_buffer_ring.h: the buffers of a striding (multi-packet)
// receive queue, as the FramePool its received frames belong to. Pure (no
// device): the datapath feeds it decoded completions; tests feed it synthetic
// ones. Private to transport/mlx5.
//
// The memory is `chunks` buffers of one receive entry each (MprqGeometry). A
// chunk is free, posted (in a receive entry: the NIC is filling it), or done
// (every stride consumed, frames of it still held by the caller). Frames are
// zero-copy views of strides; a done chunk is free again once its last frame
// is released, and the queue posts free chunks into the entries the NIC has
// finished with. Chunks outnumber entries, so the caller may hold frames of
// several older chunks while the NIC fills new ones.
//
//   while (auto chunk = ring.TakeFreeChunk()) { WriteMprqWqe(...ring.chunk_data(*chunk)...);
//                                               ring.MarkPosted(wq_head++, *chunk); }
//   MprqArrival a = ring.Arrive(ParseStridedCqe(cqe));
//   if (a.data != nullptr && wanted) out[n++] = ring.Keep(a);
//   ring.Settle(a);                    // now, not before Keep
//   ...
//   ReleaseFrames(out);                // FreeBurst: the chunk may become free
//
// As a FramePool: AllocBurst hands out nothing (the NIC fills these buffers;
// send from a tx_pool), capacity() is the frames the memory holds and
// free_count() drops by one per frame the caller holds.
#ifndef ATP_TRANSPORT_MLX5_MPRQ_BUFFER_RING_H_
#define ATP_TRANSPORT_MLX5_MPRQ_BUFFER_RING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "atp/transport/frame_pool.h"
#include "transport/mlx5/cqe.h"
#include "transport/mlx5/geometry.h"

namespace atp::transport::mlx5 {

// MprqArrival: one striding completion applied to the ring.
struct MprqArrival {
  const uint8_t* data = nullptr;  // the packet's first byte; null for a filler or malformed
  uint32_t bytes = 0;             // packet bytes
  uint32_t chunk = 0;             // valid unless malformed
  bool completes_wqe = false;     // the entry's strides are all consumed
  bool malformed = false;         // names no posted entry, or strides beyond its end
};

class MprqBufferRing final : public FramePool {
 public:
  // memory: geometry.memory_bytes() bytes that outlive the ring.
  MprqBufferRing(const MprqGeometry& geometry, uint8_t* memory);
  MprqBufferRing(const MprqBufferRing&) = delete;
  MprqBufferRing& operator=(const MprqBufferRing&) = delete;

  // TakeFreeChunk: a chunk to post, or nothing when every chunk is posted or held.
  std::optional<uint32_t> TakeFreeChunk();
  // MarkPosted: `chunk` (from TakeFreeChunk) is in the receive entry whose
  // ring counter is `wq_counter` (the entry is wq_counter mod wq_depth).
  void MarkPosted(uint32_t wq_counter, uint32_t chunk);
  uint8_t* chunk_data(uint32_t chunk) const {
    return memory_ + size_t{chunk} * geometry_.wqe_bytes;
  }

  // Arrive: counts the completion's strides against its entry's chunk and
  // locates the packet.
  MprqArrival Arrive(const StridedCompletion& completion);
  // Keep: the caller holds the arrival's frame (length = arrival.bytes).
  FrameRef Keep(const MprqArrival& arrival);
  // Settle: after Keep (or instead): an entry the NIC finished with becomes
  // done, and free when none of its frames is held.
  void Settle(const MprqArrival& arrival);

  // FramePool.
  size_t AllocBurst(std::span<FrameRef> frames) override;
  void FreeBurst(std::span<const FrameRef> frames) override;
  size_t free_count() const override { return capacity() - held_frames_; }
  size_t capacity() const override { return size_t{geometry_.chunks} * geometry_.frames_per_wqe; }
  size_t frame_capacity() const override {
    return size_t{geometry_.strides_per_frame} * geometry_.stride_bytes;
  }
  size_t headroom() const override { return 0; }

  // free_chunks: chunks waiting to be posted. held_frames: frames the caller holds.
  uint32_t free_chunks() const { return free_top_; }
  uint32_t held_frames() const { return held_frames_; }
  const MprqGeometry& geometry() const { return geometry_; }

 private:
  enum class ChunkState : uint8_t { kFree, kPosted, kDone };
  struct Chunk {
    uint32_t consumed_strides = 0;
    uint32_t held_frames = 0;
    ChunkState state = ChunkState::kFree;
  };
  void Free(uint32_t chunk);

  static constexpr uint32_t kNoChunk = UINT32_MAX;

  const MprqGeometry geometry_;
  uint8_t* const memory_;
  std::vector<Chunk> chunks_;
  std::vector<uint32_t> entry_chunk_;  // chunk of each posted receive entry, or kNoChunk
  std::vector<uint32_t> free_;         // free chunks, [0, free_top_)
  uint32_t free_top_ = 0;
  uint32_t held_frames_ = 0;
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_MPRQ_BUFFER_RING_H_
