#include "sim/network.h"

#include <algorithm>

#include "lib/host/adaptive_backoff.h"

namespace atp::sim {
namespace {

// kSpins: how often a thread looks at the other's counter before it sleeps
// on it (a few microseconds): enough to hand over most windows of a busy run
// without a system call; more only took CPU time from the input thread
// (standard atp-sim run, 3 rounds: 400 spins 2.73-2.74 M frames/s, 4000
// 2.66-2.70, none 2.53-2.64).
constexpr int kSpins = 400;

// AwaitChange: the value of `counter` once it differs from `seen`.
uint64_t AwaitChange(const std::atomic<uint64_t>& counter, uint64_t seen) {
  for (int i = 0; i < kSpins; ++i) {
    const uint64_t value = counter.load(std::memory_order_acquire);
    if (value != seen) return value;
    host::CpuRelax();
  }
  uint64_t value = counter.load(std::memory_order_acquire);
  while (value == seen) {
    counter.wait(seen, std::memory_order_acquire);
    value = counter.load(std::memory_order_acquire);
  }
  return value;
}

// AwaitValue: returns once `counter` holds `value` (it only counts up to it).
void AwaitValue(const std::atomic<uint64_t>& counter, uint64_t value) {
  uint64_t seen = counter.load(std::memory_order_acquire);
  while (seen != value) seen = AwaitChange(counter, seen);
}

}  // namespace

Network::~Network() {
  if (partition_thread_.joinable()) {
    quit_ = true;
    window_.fetch_add(1, std::memory_order_release);
    window_.notify_one();
    partition_thread_.join();
  }
  // Nodes, links and alarms unschedule themselves as they go; with the
  // queues empty that costs nothing.
  for (auto& sim : sims_) sim->Clear();
  alarms_.clear();
  workers_.clear();
  ps_nodes_.clear();
  tors_.clear();
  core_.reset();
  links_.clear();
}

void Network::SetPartitions(int partitions) {
  // On one core a second thread would only take turns with the first: every
  // window runs on this one (the same run either way).
  if (std::thread::hardware_concurrency() == 1) events_for_two_threads_ = UINT64_MAX;
  sims_.clear();
  pools_.clear();
  for (int p = 0; p < partitions; ++p) {
    sims_.push_back(std::make_unique<Simulator>());
    pools_.push_back(std::make_unique<PacketPool>());
  }
}

int Network::JobIndex(uint8_t job) const {
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (jobs_[i].shape.job == job) return static_cast<int>(i);
  }
  return -1;
}

std::vector<Link*> Network::LinksOfKind(LinkKind kind) const {
  std::vector<Link*> out;
  for (size_t i = 0; i < links_.size(); ++i) {
    if (link_kinds_[i] == kind) out.push_back(links_[i].get());
  }
  return out;
}

uint64_t Network::FrameDeliveries() const {
  uint64_t total = 0;
  for (const auto& link : links_) total += link->counters().delivered;
  return total;
}

uint64_t Network::events_processed() const {
  uint64_t total = 0;
  for (const auto& sim : sims_) total += sim->events_processed();
  return total;
}

uint64_t Network::packets_outstanding() const {
  uint64_t total = 0;
  for (const auto& pool : pools_) total += pool->outstanding();
  return total;
}

std::pair<int, int> Network::Connect(Node* a, Node* b, const LinkConfig& a_to_b,
                                     LinkKind kind_a_to_b, const LinkConfig& b_to_a,
                                     LinkKind kind_b_to_a) {
  const int pa = a->partition();
  const int pb = b->partition();
  auto ab = std::make_unique<Link>(&sim(pa), &pool(pa), &sim(pb), &pool(pb), a_to_b,
                                   a->name() + "->" + b->name());
  auto ba = std::make_unique<Link>(&sim(pb), &pool(pb), &sim(pa), &pool(pa), b_to_a,
                                   b->name() + "->" + a->name());
  const int port_a = a->AddPort(ab.get());
  const int port_b = b->AddPort(ba.get());
  ab->Connect(b, port_b);
  ba->Connect(a, port_a);
  for (Link* link : {ab.get(), ba.get()}) {
    if (!link->crosses_partitions()) continue;
    crossing_links_.push_back(link);
    // A frame sent at t arrives at t + its serialization (rounded up to the
    // ns) + the delay: no sooner than t + delay + 1 ns.
    const int64_t window = link->config().propagation_delay.ToNanoseconds() + 1;
    window_ns_ = window_ns_ == 0 ? window : std::min(window_ns_, window);
  }
  links_.push_back(std::move(ab));
  link_kinds_.push_back(kind_a_to_b);
  links_.push_back(std::move(ba));
  link_kinds_.push_back(kind_b_to_a);
  return {port_a, port_b};
}

