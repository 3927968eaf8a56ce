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

// BorrowedPool: the "pool" of the frames the wire hands to ProcessBurst: the
// wire owns those buffers, so releasing one (a switch absorbed or dropped
// it) is nothing to do. A frame's handle is its index in the burst.
class SwitchFabric::BorrowedPool final : public transport::FramePool {
 public:
  size_t AllocBurst(std::span<FrameRef>) override { return 0; }
  void FreeBurst(std::span<const FrameRef>) override {}
  size_t free_count() const override { return 0; }
  size_t capacity() const override { return 0; }
  size_t frame_capacity() const override { return kFrameBytes; }
  size_t headroom() const override { return 0; }
};

// CopyPool: what the hosts take multicast copies from: copies_, each copy
// tagged with the entering frame the host is handling (the one it last
// named through DepthProbe::Handling), so that a copy leaving the fabric
// counts for its entering frame. The copies go back to
// copies_ directly.
class SwitchFabric::CopyPool final : public transport::FramePool {
 public:
  explicit CopyPool(SwitchFabric* fabric) : fabric_(fabric) {}
  size_t AllocBurst(std::span<FrameRef> frames) override {
    const size_t n = fabric_->copies_->AllocBurst(frames);
    for (size_t i = 0; i < n; ++i) fabric_->copy_origin_[frames[i].handle] = fabric_->in_hand_;
    return n;
  }
  void FreeBurst(std::span<const FrameRef> frames) override { fabric_->copies_->FreeBurst(frames); }
  size_t free_count() const override { return fabric_->copies_->free_count(); }
  size_t capacity() const override { return fabric_->copies_->capacity(); }
  size_t frame_capacity() const override { return fabric_->copies_->frame_capacity(); }
  size_t headroom() const override { return fabric_->copies_->headroom(); }

 private:
  SwitchFabric* const fabric_;
};

// DepthProbe: a switch's SwitchHostOptions::frame_depth: the frame its host
// handles (for CopyPool's tags) and the fabric's Depth for its ports.
class SwitchFabric::DepthProbe final : public switchd::FrameDepthSource {
 public:
  DepthProbe(SwitchFabric* fabric, uint32_t sw) : fabric_(fabric), sw_(sw) {}
  void Handling(const FrameRef& frame) override { fabric_->in_hand_ = fabric_->OriginOf(frame); }
  uint32_t Depth(uint32_t port, uint32_t queue, const FrameRef& frame) override {
    return fabric_->Depth(*fabric_->switches_[sw_].ports[port], queue, frame);
  }

 private:
  SwitchFabric* const fabric_;
  const uint32_t sw_;
};

// DecisionOutput: ProcessBurst's output for Process's one frame, turned back
// into a WireDecision: the endpoints delivered to, or kRoute, or kDrop; the
// bytes of the first copy that left, put into the frame once the burst is
// done (the frame may still be inside the fabric until then).
class SwitchFabric::DecisionOutput final : public transport::WireOutput {
 public:
  explicit DecisionOutput(std::vector<transport::EndpointId>* endpoints) : endpoints_(endpoints) {
    endpoints_->clear();
  }
  void Deliver(transport::EndpointId endpoint, const uint8_t* frame) override {
    Keep(frame);
    endpoints_->push_back(endpoint);
  }
  void Route(const uint8_t* frame) override {
    Keep(frame);
    routed_ = true;
  }
  void Dropped(uint64_t) override {}

  transport::WireDecision Finish(std::span<uint8_t, kFrameBytes> frame) const {
    using transport::WireAction;
    if (kept_) std::memcpy(frame.data(), first_.data(), kFrameBytes);
    if (!endpoints_->empty()) return {WireAction::kSendTo, *endpoints_};
    return {routed_ ? WireAction::kRoute : WireAction::kDrop, {}};
  }

 private:
  void Keep(const uint8_t* frame) {
    if (kept_) return;
    std::memcpy(first_.data(), frame, kFrameBytes);
    kept_ = true;
  }

  std::vector<transport::EndpointId>* const endpoints_;
  std::array<uint8_t, kFrameBytes> first_;
  bool kept_ = false;
  bool routed_ = false;
};

