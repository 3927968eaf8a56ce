// transport/mlx5/tx_path.h: the send datapath of an mlx5 queue. It talks to
// the NIC only through an ibv_qp_ex (ibv_wr_start / ibv_wr_send /
// ibv_wr_send_tso / ibv_wr_set_sge / ibv_wr_set_inline_data /
// ibv_wr_complete) and an ibv_cq (ibv_poll_cq), both tables of function
// pointers, so tests drive it with a fake QP and CQ and no device. Private to
// transport/mlx5.
//
// TxBurst / TxSegmented build TxRequests into a pending batch, taking no more
// than the send ring has room for (posted + pending <= depth); the batch is
// posted with one ibv_wr_start ... ibv_wr_complete (one doorbell) when it
// fills or at Flush. SignalCadence asks for a completion every signal_every
// requests and on the last request a Flush posts; a completion gives back
// every request up to it (TxCompletionRing): frames to their pools, TSO
// staging slots to the StagingSlots.
//
// Segmentation jobs: with TSO (tso_segments_per_request > 0) up to that many
// segments per work request, written into a staging slot (tx_request.h);
// without, one tx_pool frame per segment.
#ifndef ATP_TRANSPORT_MLX5_TX_PATH_H_
#define ATP_TRANSPORT_MLX5_TX_PATH_H_

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "atp/transport.h"
#include "transport/mlx5/signal_cadence.h"
#include "transport/mlx5/tx_request.h"
#include "transport/mlx5/tx_tracker.h"

namespace atp::transport::mlx5 {

struct TxPathConfig {
  uint16_t base_port = wire::kDefaultBasePort;
  uint32_t depth = 1024;    // send entries the QP was granted
  uint32_t max_burst = 32;  // requests per pending batch
  uint32_t signal_every = 32;
  uint32_t max_inline_frame = 0;          // <= the QP's max_inline_data; 0: never inline
  uint32_t tso_segments_per_request = 0;  // 0: software segmentation
};

// TxPathMemory: registered memory the requests read.
struct TxPathMemory {
  HeapFramePool* tx_pool = nullptr;
  uint32_t tx_lkey = 0;
  std::span<uint8_t> staging;  // TSO: staging_slots x staging_slot_bytes
  uint32_t staging_slot_bytes = 0;
  uint32_t staging_slots = 0;
  uint32_t staging_lkey = 0;
};

class TxPath {
 public:
  // qpx, cq, memory and stats outlive the path (until Stop for qpx).
  TxPath(const TxPathConfig& config, const TxPathMemory& memory, ibv_qp_ex* qpx, ibv_cq* cq,
         QueueStats* stats);
  TxPath(const TxPath&) = delete;
  TxPath& operator=(const TxPath&) = delete;

  // set_lkeys: every region of the device, so frames from another queue's
  // pool go without a copy. Control path.
  void set_lkeys(const LkeyTable* lkeys) { lkeys_ = lkeys; }

  // The Queue operations (atp/transport.h).
  size_t TxBurst(std::span<const FrameRef> frames);
  size_t TxSegmented(const SegmentationJob& job);
  size_t Flush();

  // Stop: the QP is gone or going: gives back every pending and posted
  // request's frames and slots. Requests taken later are dropped at Flush and
  // counted as tx_errors.
  void Stop();

  // room: send entries neither posted nor pending.
  uint32_t room() const;
  uint64_t frames_outstanding() const { return tracker_.frames_outstanding(); }
  size_t pending() const { return pending_.size(); }

 private:
  uint32_t PrepareRoom(uint32_t wanted);
  void ReapCompletions();
  void Enqueue(const TxRequest& request);
  void PostPending(BatchEnd end);
  // Drop: gives back a request that will never be posted, counting it lost.
  void Drop(const TxRequest& request);
  void ReleaseRecord(const TxRecord& record);
  bool FrameRequest(const FrameRef& frame, TxRequest* request);
  size_t SegmentedTso(const SegmentationJob& job);
  size_t SegmentedSoftware(const SegmentationJob& job);

  const TxPathConfig config_;
  const TxPathMemory memory_;
  ibv_qp_ex* qpx_;
  ibv_cq* cq_;
  QueueStats* stats_;
  const LkeyTable* lkeys_ = nullptr;
  TxCompletionRing tracker_;
  std::optional<StagingSlots> staging_;
  SignalCadence cadence_;
  std::vector<TxRequest> pending_;
  uint32_t pending_capacity_;
  bool failed_ = false;  // a send completed in error: the QP is dead
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_TX_PATH_H_
