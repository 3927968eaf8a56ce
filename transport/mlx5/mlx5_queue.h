// transport/mlx5/mlx5_queue.h: one mlx5 queue: the verbs objects and memory
// the control path (mlx5_device.cc) made for it, and the datapaths that run
// over them (TxPath, StridingRxPath or PlainRxPath). Private to
// transport/mlx5.
#ifndef ATP_TRANSPORT_MLX5_MLX5_QUEUE_H_
#define ATP_TRANSPORT_MLX5_MLX5_QUEUE_H_

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/transport.h"
#include "transport/mlx5/geometry.h"
#include "transport/mlx5/mlx5_device.h"
#include "transport/mlx5/mprq_buffer_ring.h"
#include "transport/mlx5/posted_frame_pool.h"
#include "transport/mlx5/region_memory.h"
#include "transport/mlx5/rx_path.h"
#include "transport/mlx5/tx_path.h"
#include "transport/mlx5/tx_request.h"
#include "transport/mlx5/verbs_handles.h"

namespace atp::transport::mlx5 {

// SendResources: a queue's send QP and the memory its requests read. Members
// are destroyed bottom-up: the QP before its CQ, registrations before memory.
struct SendResources {
  RegionMemory staging;  // TSO staging slots (empty without TSO)
  std::unique_ptr<HeapFramePool> tx_pool;
  VerbsPtr<ibv_mr> staging_mr;
  VerbsPtr<ibv_mr> tx_pool_mr;
  VerbsPtr<ibv_cq> cq;
  VerbsPtr<ibv_qp> qp;
  ibv_qp_ex* qpx = nullptr;      // the extended-post view of qp
  uint32_t depth = 0;            // send entries granted (cap.max_send_wr)
  uint32_t max_inline_data = 0;  // inline bytes granted
};

// ReceiveResources: a queue's receive path, work queue to flow rule.
struct ReceiveResources {
  Mlx5RxMode mode = Mlx5RxMode::kPlainCq;
  // kMultiPacketRq: the striding buffers and the rings exposed by mlx5dv.
  RegionMemory memory;
  MprqGeometry geometry;
  mlx5dv_rwq dv_wq{};
  mlx5dv_cq dv_cq{};
  // kPlainCq: one buffer per entry.
  std::unique_ptr<PostedFramePool> pool;
  uint32_t ring = 0;    // entries (a power of two)
  VerbsPtr<ibv_mr> mr;  // of memory or of pool's region
  VerbsPtr<ibv_cq> cq;
  VerbsPtr<ibv_wq> wq;
  VerbsPtr<ibv_rwq_ind_table> table;
  VerbsPtr<ibv_qp> qp;
  VerbsPtr<ibv_flow> flow;
};

// Mlx5QueueConfig: what the control path decided for a queue.
struct Mlx5QueueConfig {
  uint32_t index = 0;
  DeviceOptions device;
  uint32_t max_inline_frame = 0;  // already capped by the QP's max_inline_data
  uint32_t signal_every = 32;
  TsoPlan tso;  // segments_per_request 0: software segmentation
  uint32_t tso_staging_slots = 0;
};

class Mlx5Queue final : public Queue {
 public:
  // Create: takes the resources and posts the first receive buffers.
  static absl::StatusOr<std::unique_ptr<Mlx5Queue>> Create(const Mlx5QueueConfig& config,
                                                           SendResources send,
                                                           ReceiveResources receive);
  ~Mlx5Queue() override;

  // SetLkeyTable: every region registered on the device, to send frames of
  // other queues' pools without a copy. Control path; `table` outlives the queue.
  void SetLkeyTable(const LkeyTable* table) { tx_->set_lkeys(table); }
  // Shutdown: stops the NIC using this queue (destroys the QPs and the flow
  // rule) and gives back every frame the queue holds. Control path; the
  // device calls it on every queue before destroying any, since queues may
  // hold each other's frames.
  void Shutdown();

  uint32_t index() const override { return config_.index; }
  const QueueCapabilities& capabilities() const override { return capabilities_; }
  size_t RxBurst(std::span<FrameRef> frames) override;
  size_t TxBurst(std::span<const FrameRef> frames) override { return tx_->TxBurst(frames); }
  size_t TxSegmented(const SegmentationJob& job) override { return tx_->TxSegmented(job); }
  size_t Flush() override { return tx_->Flush(); }
  FramePool& rx_pool() override;
  FramePool& tx_pool() override { return *send_.tx_pool; }
  QueueStats stats() const override { return stats_; }

 private:
  Mlx5Queue(const Mlx5QueueConfig& config, SendResources send, ReceiveResources receive);

  const Mlx5QueueConfig config_;
  QueueCapabilities capabilities_;
  QueueStats stats_;
  SendResources send_;
  ReceiveResources receive_;
  bool shut_down_ = false;
  // The datapaths, over the resources above (destroyed first).
  std::unique_ptr<TxPath> tx_;
  std::unique_ptr<MprqBufferRing> ring_;
  std::unique_ptr<StridingRxPath> striding_;
  std::unique_ptr<PlainRxPath> plain_;
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_MLX5_QUEUE_H_
