// transport/mlx5/rx_path.h: the receive datapaths of an mlx5 queue. Neither
// calls into a device directly: the striding path reads and writes the rings
// mlx5dv_init_obj exposes (plain memory), the plain path goes through the
// ibv_wq / ibv_cq function tables; tests drive both with a fake NIC. Private
// to transport/mlx5.
//
// Striding (multi-packet RQ): Receive walks the completion ring (CqCursor),
// applies each completion to the MprqBufferRing (a frame, a filler, the end
// of an entry), keeps the frames that are whole ATP frames for this queue,
// and moves the CQ's consumer index; Repost writes free chunks into the work
// queue's entries (WriteMprqWqe) and moves its doorbell record.
//
// Plain: one PostedFramePool buffer per receive entry, ibv_post_wq_recv to
// post, ibv_poll_cq to receive.
//
// Both count rx_frames, rx_bad_frames (not a whole ATP frame for this queue:
// size, headers, port) and rx_dropped (an entry completed in error).
#ifndef ATP_TRANSPORT_MLX5_RX_PATH_H_
#define ATP_TRANSPORT_MLX5_RX_PATH_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "atp/transport.h"
#include "transport/mlx5/cqe.h"
#include "transport/mlx5/mprq_buffer_ring.h"
#include "transport/mlx5/posted_frame_pool.h"

namespace atp::transport::mlx5 {

// RxSteering: what a queue accepts: whole ATP frames for base_port + queue.
struct RxSteering {
  uint16_t base_port = wire::kDefaultBasePort;
  uint32_t queue = 0;
};

// AcceptFrame: `bytes` at `data` are a whole ATP frame for `steering`.
bool AcceptFrame(const uint8_t* data, uint32_t bytes, const RxSteering& steering);

// StridingRings: the work queue and completion queue rings of a striding RQ
// (mlx5dv_rwq, mlx5dv_cq), and the lkey of the chunks' memory.
struct StridingRings {
  uint8_t* wq_buffer = nullptr;
  uint32_t wq_entries = 0;  // a power of two
  uint32_t wq_stride = 0;   // bytes per entry (>= kMprqWqeBytes)
  uint32_t* wq_doorbell = nullptr;
  uint8_t* cq_buffer = nullptr;
  uint32_t cq_entries = 0;
  uint32_t cq_entry_bytes = 64;
  uint32_t* cq_doorbell = nullptr;  // the consumer-index word
  uint32_t lkey = 0;
};

class StridingRxPath {
 public:
  // ring and stats outlive the path; the ring's geometry has wq_depth ==
  // rings.wq_entries.
  StridingRxPath(const StridingRings& rings, MprqBufferRing* ring, const RxSteering& steering,
                 QueueStats* stats);

  // Repost: posts free chunks into the entries the NIC has finished with.
  void Repost();
  // Receive: Repost, then up to frames.size() frames.
  size_t Receive(std::span<FrameRef> frames);

  // posted_entries: entries holding a chunk the NIC has not finished.
  uint32_t posted_entries() const { return wq_head_ - wq_tail_; }
  uint32_t wq_counter() const { return wq_head_; }

 private:
  const StridingRings rings_;
  MprqBufferRing* const ring_;
  const RxSteering steering_;
  QueueStats* const stats_;
  CqCursor cursor_;
  uint32_t wq_head_ = 0;  // entries posted
  uint32_t wq_tail_ = 0;  // entries finished
};

class PlainRxPath {
 public:
  // wq, cq, pool and stats outlive the path; `entries` is a power of two.
  PlainRxPath(ibv_wq* wq, ibv_cq* cq, PostedFramePool* pool, uint32_t lkey, uint32_t entries,
              const RxSteering& steering, QueueStats* stats);

  // Repost: fills the receive queue with free pool buffers.
  void Repost();
  size_t Receive(std::span<FrameRef> frames);
  // Stop: the receive queue is gone: gives its buffers back to the pool.
  void Stop();

  uint32_t posted_entries() const { return head_ - tail_; }

 private:
  ibv_wq* wq_;  // null once stopped
  ibv_cq* cq_;
  PostedFramePool* const pool_;
  const uint32_t lkey_;
  const RxSteering steering_;
  QueueStats* const stats_;
  std::vector<FrameRef> posted_;  // buffer of each entry, by wr_id mod entries
  uint32_t head_ = 0;             // entries posted
  uint32_t tail_ = 0;             // entries completed
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_RX_PATH_H_
