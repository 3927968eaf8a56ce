#include "switch_emulator/daemon/switch_daemon.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "lib/runtime/adaptive_backoff.h"
#include "lib/runtime/clock.h"

namespace atp::switchd {
namespace {

using switch_emulator::Decision;
using switch_emulator::SwitchPipeline;
using switch_emulator::Verdict;
using transport::FrameRef;

constexpr size_t kPrefetchDistance = SwitchPipeline::kBurstPrefetchDistance;
constexpr uint32_t kMaxBurst = 256;
// Flush rounds at Stop, so frames taken just before are pushed out.
constexpr int kDrainRounds = 16;

uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t Load32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Ipv4Header: the frame's IPv4 header, or null when it is not IPv4 (or too short).
const uint8_t* Ipv4Header(const FrameRef& frame) {
  if (frame.length < wire::kIpv4Offset + wire::kIpv4HeaderBytes) return nullptr;
  if (Load16(frame.data + 12) != wire::kEtherTypeIpv4) return nullptr;
  const uint8_t* ip = frame.data + wire::kIpv4Offset;
  if ((ip[0] >> 4) != 4 || (ip[0] & 0x0F) < 5) return nullptr;
  return ip;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SwitchDaemon>> SwitchDaemon::Create(SwitchDaemonOptions options,
                                                                   std::vector<DaemonPort> ports) {
  if (options.max_burst < 1 || options.max_burst > kMaxBurst) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwitchDaemonOptions.max_burst: ", options.max_burst, " is not in 1..", kMaxBurst));
  }
  if (options.tx_attempts < 1) {
    return absl::InvalidArgumentError("SwitchDaemonOptions.tx_attempts: must be >= 1");
  }
  if (options.orphan_scan_budget < 1) {
    return absl::InvalidArgumentError("SwitchDaemonOptions.orphan_scan_budget: must be >= 1");
  }
  ATP_RETURN_IF_ERROR(options.polling.Validate("SwitchDaemonOptions.polling"));
  if (ports.empty()) return absl::InvalidArgumentError("SwitchDaemon: needs at least one port");
  std::vector<Port> owned;
  for (size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].device == nullptr || ports[i].device->num_queues() == 0 ||
        ports[i].device->num_queues() > transport::kMaxQueues) {
      return absl::InvalidArgumentError(
          absl::StrCat("SwitchDaemon: port ", i, " ('", ports[i].name, "') has no usable device"));
    }
    if (ports[i].device->base_port() != options.pipeline.base_port) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SwitchDaemon: port '", ports[i].name, "' uses base port ", ports[i].device->base_port(),
          ", the pipeline ", options.pipeline.base_port));
    }
    owned.push_back(Port{ports[i].name, ports[i].device, ports[i].device->num_queues(), {}});
  }
  const uint32_t limit = static_cast<uint32_t>(owned.size());
  if (options.routes.port_limit() > limit || options.multicast.port_limit() > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwitchDaemon: a route or multicast group names a port index >= ", limit));
  }
  if (!options.clock) options.clock = runtime::MonotonicNow;
  ATP_ASSIGN_OR_RETURN(SwitchPipeline pipeline, SwitchPipeline::Create(options.pipeline));
  return std::unique_ptr<SwitchDaemon>(
      new SwitchDaemon(std::move(options), std::move(owned), std::move(pipeline)));
}

SwitchDaemon::SwitchDaemon(SwitchDaemonOptions options, std::vector<Port> ports,
                           SwitchPipeline pipeline)
    : options_(std::move(options)), ports_(std::move(ports)), pipeline_(std::move(pipeline)) {
  started_ = options_.clock();
  rx_.resize(options_.max_burst);
  release_.resize(options_.max_burst);
  staging_.resize(ports_.size() * transport::kMaxQueues);
  for (Staging& s : staging_) s.frames.resize(options_.max_burst);
  touched_.reserve(staging_.size());
  held_.assign(staging_.size(), 0);
  snapshot_ = Collect();
}

SwitchDaemon::~SwitchDaemon() { Stop(); }

absl::Status SwitchDaemon::Start() {
  if (running()) return absl::FailedPreconditionError("SwitchDaemon: already running");
  stop_.store(false, std::memory_order_relaxed);
  running_.store(true, std::memory_order_release);
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void SwitchDaemon::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  thread_.join();
  running_.store(false, std::memory_order_release);
}

