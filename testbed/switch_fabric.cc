#include "testbed/switch_fabric.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "lib/wire/byte_order.h"

namespace atp::testbed {
namespace {

using switch_emulator::JobConfig;
using switch_emulator::JobLevels;
using switch_emulator::PipelineConfig;
using switch_emulator::SwitchPipeline;
using transport::FrameRef;
using wire::internal::LoadBig32;
using transport::kFrameBytes;


constexpr size_t kSrcIpOffset = wire::kIpv4Offset + 12;
constexpr size_t kDstIpOffset = wire::kIpv4Offset + 16;
// Multicast copies one frame can need at once (a group's ports, every switch).
constexpr uint32_t kCopyFrames = 1024;

uint64_t LossThreshold(double loss_rate) {
  if (!(loss_rate > 0)) return 0;
  return static_cast<uint64_t>(std::ldexp(std::min(loss_rate, 1.0), 64) - 1);
}

}  // namespace

// BorrowedPool: the "pool" of the frame the wire hands to Process: the wire
// owns that buffer, so releasing it (a switch absorbed or dropped it) is
// nothing to do.
class SwitchFabric::BorrowedPool final : public transport::FramePool {
 public:
  size_t AllocBurst(std::span<FrameRef>) override { return 0; }
  void FreeBurst(std::span<const FrameRef>) override {}
  size_t free_count() const override { return 1; }
  size_t capacity() const override { return 1; }
  size_t frame_capacity() const override { return kFrameBytes; }
  size_t headroom() const override { return 0; }
};

// Port: one port of a fabric switch, as a transport device of kMaxQueues
// queues (so the host's egress queue is the frame's queue). Frames arrive in
// queue 0's inbox; what a queue's TxBurst takes goes to the fabric (Sent);
// Flush answers the depth the port leads to (Depth).
class SwitchFabric::Port final : public transport::Device {
 public:
  enum class Kind : uint8_t { kEndpoint, kPeer, kPs };

  Port(SwitchFabric* fabric, uint32_t sw, uint32_t index, uint16_t base_port)
      : fabric_(fabric), sw_(sw), index_(index), base_port_(base_port) {
    for (uint32_t q = 0; q < transport::kMaxQueues; ++q) queues_[q].Init(this, q);
  }

  std::string_view backend() const override { return "fabric"; }
  const transport::DeviceAddress& address() const override { return address_; }
  uint16_t base_port() const override { return base_port_; }
  uint32_t num_queues() const override { return transport::kMaxQueues; }
  transport::Queue& queue(uint32_t index) override { return queues_[index]; }

  Kind kind = Kind::kPs;
  wire::Ipv4Address endpoint;  // kEndpoint: the node behind the port
  // kEndpoint: its endpoint on the fabric's current wire, once found
  // (SwitchFabric::EndpointOf; reset with the wire).
  mutable transport::EndpointId endpoint_id = kNoEndpoint;
  uint32_t peer_sw = 0;        // kPeer: the other end
  uint32_t peer_port = 0;
  std::vector<FrameRef> inbox;
  uint32_t sw() const { return sw_; }
  uint32_t index() const { return index_; }

 private:
  class Q final : public transport::Queue {
   public:
    void Init(Port* port, uint32_t index) {
      port_ = port;
      index_ = index;
    }
    uint32_t index() const override { return index_; }
    const transport::QueueCapabilities& capabilities() const override { return caps_; }
    size_t RxBurst(std::span<FrameRef> frames) override {
      if (index_ != 0 || port_->inbox.empty()) return 0;
      const size_t n = std::min(frames.size(), port_->inbox.size());
      std::copy_n(port_->inbox.begin(), n, frames.begin());
      port_->inbox.erase(port_->inbox.begin(), port_->inbox.begin() + static_cast<ptrdiff_t>(n));
      return n;
    }
    size_t TxBurst(std::span<const FrameRef> frames) override {
      for (const FrameRef& frame : frames) port_->fabric_->Sent(*port_, frame);
      return frames.size();
    }
    // The switch host never segments; a job here is refused whole.
    size_t TxSegmented(const transport::SegmentationJob& job) override { return job.size(); }
    size_t Flush() override { return port_->fabric_->Depth(*port_, index_); }
    transport::FramePool& rx_pool() override { return *port_->fabric_->copies_; }
    transport::FramePool& tx_pool() override { return *port_->fabric_->copies_; }
    transport::QueueStats stats() const override { return {}; }