void Network::RequestStop() {
  if (sims_.size() == 1) {
    sims_.front()->Stop();
  } else {
    stop_requested_.store(true, std::memory_order_relaxed);
  }
}

void Network::At(TimePoint time, std::function<void()> action) {
  if (sims_.size() == 1) {
    alarms_.push_back(std::make_unique<Alarm>(
        sims_.front().get(), [action = std::move(action)](TimePoint) { action(); }));
    alarms_.back()->Set(time);
    return;
  }
  actions_.emplace(time, std::move(action));  // after the others at `time`
}

uint64_t Network::RunUntil(TimePoint deadline) {
  if (sims_.size() == 1) return sims_.front()->RunUntil(deadline);
  return RunWindows(deadline);
}

uint64_t Network::RunWindows(TimePoint deadline) {
  if (!partition_thread_.joinable()) partition_thread_ = std::thread([this] { PartitionLoop(); });
  stop_requested_.store(false, std::memory_order_relaxed);
  Simulator& mine = *sims_[0];
  uint64_t processed = 0;
  while (true) {
    // Between windows: neither partition runs.
    for (Link* link : crossing_links_) link->Cross();
    if (stop_requested_.load(std::memory_order_relaxed)) break;
    const TimePoint next = std::min(sims_[0]->NextEventTime(), sims_[1]->NextEventTime());
    const TimePoint action = actions_.empty() ? TimePoint::Infinite() : actions_.begin()->first;
    if (action <= next && action <= deadline && !action.IsInfinite()) {
      for (auto& sim : sims_) sim->AdvanceClock(action);
      std::function<void()> run = std::move(actions_.begin()->second);
      actions_.erase(actions_.begin());
      run();
      continue;
    }
    if (next.IsInfinite() || next > deadline) break;
    // Events in [next, next + window) cannot receive a frame sent in it;
    // the window also ends before the next action.
    TimePoint end = std::min(deadline, next + TimeDelta::FromNanoseconds(window_ns_ - 1));
    if (action <= end) end = action - TimeDelta::FromNanoseconds(1);
    ++windows_;
    if (last_window_events_ < events_for_two_threads_) {
      // A quiet stretch (a job waiting on a timer, the settle): handing a
      // window to the other thread would cost more than its events. The
      // partitions are independent within a window, so running both here
      // gives the same run.
      last_window_events_ = mine.RunUntil(end) + sims_[1]->RunUntil(end);
    } else {
      ++windows_on_two_threads_;
      window_end_ns_ = end.ToNanoseconds();
      const uint64_t window = window_.fetch_add(1, std::memory_order_release) + 1;
      window_.notify_one();
      last_window_events_ = mine.RunUntil(end);
      AwaitValue(finished_, window);
      last_window_events_ += partition_events_;
    }
    processed += last_window_events_;
  }
  if (!stop_requested_.load(std::memory_order_relaxed)) {
    // Nothing is due by the deadline: move every clock there.
    for (auto& sim : sims_) processed += sim->RunUntil(deadline);
  }
  return processed;
}

void Network::PartitionLoop() {
  uint64_t seen = 0;
  while (true) {
    const uint64_t window = AwaitChange(window_, seen);
    seen = window;
    if (quit_) return;
    partition_events_ = sims_[1]->RunUntil(TimePoint::FromNanoseconds(window_end_ns_));
    finished_.store(window, std::memory_order_release);
    finished_.notify_one();
  }
}

}  // namespace atp::sim
