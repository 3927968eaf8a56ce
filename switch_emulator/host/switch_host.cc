#include "switch_emulator/host/switch_host.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "lib/wire/byte_order.h"
#include "lib/wire/frame_view.h"

namespace atp::switchd {
namespace {

using switch_emulator::Decision;
using switch_emulator::SwitchPipeline;
using switch_emulator::Verdict;
using transport::FrameRef;
using wire::internal::LoadBig16;
using wire::internal::LoadBig32;

constexpr size_t kPrefetchDistance = SwitchPipeline::kBurstPrefetchDistance;
constexpr uint32_t kMaxBurst = 256;
constexpr uint8_t kEcnMask = 0x03;  // the ECN bits of the IPv4 TOS byte


// Ipv4Header: the frame's IPv4 header, or null when it is not IPv4 (or too short).
const uint8_t* Ipv4Header(const FrameRef& frame) {
  if (frame.length < wire::kIpv4Offset + wire::kIpv4HeaderBytes) return nullptr;
  if (LoadBig16(frame.data + 12) != wire::kEtherTypeIpv4) return nullptr;
  const uint8_t* ip = frame.data + wire::kIpv4Offset;
  if ((ip[0] >> 4) != 4 || (ip[0] & 0x0F) < 5) return nullptr;
  return ip;
}

}  // namespace

absl::Status SwitchHost::CheckPort(const HostPort& port, size_t index, uint16_t base_port) {
  if (port.device == nullptr || port.device->num_queues() == 0 ||
      port.device->num_queues() > transport::kMaxQueues) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwitchHost: port ", index, " ('", port.name, "') has no usable device"));
  }
  if (port.device->base_port() != base_port) {
    return absl::InvalidArgumentError(absl::StrCat("SwitchHost: port '", port.name,
                                                   "' uses base port ", port.device->base_port(),
                                                   ", the pipeline ", base_port));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SwitchHost>> SwitchHost::Create(SwitchHostOptions options,
                                                               std::vector<HostPort> ports) {
  ATP_ASSIGN_OR_RETURN(SwitchPipeline pipeline, SwitchPipeline::Create(options.pipeline));
  return Create(std::move(options), std::move(ports), std::move(pipeline));
}

absl::StatusOr<std::unique_ptr<SwitchHost>> SwitchHost::Create(SwitchHostOptions options,
                                                               std::vector<HostPort> ports,
                                                               SwitchPipeline pipeline) {
  if (options.max_burst < 1 || options.max_burst > kMaxBurst) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwitchHostOptions.max_burst: ", options.max_burst, " is not in 1..", kMaxBurst));
  }
  if (options.tx_attempts < 1) {
    return absl::InvalidArgumentError("SwitchHostOptions.tx_attempts: must be >= 1");
  }
  if (options.orphan_scan_budget < 1) {
    return absl::InvalidArgumentError("SwitchHostOptions.orphan_scan_budget: must be >= 1");
  }
  if (options.orphan_scan_interval < TimeDelta::Zero()) {
    return absl::InvalidArgumentError("SwitchHostOptions.orphan_scan_interval: must be >= 0");
  }
  std::vector<Port> owned;
  for (size_t i = 0; i < ports.size(); ++i) {
    ATP_RETURN_IF_ERROR(CheckPort(ports[i], i, options.pipeline.base_port));
    owned.push_back(Port{ports[i].name, ports[i].device, ports[i].device->num_queues(), {}});
  }
  const uint32_t limit = static_cast<uint32_t>(owned.size());
  if (options.routes.port_limit() > limit || options.multicast.port_limit() > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwitchHost: a route or multicast group names a port index >= ", limit));
  }
  if (options.admission.port_limit() > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwitchHost: an admission restriction names a port index >= ", limit));
  }
  return std::unique_ptr<SwitchHost>(
      new SwitchHost(std::move(options), std::move(owned), std::move(pipeline)));
}

SwitchHost::SwitchHost(SwitchHostOptions options, std::vector<Port> ports, SwitchPipeline pipeline)
    : options_(std::move(options)), ports_(std::move(ports)), pipeline_(std::move(pipeline)) {
  rx_.resize(options_.max_burst);
  release_.resize(options_.max_burst);
  staging_.resize(ports_.size() * transport::kMaxQueues);
  for (Staging& s : staging_) s.frames.resize(options_.max_burst);
  touched_.reserve(staging_.size());
  held_.assign(staging_.size(), 0);
  options_.admission.AddPorts(static_cast<uint32_t>(ports_.size()));
}

absl::Status SwitchHost::AddPort(HostPort port) {
  ATP_RETURN_IF_ERROR(CheckPort(port, ports_.size(), options_.pipeline.base_port));
  ports_.push_back(Port{port.name, port.device, port.device->num_queues(), {}});
  staging_.resize(ports_.size() * transport::kMaxQueues);
  for (Staging& s : staging_) s.frames.resize(options_.max_burst);
  touched_.reserve(staging_.size());
  held_.resize(staging_.size(), 0);
  options_.admission.AddPorts(static_cast<uint32_t>(ports_.size()));
  return absl::OkStatus();
}

std::vector<int> SwitchHost::WaitFds() const {
  std::vector<int> fds;
  for (const Port& port : ports_) {
    for (uint32_t q = 0; q < port.queues; ++q) {
      const int fd = port.device->queue(q).wait_fd();
      if (fd >= 0) fds.push_back(fd);
    }
  }
  return fds;
}

size_t SwitchHost::Step(TimePoint now, TimePoint* deadline) {
  ++poll_rounds_;
  size_t received = 0;
  for (uint32_t p = 0; p < ports_.size(); ++p) received += PollQueues(p, now);
  FlushAll();
  ScanOrphansIfDue(now);
  if (deadline != nullptr) *deadline = NextDeadline();
  return received;
}

size_t SwitchHost::PollPort(uint32_t port, TimePoint now) { return PollQueues(port, now); }

uint32_t SwitchHost::EgressDepth(uint32_t port, uint32_t queue, const FrameRef& frame) {
  const size_t slot = Slot(port, queue);
  if (options_.depth_at_each_frame) {
    held_[slot] = options_.frame_depth != nullptr
                      ? options_.frame_depth->Depth(port, queue, frame)
                      : static_cast<uint32_t>(ports_[port].device->queue(queue).Flush());
  }
  return held_[slot];
}

size_t SwitchHost::PollQueues(uint32_t p, TimePoint now) {
  size_t received = 0;
  for (uint32_t q = 0; q < ports_[p].queues; ++q) received += PollQueue(p, q, now);
  return received;
}

size_t SwitchHost::PollQueue(uint32_t port, uint32_t queue, TimePoint now) {
  const size_t n = ports_[port].device->queue(queue).RxBurst(rx_);
  if (n == 0) return 0;
  ports_[port].counters.rx_frames += n;
  HandleBurst(port, n, now);
  return n;
}

TimePoint SwitchHost::NextDeadline() const {
  if (pipeline_.aggregators_in_use() == 0) return TimePoint::Infinite();
  return next_scan_;
}

bool SwitchHost::ScanOrphansIfDue(TimePoint now) {
  if (now < next_scan_) return false;
  pipeline_.ScanOrphans(now, OrphanScanBudget(now - last_scan_));
  last_scan_ = now;
  next_scan_ = now + options_.orphan_scan_interval;
  return true;
}

size_t SwitchHost::OrphanScanBudget(TimeDelta since_last) const {
  const size_t most = options_.orphan_scan_budget;
  const TimeDelta timeout = pipeline_.orphan_timeout();
  if (!options_.orphan_scan_spread || timeout.IsInfinite()) return most;
  return std::min(most, ShareOfPass(pipeline_.aggregators().size(), since_last, timeout / 4));
}

void SwitchHost::FlushAll() {
  for (uint32_t p = 0; p < ports_.size(); ++p) {
    for (uint32_t q = 0; q < ports_[p].queues; ++q) {
      held_[Slot(p, q)] = static_cast<uint32_t>(ports_[p].device->queue(q).Flush());
    }
  }
}

// Inline, before its one caller: a call per frame cost as much as the
// memo's check (bench/RESULTS.md, "Trims on the fabric thread").
inline uint32_t SwitchHost::DepthFor(uint32_t in_port, const FrameRef& frame,
                                     uint32_t frame_queue, LookedUp* looked_up) {
  const uint8_t* ip = Ipv4Header(frame);
  if (ip == nullptr) return 0;
  const uint32_t dst = LoadBig32(ip + 16);
  const DepthMemo& memo = depth_memo_;
  if (memo.valid && memo.dst == dst && memo.in_port == in_port && memo.frame_queue == frame_queue)
      [[likely]] {
    *looked_up = memo.looked_up;
    return memo.depth;
  }
  return LookUpDepth(in_port, dst, frame, frame_queue, looked_up);
}

void SwitchHost::HandleBurst(uint32_t in_port, size_t n, TimePoint now) {
  release_count_ = 0;
  depth_memo_.valid = false;
  // A burst of one frame: each copy leaves at once (one TxBurst per egress
  // queue, in the order staging would have sent them), without staging.
  transmit_at_once_ = n == 1;
  const bool check_ingress = options_.admission.active();
  for (size_t k = 0; k < n; ++k) {
    if (k + kPrefetchDistance < n) pipeline_.PrefetchAggregator(rx_[k + kPrefetchDistance].bytes());
    const FrameRef& frame = rx_[k];
    if (check_ingress) {
      const IngressRefusal refusal =
          options_.admission.Check(in_port, frame.bytes(), options_.pipeline.base_port);
      if (refusal != IngressRefusal::kAdmitted) [[unlikely]] {
        PortCounters& c = ports_[in_port].counters;
        ++(refusal == IngressRefusal::kParameterPort ? c.rx_refused_parameter_port
                                                     : c.rx_refused_gradient_port);
        Release(frame);
        continue;
      }
    }
    // The pipeline rewrites neither addresses nor ports: the queue the frame
    // names holds for its depth and for its routing.
    const uint32_t frame_queue = FrameQueue(frame);
    if (options_.frame_depth != nullptr) options_.frame_depth->Handling(frame);
    LookedUp looked_up;
    const uint32_t depth = DepthFor(in_port, frame, frame_queue, &looked_up);
    const Decision d = pipeline_.Process(frame.bytes(), now, depth);
    switch (d.verdict) {
      case Verdict::kAbsorbed:
        Release(frame);
        break;
      case Verdict::kMalformed:
        ++ports_[in_port].counters.rx_malformed;
        Release(frame);
        break;
      case Verdict::kMulticast:
        Multicast(in_port, frame, frame_queue, d.multicast_group, looked_up);
        break;
      case Verdict::kToPs:
      case Verdict::kForward: {
        if (d.verdict == Verdict::kForward) MarkForwarded(frame, depth);
        const uint8_t* ip = Ipv4Header(frame);
        if (ip == nullptr) {
          ++routing_.unroutable;
          Release(frame);
          break;
        }
        const uint32_t dst = LoadBig32(ip + 16);
        if (d.verdict == Verdict::kForward && IsMulticastAddress(dst)) {
          Multicast(in_port, frame, frame_queue, dst, looked_up);
        } else if (looked_up.kind == LookedUp::Kind::kUnicast && looked_up.dst == dst) {
          Unicast(in_port, frame, frame_queue, looked_up.port);
        } else {
          Unicast(in_port, frame, frame_queue, route_cache_.LookupPort(options_.routes, dst));
        }
        break;
      }
    }
  }
  TransmitStaged();
  transport::ReleaseFrames({release_.data(), release_count_});
  release_count_ = 0;
}

uint32_t SwitchHost::LookUpDepth(uint32_t in_port, uint32_t dst, const FrameRef& frame,
                                 uint32_t frame_queue, LookedUp* looked_up) {
  uint32_t depth = 0;
  if (IsMulticastAddress(dst)) {
    *looked_up =
        LookedUp{LookedUp::Kind::kGroup, dst, RouteTable::kNoPort, options_.multicast.Ports(dst)};
    for (uint32_t port : looked_up->group_ports) {
      if (port != in_port && port < ports_.size()) {
        depth = std::max(depth, EgressDepth(port, EgressQueue(frame_queue, port), frame));
      }
    }
  } else {
    const uint32_t port = route_cache_.LookupPort(options_.routes, dst);
    *looked_up = LookedUp{LookedUp::Kind::kUnicast, dst, port, {}};
    if (port != RouteTable::kNoPort && port != in_port && port < ports_.size()) {
      depth = EgressDepth(port, EgressQueue(frame_queue, port), frame);
    }
  }
  depth_memo_ = DepthMemo{true, in_port, dst, frame_queue, *looked_up, depth};
  return depth;
}

uint32_t SwitchHost::FrameQueue(const FrameRef& frame) const {
  const uint8_t* ip = Ipv4Header(frame);
  if (ip == nullptr || ip[9] != wire::kIpProtocolUdp) return 0;
  const size_t udp = wire::kIpv4Offset + size_t{ip[0] & 0x0Fu} * 4;
  if (frame.length < udp + wire::kUdpHeaderBytes) return 0;
  const uint32_t queue = uint32_t{LoadBig16(frame.data + udp + 2)} - options_.pipeline.base_port;
  if (queue >= transport::kMaxQueues) return 0;  // also ports below the base (wraps)
  return queue;
}

void SwitchHost::MarkForwarded(const FrameRef& frame, uint32_t depth) {
  if (depth <= options_.pipeline.ecn_threshold) return;
  if (Ipv4Header(frame) == nullptr) return;
  wire::FrameView view(frame.data);
  const uint8_t ecn = view.ip_tos() & kEcnMask;
  if (ecn == 0 || ecn == kEcnMask) return;  // not ECN-capable, or already CE
  view.MarkCongestionExperienced();
  ++routing_.ce_marked;
}

void SwitchHost::Unicast(uint32_t in_port, const FrameRef& frame, uint32_t frame_queue,
                         uint32_t port) {
  if (port == RouteTable::kNoPort || port >= ports_.size()) {
    ++routing_.unroutable;
    Release(frame);
    return;
  }
  if (port == in_port) {
    ++routing_.hairpin;
    Release(frame);
    return;
  }
  Stage(port, EgressQueue(frame_queue, port), frame);
}

void SwitchHost::Multicast(uint32_t in_port, const FrameRef& frame, uint32_t frame_queue,
                           uint32_t group, const LookedUp& looked_up) {
  const std::span<const uint32_t> ports =
      looked_up.kind == LookedUp::Kind::kGroup && looked_up.dst == group
          ? looked_up.group_ports
          : options_.multicast.Ports(group);
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
    const uint32_t queue = EgressQueue(frame_queue, port);
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
  Stage(*last, EgressQueue(frame_queue, *last), frame);
}

void SwitchHost::Stage(uint32_t port, uint32_t queue, const FrameRef& frame) {
  const size_t slot = Slot(port, queue);
  if (transmit_at_once_) {
    Send(port, queue, {&frame, 1});
    return;
  }
  Staging& s = staging_[slot];
  if (s.count == 0) touched_.push_back(slot);
  s.frames[s.count++] = frame;
  if (s.count == s.frames.size()) Transmit(slot);
}

void SwitchHost::TransmitStaged() {
  for (size_t slot : touched_) Transmit(slot);
  touched_.clear();
}

void SwitchHost::Transmit(size_t slot) {
  Staging& s = staging_[slot];
  if (s.count == 0) return;
  Send(static_cast<uint32_t>(slot / transport::kMaxQueues),
       static_cast<uint32_t>(slot % transport::kMaxQueues), {s.frames.data(), s.count});
  s.count = 0;
}

void SwitchHost::Send(uint32_t port, uint32_t queue_index, std::span<const FrameRef> frames) {
  depth_memo_.valid = false;  // what it sends deepens queues
  transport::Queue& queue = ports_[port].device->queue(queue_index);
  size_t sent = 0;
  for (uint32_t attempt = 0; attempt < options_.tx_attempts && sent < frames.size(); ++attempt) {
    sent += queue.TxBurst(frames.subspan(sent));
    if (sent < frames.size()) held_[Slot(port, queue_index)] = static_cast<uint32_t>(queue.Flush());
  }
  ports_[port].counters.tx_frames += sent;
  if (sent < frames.size()) {
    ports_[port].counters.tx_dropped_backpressure += frames.size() - sent;
    transport::ReleaseFrames(frames.subspan(sent));
  }
}

void SwitchHost::Release(const FrameRef& frame) {
  // One rx frame is released at most once, so release_ (max_burst) never overflows.
  release_[release_count_++] = frame;
}

SwitchdStats SwitchHost::Collect() const {
  SwitchdStats s;
  s.name = options_.name;
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
  for (const switch_emulator::JobConfig& job : options_.pipeline.jobs) {
    s.jobs.push_back({job.job, pipeline_.job_counters(job.job)});
  }
  s.aggregators_in_use = pipeline_.aggregators_in_use();
  s.aggregators = options_.pipeline.aggregator_count;
  s.routing = routing_;
  s.poll_rounds = poll_rounds_;
  return s;
}

}  // namespace atp::switchd