   private:
    Port* port_ = nullptr;
    uint32_t index_ = 0;
    transport::QueueCapabilities caps_;
  };

  SwitchFabric* fabric_;
  uint32_t sw_;
  uint32_t index_;
  uint16_t base_port_;
  transport::DeviceAddress address_;
  std::array<Q, transport::kMaxQueues> queues_;
};

absl::StatusOr<std::unique_ptr<SwitchFabric>> SwitchFabric::Create(
    const SwitchFabricOptions& options) {
  if (!(options.loss_rate >= 0 && options.loss_rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwitchFabricOptions.loss_rate: ", options.loss_rate, " is not in [0, 1)"));
  }
  for (size_t j = 0; j < options.jobs.size(); ++j) {
    if (options.jobs[j].racks.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SwitchFabricOptions.jobs[", j, "].racks: needs at least one rack"));
    }
  }
  auto fabric = std::unique_ptr<SwitchFabric>(new SwitchFabric(options));
  ATP_RETURN_IF_ERROR(fabric->Build());
  return fabric;
}

SwitchFabric::SwitchFabric(const SwitchFabricOptions& options)
    : options_(options),
      borrowed_(std::make_unique<BorrowedPool>()),
      rng_(options.seed),
      loss_threshold_(LossThreshold(options.loss_rate)) {
  size_t workers = 0;
  for (const FabricJob& job : options.jobs) {
    group_racks_[job.group.value] = job.racks;
    for (const std::vector<wire::Ipv4Address>& rack : job.racks) workers += rack.size();
  }
  endpoints_.reserve(workers);
  output_.reserve(workers + 1);
}

// The hosts go before their ports: they hold pointers to them.
SwitchFabric::~SwitchFabric() {
  for (Switch& s : switches_) s.host.reset();
}

absl::Status SwitchFabric::AddSwitch(std::vector<JobConfig> jobs) {
  switchd::SwitchHostOptions host;
  host.name = absl::StrCat("fabric", switches_.size());
  host.pipeline.aggregator_count = options_.aggregator_count;
  host.pipeline.orphan_timeout = options_.orphan_timeout;
  host.pipeline.ecn_threshold = options_.ecn_threshold;
  host.pipeline.base_port = options_.base_port;
  host.pipeline.jobs = std::move(jobs);
  host.depth_at_each_frame = true;  // Flush only reads a backlog here
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<switchd::SwitchHost> created,
                       switchd::SwitchHost::Create(std::move(host), {}));
  switches_.push_back(Switch{std::move(created), {}});
  return absl::OkStatus();
}

uint32_t SwitchFabric::AddPort(uint32_t sw, std::string name) {
  Switch& s = switches_[sw];
  const uint32_t index = static_cast<uint32_t>(s.ports.size());
  s.ports.push_back(std::make_unique<Port>(this, sw, index, options_.base_port));
  // A fabric port is always a valid device for its host.
  (void)s.host->AddPort({std::move(name), s.ports.back().get()});
  return index;
}

void SwitchFabric::Link(uint32_t a, uint32_t b, uint32_t* a_port, uint32_t* b_port) {
  *a_port = AddPort(a, absl::StrCat("to", b));
  *b_port = AddPort(b, absl::StrCat("to", a));
  Port& pa = *switches_[a].ports[*a_port];
  Port& pb = *switches_[b].ports[*b_port];
  pa.kind = pb.kind = Port::Kind::kPeer;
  pa.peer_sw = b;
  pa.peer_port = *b_port;
  pb.peer_sw = a;
  pb.peer_port = *a_port;
}

absl::Status SwitchFabric::Build() {
  ATP_ASSIGN_OR_RETURN(copies_, transport::HeapFramePool::Create({.frames = kCopyFrames}));
  if (options_.aggregation == FabricAggregation::kNone) return absl::OkStatus();
  size_t racks = 0;
  for (const FabricJob& job : options_.jobs) racks = std::max(racks, job.racks.size());
  const bool forward_only = options_.aggregation == FabricAggregation::kForwardOnly;
  const bool two_level = options_.aggregation == FabricAggregation::kTwoLevel || forward_only;

  // Switches: a ToR per rack then the PS's (two levels), or one for all.
  auto jobs_at = [&](JobLevels levels, size_t rack) {
    std::vector<JobConfig> jobs;
    for (const FabricJob& job : options_.jobs) {
      if (forward_only) break;
      if (levels == JobLevels::kLevel1 && rack >= job.racks.size()) continue;
      jobs.push_back(JobConfig{.job = job.job_id, .levels = levels,
                               .multicast_group = job.group.value});
    }
    return jobs;
  };
  if (two_level) {
    for (size_t r = 0; r < racks; ++r) ATP_RETURN_IF_ERROR(AddSwitch(jobs_at(JobLevels::kLevel1, r)));
    ATP_RETURN_IF_ERROR(AddSwitch(jobs_at(JobLevels::kLevel2, 0)));
  } else {
    ATP_RETURN_IF_ERROR(AddSwitch(jobs_at(JobLevels::kBoth, 0)));
  }
  ps_switch_ = static_cast<uint32_t>(switches_.size() - 1);
  auto tor = [&](size_t rack) { return two_level ? static_cast<uint32_t>(rack) : ps_switch_; };

  // Uplinks (two levels): ToR r <-> the PS's ToR; the ToR's default route.
  std::vector<uint32_t> down(racks, 0);  // the PS ToR's port toward rack r
  for (size_t r = 0; two_level && r < racks; ++r) {
    uint32_t up = 0;
    Link(tor(r), ps_switch_, &up, &down[r]);
    ATP_RETURN_IF_ERROR(switches_[tor(r)].host->routes().Set({0}, 0, up));
  }
  // Toward the parameter servers: the wire routes from there.
  ps_port_ = AddPort(ps_switch_, "ps");
  ATP_RETURN_IF_ERROR(switches_[ps_switch_].host->routes().Set({0}, 0, ps_port_));

  // Workers: a port each at their ToR, a route to it (and to their rack from
  // the PS's ToR), group membership for their job.
  for (const FabricJob& job : options_.jobs) {
    for (size_t r = 0; r < job.racks.size(); ++r) {
      const uint32_t sw = tor(r);
      for (const wire::Ipv4Address& ip : job.racks[r]) {
        auto it = worker_port_.find(ip.value);
        if (it == worker_port_.end()) {
          const uint32_t port = AddPort(sw, ip.ToString());
          Port& p = *switches_[sw].ports[port];
          p.kind = Port::Kind::kEndpoint;
          p.endpoint = ip;
          it = worker_port_.emplace(ip.value, std::make_pair(sw, port)).first;
          ATP_RETURN_IF_ERROR(switches_[sw].host->routes().Set(ip, 32, port));
          if (two_level) {
            ATP_RETURN_IF_ERROR(switches_[ps_switch_].host->routes().Set(ip, 32, down[r]));
          }
        }
        ATP_RETURN_IF_ERROR(switches_[sw].host->multicast().AddMember(job.group, it->second.second));
      }
      if (two_level) {
        ATP_RETURN_IF_ERROR(switches_[ps_switch_].host->multicast().AddMember(job.group, down[r]));
      }
    }
  }
  return absl::OkStatus();
}

void SwitchFabric::SetLossRate(double loss_rate) {
  std::lock_guard<std::mutex> lock(mu_);
  loss_threshold_ = LossThreshold(loss_rate);
}

void SwitchFabric::SetDeliveryFilter(DeliveryFilter filter) {
  std::lock_guard<std::mutex> lock(mu_);
  filter_ = std::move(filter);
}

bool SwitchFabric::Filtered(wire::Ipv4Address to, const uint8_t* frame) {
  if (!filter_) return false;
  const wire::AtpHeader header = wire::DecodeHeader(
      std::span<const uint8_t, wire::kAtpHeaderBytes>(frame + wire::kAtpOffset,
                                                      wire::kAtpHeaderBytes));
  if (filter_(to, header)) return false;
  ++counters_.filtered;
  return true;
}

bool SwitchFabric::Lose() {
  if (loss_threshold_ == 0) return false;
  // splitmix64
  uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  if (z >= loss_threshold_) return false;
  ++counters_.lost;
  return true;
}

size_t SwitchFabric::Depth(const Port& port, uint32_t queue) const {
  // An endpoint's port: its receive backlog; any other: the backlog of the
  // entering frame's destination (the queue it is bound for beyond).
  const transport::EndpointId endpoint = port.kind == Port::Kind::kEndpoint
                                             ? EndpointOf(port)
                                             : EndpointFor(LoadBig32(current_ + kDstIpOffset));
  return endpoint != kNoEndpoint ? wire_->RxBacklog(endpoint, queue) : 0;
}

transport::EndpointId SwitchFabric::EndpointFor(uint32_t ipv4) const {
  // Fibonacci hashing into the direct-mapped cache.
  CachedEndpoint& cached = endpoint_cache_[(ipv4 * 0x9E3779B9u) >> (32 - kEndpointCacheBits)];
  if (cached.valid && cached.ipv4 == ipv4) return cached.endpoint;
  const std::optional<transport::EndpointId> endpoint =
      wire_->FindEndpoint(wire::Ipv4Address{ipv4});
  // Only hits are kept: an address may gain its endpoint later (endpoints are
  // added before traffic, but a cluster's are added one by one), never lose it.
  if (!endpoint) return kNoEndpoint;
  cached = CachedEndpoint{ipv4, *endpoint, true};
  return *endpoint;
}

transport::EndpointId SwitchFabric::EndpointOf(const Port& port) const {
  if (port.endpoint_id == kNoEndpoint) port.endpoint_id = EndpointFor(port.endpoint.value);
  return port.endpoint_id;
}

void SwitchFabric::Emit(std::span<uint8_t, kFrameBytes> frame, const FrameRef& out) {
  // The wire sends one frame to every endpoint: the fabric's output is the
  // bytes of the first copy that left (the original's, if it did, stay in place).
  if (out.data != frame.data() && !emitted_) std::memcpy(frame.data(), out.data, kFrameBytes);
  emitted_ = true;
}

void SwitchFabric::Sent(const Port& port, const FrameRef& frame) {
  if (Lose()) {
    transport::ReleaseFrames({&frame, 1});
    return;
  }
  switch (port.kind) {
    case Port::Kind::kPeer:
      switches_[port.peer_sw].ports[port.peer_port]->inbox.push_back(frame);
      pending_.push_back(Arrival{port.peer_sw, port.peer_port});
      return;
    case Port::Kind::kEndpoint:
      if (Filtered(port.endpoint, frame.data)) break;
      if (const transport::EndpointId e = EndpointOf(port); e != kNoEndpoint) {
        endpoints_.push_back(e);
        output_.push_back(frame);
        return;
      }
      break;
    case Port::Kind::kPs:
      routed_ = true;
      output_.push_back(frame);
      return;
  }
  transport::ReleaseFrames({&frame, 1});
}

transport::WireDecision SwitchFabric::Run(std::span<uint8_t, kFrameBytes> frame, uint32_t sw,
                                          uint32_t port, TimePoint now) {
  using transport::WireAction;
  using transport::WireDecision;
  endpoints_.clear();
  output_.clear();
  routed_ = false;
  emitted_ = false;
  switches_[sw].ports[port]->inbox.push_back(
      FrameRef{frame.data(), borrowed_.get(), 0, static_cast<uint32_t>(kFrameBytes)});
  switches_[sw].host->PollQueue(port, 0, now);  // fabric ports receive on queue 0
  // Then breadth first: each poll may put frames in other switches' inboxes.
  for (size_t i = 0; i < pending_.size(); ++i) {
    const Arrival a = pending_[i];
    switches_[a.sw].host->PollQueue(a.port, 0, now);  // fabric ports receive on queue 0
  }
  pending_.clear();
  // The original first (its bytes are in place), then the copies', in order.
  const auto original = std::find_if(output_.begin(), output_.end(),
                                     [&](const FrameRef& f) { return f.data == frame.data(); });
  if (original != output_.end()) std::rotate(output_.begin(), original, original + 1);
  for (const FrameRef& out : output_) Emit(frame, out);
  transport::ReleaseFrames(output_);
  if (!endpoints_.empty()) return WireDecision{WireAction::kSendTo, endpoints_};
  if (routed_) return WireDecision{WireAction::kRoute, {}};
  ++counters_.absorbed;
  return WireDecision{WireAction::kDrop, {}};
}

transport::WireDecision SwitchFabric::Process(std::span<uint8_t, kFrameBytes> frame,
                                              transport::EndpointId /*from*/, TimePoint now,
                                              const transport::LoopbackWire& wire) {
  using transport::WireAction;
  using transport::WireDecision;
  // mu_ is held: BeginBurst took it.
  ++counters_.frames;
  if (options_.wipe_every_frames > 0 && counters_.frames % options_.wipe_every_frames == 0) {
    for (Switch& s : switches_) s.host->pipeline().WipeState();
    ++counters_.wipes;
  }
  if (!wire::IsAtpFrame(frame, options_.base_port)) return WireDecision{WireAction::kRoute, {}};
  if (wire_ != &wire) {  // endpoint ids are per wire
    endpoint_cache_ = {};
    for (Switch& s : switches_) {
      for (const std::unique_ptr<Port>& p : s.ports) p->endpoint_id = kNoEndpoint;
    }
    wire_ = &wire;
  }
  current_ = frame.data();
  const uint8_t* bytes = frame.data();

  // A parameter packet: toward the job's group.
  if (auto group = group_racks_.find(LoadBig32(bytes + kDstIpOffset));
      group != group_racks_.end()) {
    if (Lose()) return WireDecision{WireAction::kDrop, {}};
    ++counters_.multicast;
    if (!switches_.empty()) return Run(frame, ps_switch_, ps_port_, now);
    // No switch: replicated to the workers like a multicast router.
    endpoints_.clear();
    for (const std::vector<wire::Ipv4Address>& rack : group->second) {
      for (const wire::Ipv4Address& ip : rack) {
        if (Lose() || Filtered(ip, bytes)) continue;
        if (const transport::EndpointId e = EndpointFor(ip.value); e != kNoEndpoint) {
          endpoints_.push_back(e);
        }
      }
    }
    return WireDecision{WireAction::kSendTo, endpoints_};
  }

  // A gradient (or anything else) from a worker: up through the switches.
  if (auto at = worker_port_.find(LoadBig32(bytes + kSrcIpOffset)); at != worker_port_.end()) {
    if (Lose()) return WireDecision{WireAction::kDrop, {}};
    return Run(frame, at->second.first, at->second.second, now);
  }
  if (Lose()) return WireDecision{WireAction::kDrop, {}};
  return WireDecision{WireAction::kRoute, {}};
}

FabricStats SwitchFabric::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  FabricStats s = counters_;
  for (const Switch& sw : switches_) {
    s.switches.push_back(sw.host->pipeline().counters());
    s.malformed += sw.host->pipeline().counters().malformed;
  }
  return s;
}

void SwitchFabric::WipeSwitches() {
  std::lock_guard<std::mutex> lock(mu_);
  for (Switch& s : switches_) s.host->pipeline().WipeState();
  ++counters_.wipes;
}

}  // namespace atp::testbed
