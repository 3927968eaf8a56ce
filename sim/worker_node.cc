#include "sim/worker_node.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "sim/addressing.h"

namespace atp::sim {
namespace {

transport::DeviceAddress AddressOf(uint32_t ip) {
  transport::DeviceAddress address;
  address.ipv4.value = ip;
  address.mac = MacOf(ip);
  return address;
}

// DestinationPort: the UDP destination port of an ATP frame (base_port +
// queue: what a NIC steers by).
uint16_t DestinationPort(const Packet& packet) {
  const uint8_t* p = packet.bytes.data() + wire::kUdpOffset + 2;
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerNode>> WorkerNode::Create(std::string name, Simulator* sim,
                                                               PacketPool* pool,
                                                               const WorkerNodeConfig& config) {
  if (config.queues < 1 || config.queues > static_cast<uint32_t>(wire::kMaxQueues)) {
    return absl::InvalidArgumentError(
        absl::StrCat("WorkerNodeConfig.queues: ", config.queues, " is not in 1..16"));
  }
  if (config.burst < 1) return absl::InvalidArgumentError("WorkerNodeConfig.burst: must be >= 1");
  scheduler::FragmentSchedulerConfig scheduler_config;
  scheduler_config.queues = config.queues;
  scheduler_config.min_piece_fragments = config.min_piece_fragments;
  scheduler_config.max_piece_fragments = config.max_piece_fragments;
  ATP_ASSIGN_OR_RETURN(scheduler::FragmentScheduler scheduler,
                       scheduler::FragmentScheduler::Create(scheduler_config));
  std::unique_ptr<WorkerNode> node(
      new WorkerNode(std::move(name), sim, pool, config, std::move(scheduler)));
  host::WorkerIoLoopConfig loop_config;
  loop_config.self = AddressOf(config.ip);
  loop_config.ps = AddressOf(config.ps_ip);
  loop_config.base_port = config.base_port;
  loop_config.max_burst = config.burst;
  loop_config.total_workers = config.engine.shape.total_workers();
  // Joins at start as a Worker does (the PS asks for joins on a queue until
  // every worker joined it). Each simulated worker is one run: a fixed
  // nonzero incarnation, so that runs stay repeatable.
  loop_config.join_at_start = true;
  loop_config.incarnation = (uint64_t{config.ip} << 32) | 1;
  for (uint32_t q = 0; q < config.queues; ++q) {
    node->ports_.push_back(std::make_unique<SimPort>(&node->frames_, nullptr, loop_config.self,
                                                     config.base_port, q,
                                                     SimPort::TxMode::kBackpressure));
    worker::WorkerQueueConfig engine_config = config.engine;
    engine_config.queue = q;
    ATP_ASSIGN_OR_RETURN(std::unique_ptr<host::WorkerIoLoop> loop,
                         host::WorkerIoLoop::Create(loop_config, engine_config,
                                                       *node->ports_.back()));
    node->loops_.push_back(std::move(loop));
  }
  return node;
}

WorkerNode::WorkerNode(std::string name, Simulator* sim, PacketPool* pool,
                       const WorkerNodeConfig& config, scheduler::FragmentScheduler scheduler)
    : Node(std::move(name)),
      sim_(sim),
      config_(config),
      scheduler_(std::move(scheduler)),
      frames_(pool) {}

WorkerNode::~WorkerNode() {
  sim_->Unschedule(this);
  // The loops return the frames they hold to the ports' pools: before the ports go.
  loops_.clear();
}

void WorkerNode::Kill() {
  dead_ = true;
  sim_->Unschedule(this);
}

absl::StatusOr<uint64_t> WorkerNode::Start(std::span<const float> input, std::span<float> output) {
  if (input.size() != output.size()) {
    return absl::InvalidArgumentError("WorkerNode::Start: input and output sizes differ");
  }
  if (dead_) return absl::FailedPreconditionError("WorkerNode::Start: the worker is dead");
  const uint64_t op = next_op_++;
  pieces_.clear();
  scheduler_.Assign(input.size(), pieces_);
  auto state = std::make_shared<internal::OpState>(op, static_cast<uint32_t>(pieces_.size()));
  if (pieces_.empty()) state->Finish(absl::OkStatus());
  for (const scheduler::Piece& piece : pieces_) {
    host::PieceRequest request;
    request.op = state;
    request.input = input.subspan(piece.first_value, piece.values);
    request.output = output.subspan(piece.first_value, piece.values);
    request.fragments = piece.fragments;
    loops_[piece.queue]->Submit(std::move(request));
  }
  if (pending_.empty()) first_pending_op_ = op;
  pending_.push_back(std::move(state));
  sim_->Schedule(this, sim_->Now());
  return op;
}

void WorkerNode::StepQueue(uint32_t q, TimePoint now) {
  SimPort& nic_queue = *ports_[q];
  if (!nic_queue.attached()) {
    for (auto& p : ports_) p->Attach(port(0));
  }
  sim_->Schedule(this, loops_[q]->Step(now).deadline);
  if (nic_queue.TakeRefused()) {
    // The NIC's queue was full: try again once it has drained to half.
    ++counters_.nic_full_waits;
    const Link* nic = port(0);
    sim_->Schedule(this, nic->TimeWhenDepthAtMost(nic->config().queue_capacity_packets / 2));
  }
}

void WorkerNode::ReportCompleted(TimePoint now) {
  while (!pending_.empty() && pending_.front()->done()) {
    pending_.pop_front();
    const uint64_t op = first_pending_op_++;
    if (on_complete_) on_complete_(*this, op, now);  // may Start the next one
  }
}

void WorkerNode::Receive(PacketPtr packet, int, TimePoint now) {
  ++counters_.frames_received;
  if (dead_) return;
  const uint32_t q = static_cast<uint16_t>(DestinationPort(*packet) - config_.base_port);
  if (q >= config_.queues) {
    ++counters_.foreign;
    return;
  }
  ports_[q]->Deliver(std::move(packet));
  StepQueue(q, now);
  ReportCompleted(now);
}

void WorkerNode::Act(TimePoint now) {
  if (dead_) return;
  for (uint32_t i = 0; i < config_.queues; ++i) StepQueue((step_start_ + i) % config_.queues, now);
  step_start_ = (step_start_ + 1) % config_.queues;
  ReportCompleted(now);
}

uint64_t WorkerNode::decode_errors() const {
  uint64_t total = 0;
  for (const auto& loop : loops_) {
    loop->Publish();
    total += loop->statistics().decode_errors;
  }
  return total;
}

uint64_t WorkerNode::spare_tx_frames() const {
  uint64_t total = 0;
  for (const auto& loop : loops_) total += loop->spare_tx_frames();
  return total;
}

worker::WorkerQueueStats WorkerNode::Stats() const {
  worker::WorkerQueueStats total = loops_[0]->engine().stats();
  for (size_t q = 1; q < loops_.size(); ++q) {
    const worker::WorkerQueueStats s = loops_[q]->engine().stats();
    total.fragments_sent += s.fragments_sent;
    total.fp_fragments_sent += s.fp_fragments_sent;
    total.resends_loss += s.resends_loss;
    total.resends_timeout += s.resends_timeout;
    total.resends_overflow += s.resends_overflow;
    total.parameter_packets += s.parameter_packets;
    total.overflow_requests += s.overflow_requests;
    total.collisions_seen += s.collisions_seen;
    total.float_results += s.float_results;
    total.ecn_marks += s.ecn_marks;
    total.ignored_unknown_seq += s.ignored_unknown_seq;
    total.ignored_foreign += s.ignored_foreign;
    total.loss_events += s.loss_events;
    total.timeouts += s.timeouts;
    total.operations_completed += s.operations_completed;
    total.in_flight += s.in_flight;
    total.queued_positions += s.queued_positions;
  }
  return total;
}

}  // namespace atp::sim