// Port: one port of a fabric switch, as a transport device of kMaxQueues
// queues (so the host's egress queue is the frame's queue). Frames arrive in
// queue 0's inbox, a FIFO; what a queue's TxBurst takes goes to the fabric
// (Sent). The host asks the fabric for a frame's ECN depth (DepthProbe), not
// Flush: nothing ever waits in a port.
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
  // inbox: frames waiting for the host's RxBurst, from inbox_head on.
  std::vector<FrameRef> inbox;
  size_t inbox_head = 0;
  bool has_frames() const { return inbox_head < inbox.size(); }
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
      Port& p = *port_;
      if (index_ != 0 || !p.has_frames()) return 0;
      const size_t n = std::min(frames.size(), p.inbox.size() - p.inbox_head);
      std::copy_n(p.inbox.begin() + static_cast<ptrdiff_t>(p.inbox_head), n, frames.begin());
      p.inbox_head += n;
      if (p.inbox_head == p.inbox.size()) {
        p.inbox.clear();
        p.inbox_head = 0;
      }
      return n;
    }
    size_t TxBurst(std::span<const FrameRef> frames) override {
      for (const FrameRef& frame : frames) port_->fabric_->Sent(*port_, frame);
      port_->fabric_->ReleaseSent();
      return frames.size();
    }
    // The switch host never segments; a job here is refused whole.
    size_t TxSegmented(const transport::SegmentationJob& job) override { return job.size(); }
    // Nothing waits in a fabric port; the ECN depth comes from DepthProbe.
    size_t Flush() override { return 0; }
    transport::FramePool& rx_pool() override { return *port_->fabric_->copies_; }
    transport::FramePool& tx_pool() override { return *port_->fabric_->copy_pool_; }
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
      copy_pool_(std::make_unique<CopyPool>(this)),
      copy_origin_(kCopyFrames, 0),
      rng_(options.seed),
      loss_threshold_(LossThreshold(options.loss_rate)) {
  for (const FabricJob& job : options.jobs) group_racks_[job.group.value] = job.racks;
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
  // The depth of each frame, toward where it goes (Depth).
  auto depth = std::make_unique<DepthProbe>(this, static_cast<uint32_t>(switches_.size()));
  host.depth_at_each_frame = true;
  host.frame_depth = depth.get();
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<switchd::SwitchHost> created,
                       switchd::SwitchHost::Create(std::move(host), {}));
  switches_.push_back(Switch{std::move(depth), std::move(created), {}});
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

bool SwitchFabric::Draw() {
  // splitmix64
  uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  if (z >= loss_threshold_) return false;
  ++counters_.lost;
  return true;
}

// OriginOf, EndpointOf, Left and Arrive, on every frame's path, are inline:
// GCC kept them as calls (3% of the fabric thread's instructions).
inline uint32_t SwitchFabric::OriginOf(const FrameRef& frame) const {
  return frame.pool == borrowed_.get() ? static_cast<uint32_t>(frame.handle)
                                       : copy_origin_[frame.handle];
}

