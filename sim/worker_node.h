// sim/worker_node.h: a worker host: one real WorkerQueueEngine per queue
// behind one NIC (port 0).
//
// Start() splits a tensor into one contiguous, fragment-aligned range per
// queue (the same split on every worker, as ATP-SPEC section 3 requires) and
// enqueues each range on its queue's engine; the operation completes when
// every range has. The node drives its engines as an I/O thread would: it
// hands them parameter packets as they arrive, pulls their sends into the NIC
// (no more than the NIC queue has room for, so the host never drops its own
// frames), and wakes itself at the engines' retransmission deadlines.
//
//   ATP_ASSIGN_OR_RETURN(auto worker, WorkerNode::Create("w0", &sim, &pool, config));
//   worker->SetCompletionCallback([](WorkerNode& w, uint64_t op, TimePoint t) { ... });
//   ATP_ASSIGN_OR_RETURN(uint64_t op, worker->Start(input, output));
#ifndef ATP_SIM_WORKER_NODE_H_
#define ATP_SIM_WORKER_NODE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/wire.h"
#include "sim/node.h"
#include "sim/simulator.h"
#include "lib/worker/worker_queue_engine.h"

namespace atp::sim {

struct WorkerNodeConfig {
  // engine: the configuration every queue's engine gets (its `queue` field is
  // set per engine).
  worker::WorkerQueueConfig engine;
  // queues: engines (and queue indices 0..queues-1), 1..16.
  uint32_t queues = 1;
  uint32_t ip = 0;     // this host
  uint32_t ps_ip = 0;  // where gradients go
  uint16_t base_port = wire::kDefaultBasePort;
  // burst: most messages pulled from one engine at a time.
  uint32_t burst = 32;
};

struct WorkerNodeCounters {
  uint64_t frames_received = 0;
  uint64_t decode_errors = 0;   // frames DecodeFrame rejected (corruption)
  uint64_t foreign = 0;         // valid frames of another job or an unused queue
  uint64_t frames_sent = 0;
  uint64_t nic_full_waits = 0;  // times the engines had more to send than the NIC had room
};

class WorkerNode : public Node, public Actor {
 public:
  // CompletionCallback: (node, operation index from Start, completion time).
  using CompletionCallback = std::function<void(WorkerNode&, uint64_t, TimePoint)>;

  // Create: validates the configuration and creates the engines. `sim` and
  // `pool` must outlive the node. Connect port 0 (the NIC) before Start.
  static absl::StatusOr<std::unique_ptr<WorkerNode>> Create(std::string name, Simulator* sim,
                                                            PacketPool* pool,
                                                            const WorkerNodeConfig& config);
  ~WorkerNode() override;

  void SetCompletionCallback(CompletionCallback callback) { on_complete_ = std::move(callback); }

  // Start: aggregate `input` into `output` (same size; both owned by the
  // caller, alive and `input` unchanged until completion). Returns the
  // operation's index: 0, 1, 2, ... in Start order.
  absl::StatusOr<uint64_t> Start(std::span<const float> input, std::span<float> output);

  // QueueRange: the [first, last) range of a tensor of `values` floats that
  // queue `queue` of `queues` carries (fragment-aligned, the same on every
  // worker).
  static std::pair<size_t, size_t> QueueRange(size_t values, uint32_t queues, uint32_t queue);

  // Kill: the host dies: from now on it ignores every frame, sends nothing
  // and starts nothing.
  void Kill();
  bool dead() const { return dead_; }

  uint8_t job() const { return config_.engine.shape.job; }
  int rack() const { return config_.engine.rack; }
  int worker_in_rack() const { return config_.engine.worker_in_rack; }
  const WorkerNodeCounters& counters() const { return counters_; }
  // Stats: the engines' counters summed (state fields: of queue 0).
  worker::WorkerQueueStats Stats() const;
  const worker::WorkerQueueEngine& engine(uint32_t queue) const { return *engines_[queue]; }
  uint64_t operations_pending() const { return pending_.size(); }

  void Receive(PacketPtr packet, int port, TimePoint now) override;
  void Act(TimePoint now) override;

 private:
  struct QueueOp {
    worker::OperationId engine_op;
    uint64_t node_op;
  };

  WorkerNode(std::string name, Simulator* sim, PacketPool* pool, const WorkerNodeConfig& config);

  // PumpQueue: moves queue q's sends into the NIC while there is room.
  // Returns false when the NIC filled up before the engine ran dry.
  bool PumpQueue(uint32_t q, TimePoint now);
  void PumpAll(TimePoint now);
  void CollectCompletions(uint32_t q, TimePoint now);
  void ScheduleWake(TimePoint now);

  Simulator* sim_;
  PacketPool* pool_;
  WorkerNodeConfig config_;
  wire::FrameFields frame_template_;
  std::vector<std::unique_ptr<worker::WorkerQueueEngine>> engines_;
  std::vector<wire::AtpMessage> burst_;
  std::vector<std::deque<QueueOp>> queue_ops_;  // per queue: its ops not yet completed
  // Start-ed operations not complete: node op index -> queues still working.
  std::deque<uint32_t> pending_;
  uint64_t first_pending_op_ = 0;  // node op index of pending_.front()
  uint64_t next_op_ = 0;
  bool nic_blocked_ = false;
  bool dead_ = false;
  uint32_t pump_start_ = 0;
  CompletionCallback on_complete_;
  WorkerNodeCounters counters_;
  // Scratch for decoding.
  wire::FrameFields rx_fields_;
  wire::AtpMessage rx_message_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_WORKER_NODE_H_