void SwitchDaemon::Run() {
  if (options_.on_thread_start) options_.on_thread_start();
  runtime::AdaptiveBackoff backoff(options_.polling);
  uint64_t served = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    const size_t work = PollRound(options_.clock());
    if (const uint64_t wanted = snapshot_requested_.load(std::memory_order_acquire);
        wanted != served) {
      SwitchdStats s = Collect();
      std::lock_guard<std::mutex> lock(snapshot_mu_);
      snapshot_ = std::move(s);
      snapshot_served_ = served = wanted;
      snapshot_cv_.notify_all();
    }
    if (work > 0) {
      backoff.OnWork();
      continue;
    }
    switch (backoff.OnIdle()) {
      case runtime::AdaptiveBackoff::Action::kSpin: runtime::CpuRelax(); break;
      case runtime::AdaptiveBackoff::Action::kYield: sched_yield(); break;
      case runtime::AdaptiveBackoff::Action::kSleep:
        std::this_thread::sleep_for(std::chrono::nanoseconds(backoff.sleep().ToNanoseconds()));
        break;
    }
  }
  for (int i = 0; i < kDrainRounds; ++i) FlushAll();
  {
    SwitchdStats s = Collect();
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    snapshot_ = std::move(s);
    snapshot_served_ = snapshot_requested_.load(std::memory_order_acquire);
    snapshot_cv_.notify_all();
  }
  if (options_.on_thread_stop) options_.on_thread_stop();
}

size_t SwitchDaemon::PollRound(TimePoint now) {
  ++poll_rounds_;
  size_t received = 0;
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    for (uint32_t q = 0; q < ports_[p].queues; ++q) {
      const size_t n = ports_[p].device->queue(q).RxBurst(rx_);
      if (n == 0) continue;
      received += n;
      ports_[p].counters.rx_frames += n;
      HandleBurst(p, n, now);
    }
  }
  FlushAll();
  pipeline_.ScanOrphans(now, options_.orphan_scan_budget);
  return received;
}

void SwitchDaemon::FlushAll() {
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    for (uint32_t q = 0; q < ports_[p].queues; ++q) {
      held_[Slot(p, q)] = static_cast<uint32_t>(ports_[p].device->queue(q).Flush());
    }
  }
}

void SwitchDaemon::HandleBurst(uint32_t in_port, size_t n, TimePoint now) {
  release_count_ = 0;
  for (size_t k = 0; k < n; ++k) {
    if (k + kPrefetchDistance < n) pipeline_.PrefetchAggregator(rx_[k + kPrefetchDistance].bytes());
    const FrameRef& frame = rx_[k];
    const Decision d = pipeline_.Process(frame.bytes(), now, DepthFor(in_port, frame));
    switch (d.verdict) {
      case Verdict::kAbsorbed:
        Release(frame);
        break;
      case Verdict::kMalformed:
        ++ports_[in_port].counters.rx_malformed;
        Release(frame);
        break;
      case Verdict::kMulticast:
        Multicast(in_port, frame, d.multicast_group);
        break;
      case Verdict::kToPs:
      case Verdict::kForward: {
        const uint8_t* ip = Ipv4Header(frame);
        if (ip == nullptr) {
          ++routing_.unroutable;
          Release(frame);
          break;
        }
        const uint32_t dst = Load32(ip + 16);
        if (d.verdict == Verdict::kForward && IsMulticastAddress(dst)) {
          Multicast(in_port, frame, dst);
        } else {
          Unicast(in_port, frame, dst);
        }
        break;
      }
    }
  }
  TransmitStaged();
  transport::ReleaseFrames({release_.data(), release_count_});
  release_count_ = 0;
}

uint32_t SwitchDaemon::DepthFor(uint32_t in_port, const FrameRef& frame) const {
  const uint8_t* ip = Ipv4Header(frame);
  if (ip == nullptr) return 0;
  const uint32_t dst = Load32(ip + 16);
  if (IsMulticastAddress(dst)) {
    uint32_t depth = 0;
    for (uint32_t port : options_.multicast.Ports(dst)) {
      if (port != in_port) depth = std::max(depth, held_[Slot(port, EgressQueue(frame, port))]);
    }
    return depth;
  }
  const std::optional<uint32_t> port = options_.routes.Lookup(dst);
  if (!port || *port == in_port) return 0;
  return held_[Slot(*port, EgressQueue(frame, *port))];
}

uint32_t SwitchDaemon::EgressQueue(const FrameRef& frame, uint32_t port) const {
  const uint32_t queues = ports_[port].queues;
  if (queues == 1) return 0;
  const uint8_t* ip = Ipv4Header(frame);
  if (ip == nullptr || ip[9] != wire::kIpProtocolUdp) return 0;
  const size_t udp = wire::kIpv4Offset + size_t{ip[0] & 0x0Fu} * 4;
  if (frame.length < udp + wire::kUdpHeaderBytes) return 0;
  const uint32_t queue = uint32_t{Load16(frame.data + udp + 2)} - options_.pipeline.base_port;
  if (queue >= transport::kMaxQueues) return 0;  // also ports below the base (wraps)
  return queue % queues;
}

void SwitchDaemon::Unicast(uint32_t in_port, const FrameRef& frame, uint32_t dst) {
  const std::optional<uint32_t> port = options_.routes.Lookup(dst);
  if (!port) {
    ++routing_.unroutable;
    Release(frame);
    return;
  }
  if (*port == in_port) {
    ++routing_.hairpin;
    Release(frame);
    return;
  }
  Stage(*port, EgressQueue(frame, *port), frame);
}