uint32_t SwitchFabric::Depth(const Port& port, uint32_t queue, const FrameRef& frame) {
  // An endpoint's port: its receive backlog; any other: the backlog of the
  // frame's destination (the queue it is bound for beyond). Switches rewrite
  // no address: that is the entering frame's destination.
  const transport::EndpointId endpoint = port.kind == Port::Kind::kEndpoint
                                             ? EndpointOf(port)
                                             : EndpointFor(LoadBig32(frame.data + kDstIpOffset));
  return endpoint != kNoEndpoint ? static_cast<uint32_t>(wire_->RxBacklog(endpoint, queue)) : 0;
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

inline transport::EndpointId SwitchFabric::EndpointOf(const Port& port) const {
  if (port.endpoint_id == kNoEndpoint) port.endpoint_id = EndpointFor(port.endpoint.value);
  return port.endpoint_id;
}

inline void SwitchFabric::Left(const FrameRef& frame) { fates_[OriginOf(frame)] = Fate::kLeft; }

void SwitchFabric::Sent(const Port& port, const FrameRef& frame) {
  if (!Lose()) {
    switch (port.kind) {
      case Port::Kind::kPeer:
        Arrive(port.peer_sw, port.peer_port, frame);
        return;
      case Port::Kind::kEndpoint:
        if (Filtered(port.endpoint, frame.data)) break;
        if (const transport::EndpointId e = EndpointOf(port); e != kNoEndpoint) {
          output_->Deliver(e, frame.data);
          Left(frame);
        }
        break;
      case Port::Kind::kPs:
        // Routed by its destination: through endpoint_cache_, not the
        // wire's table (the wire counts what has no endpoint).
        if (const transport::EndpointId e = EndpointFor(LoadBig32(frame.data + kDstIpOffset));
            e != kNoEndpoint) {
          output_->Deliver(e, frame.data);
        } else {
          output_->Route(frame.data);
        }
        Left(frame);
        break;
    }
  }
  // Delivered (a copy of it is on the receiver's ring) or dropped: done with.
  // The wire's own frames need nothing.
  if (frame.pool != borrowed_.get()) release_.push_back(frame);
}

void SwitchFabric::ReleaseSent() {
  transport::ReleaseFrames(release_);
  release_.clear();
}

inline void SwitchFabric::Arrive(uint32_t sw, uint32_t port, const FrameRef& frame) {
  Port& p = *switches_[sw].ports[port];
  // One arrival per port with frames: its poll takes them all.
  if (!p.has_frames()) pending_.push_back(Arrival{sw, port});
  p.inbox.push_back(frame);
}

void SwitchFabric::Drain(TimePoint now) {
  // Breadth first: each poll may put frames in other switches' inboxes (and
  // add their ports to pending_, which may grow meanwhile).
  for (size_t i = 0; i < pending_.size(); ++i) {
    const Arrival a = pending_[i];
    const Port& port = *switches_[a.sw].ports[a.port];
    // A burst of at most max_burst frames per poll; fabric ports receive on queue 0.
    while (port.has_frames()) switches_[a.sw].host->PollQueue(a.port, 0, now);
  }
  pending_.clear();
}

void SwitchFabric::Pass(const uint8_t* frame, TimePoint now) {
  if (!pending_.empty()) Drain(now);
  output_->Route(frame);
}

void SwitchFabric::MulticastWithoutSwitches(
    const std::vector<std::vector<wire::Ipv4Address>>& racks, const uint8_t* frame) {
  for (const std::vector<wire::Ipv4Address>& rack : racks) {
    for (const wire::Ipv4Address& ip : rack) {
      if (Lose() || Filtered(ip, frame)) continue;
      if (const transport::EndpointId e = EndpointFor(ip.value); e != kNoEndpoint) {
        output_->Deliver(e, frame);
      }
    }
  }
}

void SwitchFabric::UseWire(const transport::LoopbackWire& wire) {
  if (wire_ == &wire) return;
  endpoint_cache_ = {};
  for (Switch& s : switches_) {
    for (const std::unique_ptr<Port>& p : s.ports) p->endpoint_id = kNoEndpoint;
  }
  wire_ = &wire;
}

void SwitchFabric::Enter(uint8_t* frame, uint32_t index, TimePoint now) {
  ++counters_.frames;
  if (options_.wipe_every_frames > 0 && counters_.frames % options_.wipe_every_frames == 0) {
    Drain(now);  // the frames before this one see the switches as they were
    for (Switch& s : switches_) s.host->pipeline().WipeState();
    ++counters_.wipes;
  }
  if (!wire::IsAtpFrame(std::span<const uint8_t, kFrameBytes>(frame, kFrameBytes),
                        options_.base_port)) {
    Pass(frame, now);
    return;
  }
  const Entrance& entrance =
      EntranceOf(LoadBig32(frame + kSrcIpOffset), LoadBig32(frame + kDstIpOffset));
  if (Lose()) {
    ++entry_drops_;
    return;
  }
  switch (entrance.kind) {
    case Entrance::Kind::kGroup:
      ++counters_.multicast;
      // No switch (kNone): replicated to the workers like a multicast router.
      if (switches_.empty()) {
        MulticastWithoutSwitches(*entrance.racks, frame);
        return;
      }
      break;
    case Entrance::Kind::kWorker:
      break;
    case Entrance::Kind::kElsewhere:
      Pass(frame, now);
      return;
  }
  fates_[index] = Fate::kInside;
  Arrive(entrance.sw, entrance.port,
         FrameRef{frame, borrowed_.get(), index, static_cast<uint32_t>(kFrameBytes)});
}

const SwitchFabric::Entrance& SwitchFabric::EntranceOf(uint32_t src, uint32_t dst) {
  const uint64_t key = uint64_t{src} << 32 | dst;
  if (entrance_valid_ && entrance_key_ == key) return entrance_;
  Entrance e;
  if (auto group = group_racks_.find(dst); group != group_racks_.end()) {
    // A parameter packet, toward the job's group.
    e = Entrance{Entrance::Kind::kGroup, ps_switch_, ps_port_, &group->second};
  } else if (auto at = worker_port_.find(src); at != worker_port_.end()) {
    // A gradient (or anything else) from a worker: up through the switches.
    e = Entrance{Entrance::Kind::kWorker, at->second.first, at->second.second, nullptr};
  }
  entrance_ = e;
  entrance_key_ = key;
  entrance_valid_ = true;
  return entrance_;
}

void SwitchFabric::ProcessBurst(std::span<const transport::BurstFrame> frames, TimePoint now,
                                const transport::LoopbackWire& wire,
                                transport::WireOutput& output) {
  // mu_ is held: BeginBurst took it.
  UseWire(wire);
  output_ = &output;
  entry_drops_ = 0;
  fates_.assign(frames.size(), Fate::kOutside);
  for (size_t i = 0; i < frames.size(); ++i) Enter(frames[i].data, static_cast<uint32_t>(i), now);
  Drain(now);
  // Frames that went in and of which nothing came out: the wire counts them
  // as dropped, with those lost on the way in.
  const auto absorbed =
      static_cast<uint64_t>(std::count(fates_.begin(), fates_.end(), Fate::kInside));
  counters_.absorbed += absorbed;
  output.Dropped(absorbed + entry_drops_);
  output_ = nullptr;
}

transport::WireDecision SwitchFabric::Process(std::span<uint8_t, kFrameBytes> frame,
                                              transport::EndpointId from, TimePoint now,
                                              const transport::LoopbackWire& wire) {
  DecisionOutput output(&decision_endpoints_);
  const transport::BurstFrame burst{frame.data(), from};
  ProcessBurst({&burst, 1}, now, wire, output);
  return output.Finish(frame);
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
