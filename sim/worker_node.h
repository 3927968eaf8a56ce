// sim/worker_node.h: a worker in the simulator: the product's worker host
// (lib/host/worker_io_loop.h, one WorkerIoLoop per queue, what every
// atp::Worker I/O thread runs) behind one simulated NIC (port 0), with the
// product's FragmentScheduler cutting operations into pieces and OpState
// finishing them.
//
// The node only adapts the simulator to the host: each queue's loop has a
// SimPort of its own on the same NIC link (the NIC's queues); a frame that
// arrives is steered to the queue its UDP destination port names, as a NIC
// steers it, and that queue's loop steps at once. The node wakes itself at
// the deadlines the steps return (retransmission timers) and, when the NIC
// refused frames (its queue was full), when the NIC has drained to half.
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
#include "lib/host/op_state.h"
#include "lib/host/worker_io_loop.h"
#include "lib/scheduler/fragment_scheduler.h"
#include "lib/worker/worker_queue_engine.h"
#include "sim/node.h"
#include "sim/sim_port.h"
#include "sim/simulator.h"

namespace atp::sim {

struct WorkerNodeConfig {
  // engine: the configuration every queue's engine gets (its `queue` field is
  // set per engine).
  worker::WorkerQueueConfig engine;
  // queues: engines (and queue indices 0..queues-1), 1..16.
  uint32_t queues = 1;
  // scheduler: how operations are cut into pieces (its `queues` is `queues`).
  uint32_t min_piece_fragments = scheduler::FragmentSchedulerConfig{}.min_piece_fragments;
  uint32_t max_piece_fragments = scheduler::FragmentSchedulerConfig{}.max_piece_fragments;
  uint32_t ip = 0;     // this host
  uint32_t ps_ip = 0;  // where gradients go
  uint16_t base_port = wire::kDefaultBasePort;
  // burst: most frames a loop moves per transport call.
  uint32_t burst = 32;
};

struct WorkerNodeCounters {
  uint64_t frames_received = 0;  // every frame that reached the NIC
  uint64_t foreign = 0;          // frames for no queue of this worker (steered nowhere)
  uint64_t nic_full_waits = 0;   // times a step left frames the NIC had no room for
};

class WorkerNode : public Node, public Actor {
 public:
  // CompletionCallback: (node, operation index from Start, completion time).
  using CompletionCallback = std::function<void(WorkerNode&, uint64_t, TimePoint)>;

  // Create: validates the configuration and creates the hosts. `sim` and
  // `pool` must outlive the node. Connect port 0 (the NIC) before Start.
  static absl::StatusOr<std::unique_ptr<WorkerNode>> Create(std::string name, Simulator* sim,
                                                            PacketPool* pool,
                                                            const WorkerNodeConfig& config);
  ~WorkerNode() override;

  void SetCompletionCallback(CompletionCallback callback) { on_complete_ = std::move(callback); }

  // Start: aggregate `input` into `output` (same size; both owned by the
  // caller, alive and `input` unchanged until completion). Returns the
  // operation's index: 0, 1, 2, ... in Start order. The hosts take it at the
  // node's next step (an event at the current time).
  absl::StatusOr<uint64_t> Start(std::span<const float> input, std::span<float> output);

  // Kill: the host dies: from now on it ignores every frame, sends nothing
  // and starts nothing.
  void Kill();
  bool dead() const { return dead_; }
  // sim: the clock of the node's partition.
  Simulator* sim() const { return sim_; }

  uint8_t job() const { return config_.engine.shape.job; }
  int rack() const { return config_.engine.rack; }
  int worker_in_rack() const { return config_.engine.worker_in_rack; }
  // counters: the node's own; decode_errors() and frames_sent(): the hosts'.
  const WorkerNodeCounters& counters() const { return counters_; }
  uint64_t decode_errors() const;
  // Stats: the engines' counters summed (state fields: of queue 0).
  worker::WorkerQueueStats Stats() const;
  const worker::WorkerQueueEngine& engine(uint32_t queue) const { return loops_[queue]->engine(); }
  uint64_t operations_pending() const { return pending_.size(); }
  // spare_tx_frames: packets the hosts keep for their next sends.
  uint64_t spare_tx_frames() const;

  void Receive(PacketPtr packet, int port, TimePoint now) override;
  void Act(TimePoint now) override;

 private:
  WorkerNode(std::string name, Simulator* sim, PacketPool* pool, const WorkerNodeConfig& config,
             scheduler::FragmentScheduler scheduler);

  // StepQueue: one step of queue q's host; schedules the wake-ups it needs.
  void StepQueue(uint32_t q, TimePoint now);
  // ReportCompleted: the finished operations at the front, in Start order.
  void ReportCompleted(TimePoint now);

  Simulator* sim_;
  WorkerNodeConfig config_;
  scheduler::FragmentScheduler scheduler_;
  std::vector<scheduler::Piece> pieces_;  // scratch
  PacketFramePool frames_;                // the NIC queues' pools
  std::vector<std::unique_ptr<SimPort>> ports_;                // [queue]: the NIC's queues
  std::vector<std::unique_ptr<host::WorkerIoLoop>> loops_;  // [queue]
  // Start-ed operations not yet reported, in Start order.
  std::deque<std::shared_ptr<internal::OpState>> pending_;
  uint64_t first_pending_op_ = 0;  // node op index of pending_.front()
  uint64_t next_op_ = 0;
  bool dead_ = false;
  uint32_t step_start_ = 0;  // Act steps the queues from here (rotating, for fairness)
  CompletionCallback on_complete_;
  WorkerNodeCounters counters_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_WORKER_NODE_H_
