#include "sim/link.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace atp::sim {
namespace {

constexpr int64_t kPicosPerNano = 1000;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

Link::Link(Simulator* sim, PacketPool* pool, const LinkConfig& config, std::string name)
    : Link(sim, pool, sim, pool, config, std::move(name)) {}

Link::Link(Simulator* sim, PacketPool* pool, Simulator* rx_sim, PacketPool* rx_pool,
           const LinkConfig& config, std::string name)
    : sim_(sim),
      pool_(pool),
      rx_sim_(rx_sim),
      rx_pool_(rx_pool),
      config_(config),
      name_(std::move(name)) {
  if (config_.queue_capacity_packets == 0) config_.queue_capacity_packets = 1;
  const double bits = 8.0 * static_cast<double>(wire::kFrameBytes + config_.framing_overhead_bytes);
  const double bps = config_.bandwidth_bps > 0 ? config_.bandwidth_bps : 1.0;
  serialization_ps_ = std::max<int64_t>(1, std::llround(bits * 1e12 / bps));
}

Link::~Link() {
  rx_sim_->Unschedule(this);
  for (Delayed& delayed : delayed_) PacketPtr release(delayed.packet);
}

void Link::Connect(PacketReceiver* receiver, int port) {
  receiver_ = receiver;
  receiver_port_ = port;
}

PacketFilter* Link::AddFilter(std::unique_ptr<PacketFilter> filter) {
  filters_.push_back(std::move(filter));
  return filters_.back().get();
}

TimeDelta Link::serialization_time() const {
  return TimeDelta::FromNanoseconds(CeilDiv(serialization_ps_, kPicosPerNano));
}

uint32_t Link::QueueDepth() const {
  const int64_t now_ps = sim_->Now().ToNanoseconds() * kPicosPerNano;
  const int64_t left_ps = busy_until_ps_ - now_ps;
  if (left_ps <= 0) return 0;
  if (left_ps <= serialization_ps_) return 1;  // the common case, without a division
  // Frames are equal-sized and leave back to back, so the frames still in the
  // queue are those whose serialization ends after now.
  return static_cast<uint32_t>(CeilDiv(left_ps, serialization_ps_));
}

TimePoint Link::TimeWhenDepthAtMost(uint32_t depth) const {
  const int64_t at_ps = busy_until_ps_ - static_cast<int64_t>(depth) * serialization_ps_;
  const TimePoint at = TimePoint::FromNanoseconds(CeilDiv(std::max<int64_t>(at_ps, 0), kPicosPerNano));
  return std::max(at, sim_->Now());
}

SendResult Link::Send(PacketPtr packet) {
  const uint32_t depth = QueueDepth();
  if (depth >= config_.queue_capacity_packets) {
    ++counters_.tail_drops;
    return SendResult::kTailDropped;
  }
  ++counters_.sent;
  counters_.max_depth = std::max(counters_.max_depth, depth + 1);

  const int64_t now_ps = sim_->Now().ToNanoseconds() * kPicosPerNano;
  const int64_t start_ps = std::max(now_ps, busy_until_ps_);
  busy_until_ps_ = start_ps + serialization_ps_;

  FilterOutcome outcome;
  if (!filters_.empty()) {
    const TimePoint wire_time = TimePoint::FromNanoseconds(start_ps / kPicosPerNano);
    for (const auto& filter : filters_) {
      filter->Filter(*packet, wire_time, outcome);
      if (outcome.dropped) break;
    }
    if (outcome.dropped) {
      ++counters_.filter_drops;
      return SendResult::kQueued;  // lost on the wire, after using the link's time
    }
  }

  const int64_t arrival_ns = CeilDiv(busy_until_ps_, kPicosPerNano) +
                             config_.propagation_delay.ToNanoseconds() +
                             outcome.extra_delay.ToNanoseconds();
  const bool delayed = outcome.extra_delay > TimeDelta::Zero();
  for (uint32_t i = 0; i < outcome.extra_copies; ++i) {
    ++counters_.duplicates;
    Arrive(pool_->Clone(*packet), arrival_ns, delayed);
  }
  // The copies went first; they are identical, so the order among them
  // does not matter.
  Arrive(std::move(packet), arrival_ns, delayed);
  if (!crosses_partitions()) sim_->Schedule(this, TimePoint::FromNanoseconds(arrival_ns));
  return SendResult::kQueued;
}

void Link::Arrive(PacketPtr packet, int64_t arrival_ns, bool delayed) {
  if (crosses_partitions()) {
    crossing_.push_back(Crossing{std::move(packet), arrival_ns, delayed});
  } else if (delayed) {
    PushDelayed(std::move(packet), arrival_ns);
  } else {
    in_flight_.push_back(InFlight{std::move(packet), arrival_ns});
  }
}

void Link::Cross() {
  if (crossing_.empty()) return;
  for (Crossing& c : crossing_) {
    // Into the receiver's pool: each partition's pool is used by its own
    // thread only. The sender's copy returns to the sender's pool here.
    PacketPtr packet = rx_pool_->Clone(*c.packet);
    c.packet.reset();
    if (c.delayed) {
      PushDelayed(std::move(packet), c.arrival_ns);
    } else {
      in_flight_.push_back(InFlight{std::move(packet), c.arrival_ns});
    }
  }
  crossing_.clear();
  ScheduleNext();
}

void Link::PushDelayed(PacketPtr packet, int64_t arrival_ns) {
  delayed_.push_back(Delayed{arrival_ns, delayed_order_++, packet.release()});
  std::push_heap(delayed_.begin(), delayed_.end(), [](const Delayed& a, const Delayed& b) {
    return a.arrival_ns > b.arrival_ns || (a.arrival_ns == b.arrival_ns && a.order > b.order);
  });
}

PacketPtr Link::PopDelayed() {
  std::pop_heap(delayed_.begin(), delayed_.end(), [](const Delayed& a, const Delayed& b) {
    return a.arrival_ns > b.arrival_ns || (a.arrival_ns == b.arrival_ns && a.order > b.order);
  });
  PacketPtr packet(delayed_.back().packet);
  delayed_.pop_back();
  return packet;
}

void Link::Act(TimePoint now) {
  const int64_t now_ns = now.ToNanoseconds();
  while (true) {
    const bool fifo_due = !in_flight_.empty() && in_flight_.front().arrival_ns <= now_ns;
    const bool delayed_due = !delayed_.empty() && delayed_.front().arrival_ns <= now_ns;
    PacketPtr packet;
    if (fifo_due) {
      packet = std::move(in_flight_.pop_front().packet);
    } else if (delayed_due) {
      packet = PopDelayed();
    } else {
      break;
    }
    ++counters_.delivered;
    receiver_->Receive(std::move(packet), receiver_port_, now);
  }
  ScheduleNext();
}

void Link::ScheduleNext() {
  int64_t next = INT64_MAX;
  if (!in_flight_.empty()) next = in_flight_.front().arrival_ns;
  if (!delayed_.empty()) next = std::min(next, delayed_.front().arrival_ns);
  if (next != INT64_MAX) rx_sim_->Schedule(this, TimePoint::FromNanoseconds(next));
}

}  // namespace atp::sim
