#include "sim/worker_node.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "sim/addressing.h"

namespace atp::sim {

using worker::OperationId;
using worker::WorkerQueueEngine;

absl::StatusOr<std::unique_ptr<WorkerNode>> WorkerNode::Create(std::string name, Simulator* sim,
                                                               PacketPool* pool,
                                                               const WorkerNodeConfig& config) {
  if (config.queues < 1 || config.queues > static_cast<uint32_t>(wire::kMaxQueues)) {
    return absl::InvalidArgumentError(
        absl::StrCat("WorkerNodeConfig.queues: ", config.queues, " is not in 1..16"));
  }
  if (config.burst < 1) return absl::InvalidArgumentError("WorkerNodeConfig.burst: must be >= 1");
  std::unique_ptr<WorkerNode> node(new WorkerNode(std::move(name), sim, pool, config));
  for (uint32_t q = 0; q < config.queues; ++q) {
    worker::WorkerQueueConfig engine_config = config.engine;
    engine_config.queue = q;
    ATP_ASSIGN_OR_RETURN(std::unique_ptr<WorkerQueueEngine> engine,
                         WorkerQueueEngine::Create(std::move(engine_config)));
    node->engines_.push_back(std::move(engine));
  }
  return node;
}

WorkerNode::WorkerNode(std::string name, Simulator* sim, PacketPool* pool,
                       const WorkerNodeConfig& config)
    : Node(std::move(name)),
      sim_(sim),
      pool_(pool),
      config_(config),
      burst_(config.burst),
      queue_ops_(config.queues) {
  frame_template_.src_ip.value = config.ip;
  frame_template_.dst_ip.value = config.ps_ip;
  frame_template_.src_mac = MacOf(config.ip);
  frame_template_.dst_mac = MacOf(config.ps_ip);
  frame_template_.ip_tos = wire::kTosEct0;
}

WorkerNode::~WorkerNode() { sim_->Unschedule(this); }

void WorkerNode::Kill() {
  dead_ = true;
  sim_->Unschedule(this);
}

std::pair<size_t, size_t> WorkerNode::QueueRange(size_t values, uint32_t queues, uint32_t queue) {
  const size_t fragments = (values + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
  const size_t first = fragments * queue / queues * wire::kValuesPerFragment;
  const size_t last = fragments * (queue + 1) / queues * wire::kValuesPerFragment;
  return {std::min(first, values), std::min(last, values)};
}

absl::StatusOr<uint64_t> WorkerNode::Start(std::span<const float> input, std::span<float> output) {
  if (input.size() != output.size()) {
    return absl::InvalidArgumentError("WorkerNode::Start: input and output sizes differ");
  }
  if (dead_) return absl::FailedPreconditionError("WorkerNode::Start: the worker is dead");
  const uint64_t op = next_op_++;
  uint32_t parts = 0;
  for (uint32_t q = 0; q < config_.queues; ++q) {
    const auto [first, last] = QueueRange(input.size(), config_.queues, q);
    if (first == last) continue;
    ATP_ASSIGN_OR_RETURN(OperationId id, engines_[q]->Enqueue(input.subspan(first, last - first),
                                                              output.subspan(first, last - first)));
    queue_ops_[q].push_back(QueueOp{id, op});
    ++parts;
  }
  if (pending_.empty()) first_pending_op_ = op;
  pending_.push_back(parts);
  const TimePoint now = sim_->Now();
  if (parts == 0) {
    // Nothing to send: complete right away (in order with earlier ones).
    CollectCompletions(0, now);
  }
  PumpAll(now);
  ScheduleWake(now);
  return op;
}

bool WorkerNode::PumpQueue(uint32_t q, TimePoint now) {
  Link* nic = port(0);
  WorkerQueueEngine& engine = *engines_[q];
  while (true) {
    // With a full NIC this still calls CollectSends (with no room), which
    // handles an expired retransmission timer.
    const size_t want = std::min<size_t>(nic->FreeSlots(), burst_.size());
    const size_t n = engine.CollectSends(now, std::span(burst_.data(), want));
    for (size_t i = 0; i < n; ++i) {
      frame_template_.header = burst_[i].header;
      PacketPtr packet = pool_->Allocate();
      wire::EncodeFrame(frame_template_, burst_[i].payload, config_.base_port, packet->frame());
      nic->Send(std::move(packet));
    }
    counters_.frames_sent += n;
    if (want == 0) return !engine.WantsToSend();
    if (n < want) return true;
  }
}

void WorkerNode::PumpAll(TimePoint now) {
  nic_blocked_ = false;
  // Start from a rotating queue, so that a full NIC does not always favour
  // queue 0.
  for (uint32_t i = 0; i < config_.queues; ++i) {
    const uint32_t q = (pump_start_ + i) % config_.queues;
    if (!PumpQueue(q, now)) nic_blocked_ = true;
  }
  pump_start_ = (pump_start_ + 1) % config_.queues;
  if (nic_blocked_) ++counters_.nic_full_waits;
}

void WorkerNode::CollectCompletions(uint32_t q, TimePoint now) {
  std::array<OperationId, 8> done;
  size_t n;
  while ((n = engines_[q]->CollectCompletions(done)) > 0) {
    for (size_t i = 0; i < n; ++i) {
      auto& ops = queue_ops_[q];
      auto it = std::find_if(ops.begin(), ops.end(),
                             [&](const QueueOp& o) { return o.engine_op == done[i]; });
      if (it == ops.end()) continue;
      --pending_[it->node_op - first_pending_op_];
      ops.erase(it);
    }
  }
  // Report completed operations in Start order.
  while (!pending_.empty() && pending_.front() == 0) {
    pending_.pop_front();
    const uint64_t op = first_pending_op_++;
    if (on_complete_) on_complete_(*this, op, now);
  }
}

void WorkerNode::ScheduleWake(TimePoint now) {
  TimePoint wake = TimePoint::Infinite();
  for (const auto& engine : engines_) wake = Earliest(wake, engine->NextDeadline());
  if (nic_blocked_) {
    const Link* nic = port(0);
    wake = Earliest(wake, nic->TimeWhenDepthAtMost(nic->config().queue_capacity_packets / 2));
  }
  if (wake < now) wake = now;
  sim_->Schedule(this, wake);
}

void WorkerNode::Receive(PacketPtr packet, int, TimePoint now) {
  ++counters_.frames_received;
  if (dead_) return;
  if (wire::DecodeFrame(packet->bytes, config_.base_port, &rx_fields_, &rx_message_.payload) !=
      wire::DecodeError::kOk) {
    ++counters_.decode_errors;
    return;
  }
  rx_message_.header = rx_fields_.header;
  const uint32_t q = rx_message_.header.queue();
  if (rx_message_.header.job != job() || q >= config_.queues) {
    ++counters_.foreign;
    return;
  }
  WorkerQueueEngine& engine = *engines_[q];
  engine.OnParameterPacket(rx_message_, now);
  packet.reset();
  CollectCompletions(q, now);
  if (nic_blocked_) {
    // Waiting for the NIC to drain: the wake-up pumps every queue.
  } else if (!PumpQueue(q, now)) {
    nic_blocked_ = true;
    ++counters_.nic_full_waits;
    const Link* nic = port(0);
    sim_->Schedule(this, nic->TimeWhenDepthAtMost(nic->config().queue_capacity_packets / 2));
  }
  sim_->Schedule(this, engine.NextDeadline());
}

void WorkerNode::Act(TimePoint now) {
  if (dead_) return;
  PumpAll(now);
  for (uint32_t q = 0; q < config_.queues; ++q) CollectCompletions(q, now);
  ScheduleWake(now);
}

worker::WorkerQueueStats WorkerNode::Stats() const {
  worker::WorkerQueueStats total = engines_[0]->stats();
  for (size_t q = 1; q < engines_.size(); ++q) {
    const worker::WorkerQueueStats s = engines_[q]->stats();
    total.fragments_sent += s.fragments_sent;
    total.fp_fragments_sent += s.fp_fragments_sent;
    total.resends_loss += s.resends_loss;
    total.resends_timeout += s.resends_timeout;
    total.resends_overflow += s.resends_overflow;
    total.parameter_packets += s.parameter_packets;
    total.overflow_requests += s.overflow_requests;
    total.collisions_seen += s.collisions_seen;
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