void SwitchDaemon::Multicast(uint32_t in_port, const FrameRef& frame, uint32_t group) {
  const std::span<const uint32_t> ports = options_.multicast.Ports(group);
  // The original goes to the last egress port; the others get copies.
  const auto last = std::find_if(ports.rbegin(), ports.rend(),
                                 [&](uint32_t p) { return p != in_port; });
  if (last == ports.rend()) {
    ++routing_.no_multicast_ports;
    Release(frame);
    return;
  }
  ++routing_.multicast;
  for (auto it = ports.begin(); it != last.base() - 1; ++it) {
    const uint32_t port = *it;
    if (port == in_port) continue;
    const uint32_t queue = EgressQueue(frame, port);
    transport::FramePool& pool = ports_[port].device->queue(queue).tx_pool();
    FrameRef copy;
    if (frame.length > pool.frame_capacity() || pool.AllocBurst({&copy, 1}) != 1) {
      ++ports_[port].counters.tx_dropped_no_buffer;
      continue;
    }
    std::memcpy(copy.data, frame.data, frame.length);
    copy.length = frame.length;
    ++ports_[port].counters.tx_copies;
    Stage(port, queue, copy);
  }
  Stage(*last, EgressQueue(frame, *last), frame);
}

void SwitchDaemon::Stage(uint32_t port, uint32_t queue, const FrameRef& frame) {
  const size_t slot = Slot(port, queue);
  Staging& s = staging_[slot];
  if (s.count == 0) touched_.push_back(slot);
  s.frames[s.count++] = frame;
  if (s.count == s.frames.size()) Transmit(slot);
}

void SwitchDaemon::TransmitStaged() {
  for (size_t slot : touched_) Transmit(slot);
  touched_.clear();
}

void SwitchDaemon::Transmit(size_t slot) {
  Staging& s = staging_[slot];
  if (s.count == 0) return;
  const uint32_t port = static_cast<uint32_t>(slot / transport::kMaxQueues);
  transport::Queue& queue = ports_[port].device->queue(static_cast<uint32_t>(slot % transport::kMaxQueues));
  size_t sent = 0;
  for (uint32_t attempt = 0; attempt < options_.tx_attempts && sent < s.count; ++attempt) {
    sent += queue.TxBurst({s.frames.data() + sent, s.count - sent});
    if (sent < s.count) held_[slot] = static_cast<uint32_t>(queue.Flush());
  }
  ports_[port].counters.tx_frames += sent;
  if (sent < s.count) {
    ports_[port].counters.tx_dropped_backpressure += s.count - sent;
    transport::ReleaseFrames({s.frames.data() + sent, s.count - sent});
  }
  s.count = 0;
}

void SwitchDaemon::Release(const FrameRef& frame) {
  // One rx frame is released at most once, so release_ (max_burst) never overflows.
  release_[release_count_++] = frame;
}

SwitchdStats SwitchDaemon::Collect() const {
  SwitchdStats s;
  s.name = options_.name;
  s.uptime_s = (options_.clock() - started_).ToSeconds();
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    PortStats ps;
    ps.name = ports_[p].name;
    ps.backend = std::string(ports_[p].device->backend());
    ps.queues = ports_[p].queues;
    ps.counters = ports_[p].counters;
    for (uint32_t q = 0; q < ports_[p].queues; ++q) {
      const transport::QueueStats t = ports_[p].device->queue(q).stats();
      ps.transport.rx_frames += t.rx_frames;
      ps.transport.rx_bad_frames += t.rx_bad_frames;
      ps.transport.rx_dropped += t.rx_dropped;
      ps.transport.tx_frames += t.tx_frames;
      ps.transport.tx_segmentation_jobs += t.tx_segmentation_jobs;
      ps.transport.tx_offloaded_segments += t.tx_offloaded_segments;
      ps.transport.tx_bad_frames += t.tx_bad_frames;
      ps.transport.tx_unroutable += t.tx_unroutable;
      ps.transport.tx_backpressure += t.tx_backpressure;
      ps.transport.tx_errors += t.tx_errors;
      ps.tx_held += held_[Slot(p, q)];
    }
    s.ports.push_back(std::move(ps));
  }
  s.pipeline = pipeline_.counters();
  s.aggregators_in_use = pipeline_.aggregators_in_use();
  s.aggregators = options_.pipeline.aggregator_count;
  s.routing = routing_;
  s.poll_rounds = poll_rounds_;
  return s;
}

SwitchdStats SwitchDaemon::Stats() {
  if (!running()) return Collect();
  std::unique_lock<std::mutex> lock(snapshot_mu_);
  const uint64_t ticket = snapshot_requested_.fetch_add(1, std::memory_order_acq_rel) + 1;
  snapshot_cv_.wait_for(lock, std::chrono::seconds(1),
                        [&] { return snapshot_served_ >= ticket; });
  return snapshot_;
}

}  // namespace atp::switchd
