// transport/loopback/loopback_wire_impl.cc: routing, delivery and the
// processor of the loopback wire.
#include "transport/loopback/loopback_wire_impl.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "transport/loopback/loopback_queue.h"

namespace atp::transport {

std::shared_ptr<LoopbackWire> LoopbackWire::Create(LoopbackWireOptions options) {
  return std::make_shared<internal::LoopbackWireImpl>(std::move(options));
}

// The default: one frame at a time, through Process.
void FrameProcessor::ProcessBurst(std::span<const BurstFrame> frames, TimePoint now,
                                  const LoopbackWire& wire, WireOutput& output) {
  for (const BurstFrame& frame : frames) {
    const WireDecision decision =
        Process(std::span<uint8_t, kFrameBytes>(frame.data, kFrameBytes), frame.from, now, wire);
    switch (decision.action) {
      case WireAction::kDrop:
        output.Dropped(1);
        break;
      case WireAction::kRoute:
        output.Route(frame.data);
        break;
      case WireAction::kSendTo:
        for (EndpointId endpoint : decision.endpoints) output.Deliver(endpoint, frame.data);
        break;
    }
  }
}

namespace internal {
namespace {

TimePoint MonotonicNow() {
  return TimePoint::FromNanoseconds(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

void Bump(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

// BumpAlone: Bump for a counter only the holder of the wire's lock writes.
// Not a locked read-modify-write: that would wait for the frame just copied
// onto a receiver's ring to reach the cache (the ring's lines live in the
// receiver's core) before the next frame's copy may start.
void BumpAlone(std::atomic<uint64_t>& counter, uint64_t n = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

uint32_t RingSlots(uint32_t at_least) { return std::bit_ceil(std::max(at_least, 2u)); }

}  // namespace

LoopbackWireImpl::LoopbackWireImpl(LoopbackWireOptions options)
    : processor_(options.processor),
      clock_(options.clock ? std::move(options.clock) : std::function<TimePoint()>(MonotonicNow)),
      stepped_(options.processor != nullptr && options.stepped_processor),
      ingress_ring_frames_(RingSlots(options.ingress_ring_frames)) {}

absl::StatusOr<std::unique_ptr<Device>> LoopbackWireImpl::AddEndpoint(
    const LoopbackEndpointOptions& options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  std::lock_guard<std::mutex> lock(mu_);
  if (by_ipv4_.contains(options.address.ipv4.value)) {
    return absl::AlreadyExistsError(absl::StrCat("loopback wire: ", options.address.ipv4.ToString(),
                                                 " already has an endpoint"));
  }
  const auto id = static_cast<EndpointId>(endpoints_.size());
  auto endpoint = std::make_unique<Endpoint>();
  endpoint->address = options.address;
  endpoint->base_port = options.device.base_port;
  endpoint->ring_drops = std::make_unique<std::atomic<uint64_t>[]>(options.device.num_queues);
  endpoint->raise_queued = std::make_unique<bool[]>(options.device.num_queues);
  for (uint32_t q = 0; q < options.device.num_queues; ++q) {
    endpoint->rings.push_back(std::make_unique<FrameSlotRing>(options.device.rx_ring_frames));
    endpoint->signals.push_back(std::make_unique<RxSignal>());
    if (stepped_) {
      endpoint->ingress.push_back(
          std::make_unique<IngressSlotRing>(ingress_ring_frames_, &processor_signal_));
      ingress_rings_.push_back(IngressRing{endpoint->ingress.back().get(), id});
    }
  }
  endpoints_.push_back(std::move(endpoint));
  by_ipv4_[options.address.ipv4.value] = id;

  std::vector<std::unique_ptr<LoopbackQueue>> queues;
  for (uint32_t q = 0; q < options.device.num_queues; ++q) {
    absl::StatusOr<std::unique_ptr<LoopbackQueue>> queue =
        LoopbackQueue::Create(this, id, q, options);
    if (!queue.ok()) {
      endpoints_.back()->open.store(false, std::memory_order_release);
      by_ipv4_.erase(options.address.ipv4.value);
      return queue.status();
    }
    queues.push_back(*std::move(queue));
  }
  return std::make_unique<LoopbackDevice>(shared_from_this(), id, options, std::move(queues));
}

std::optional<EndpointId> LoopbackWireImpl::FindEndpoint(wire::Ipv4Address ipv4) const {
  auto it = by_ipv4_.find(ipv4.value);
  if (it == by_ipv4_.end()) return std::nullopt;
  return it->second;
}

size_t LoopbackWireImpl::RxBacklog(EndpointId endpoint, uint32_t queue) const {
  if (endpoint >= endpoints_.size() || queue >= endpoints_[endpoint]->rings.size()) return 0;
  return endpoints_[endpoint]->rings[queue]->Backlog();
}

LoopbackWireStats LoopbackWireImpl::stats() const {
  LoopbackWireStats s;
  s.frames_in = frames_in_.load(std::memory_order_relaxed);
  s.delivered = delivered_.load(std::memory_order_relaxed);
  s.processor_drops = processor_drops_.load(std::memory_order_relaxed);
  s.unroutable = unroutable_.load(std::memory_order_relaxed);
  s.egress_drops = egress_drops_.load(std::memory_order_relaxed);
  return s;
}

void LoopbackWireImpl::Close(EndpointId endpoint) {
  endpoints_[endpoint]->open.store(false, std::memory_order_release);
}

PushResult LoopbackWireImpl::PushDirect(EndpointId endpoint, uint32_t queue, const uint8_t* frame) {
  Endpoint& e = *endpoints_[endpoint];
  if (queue >= e.rings.size() || !e.open.load(std::memory_order_acquire)) {
    Bump(frames_in_);
    Bump(unroutable_);
    return PushResult::kUnroutable;
  }
  if (!e.rings[queue]->TryPush(frame)) return PushResult::kRingFull;
  Bump(frames_in_);
  Bump(delivered_);
  return PushResult::kDelivered;
}

void LoopbackWireImpl::Deliver(EndpointId endpoint, const uint8_t* frame) {
  if (endpoint >= endpoints_.size()) {
    Bump(unroutable_);
    return;
  }
  Endpoint& e = *endpoints_[endpoint];
  const uint32_t queue = uint32_t{LoadBig16(frame + kUdpDstPortOffset)} - e.base_port;
  if (queue >= e.rings.size() || !e.open.load(std::memory_order_acquire)) {
    Bump(unroutable_);
    return;
  }
  // Under mu_, and with a processor every frame goes through it: no other
  // producer pushes onto the ring meanwhile.
  if (!e.rings[queue]->TryPushExclusive(frame)) {
    Bump(egress_drops_);
    Bump(e.ring_drops[queue]);
    return;
  }
  // Raised once per burst (an atomic exchange on the consumer's line, and a
  // write to its eventfd when it sleeps), not once per frame.
  if (bool& queued = e.raise_queued[queue]; !queued) {
    queued = true;
    to_raise_.push_back(ToRaise{e.signals[queue].get(), &queued});
  }
  BumpAlone(delivered_);  // with a processor, delivered_ changes only here
}

void LoopbackWireImpl::Route(const uint8_t* frame) {
  auto it = by_ipv4_.find(LoadBig32(frame + kIpDstOffset));
  if (it == by_ipv4_.end()) {
    Bump(unroutable_);
    return;
  }
  Deliver(it->second, frame);
}

void LoopbackWireImpl::Output::Dropped(uint64_t frames) {
  if (frames > 0) Bump(wire_->processor_drops_, frames);
}

void LoopbackWireImpl::ProcessRun(std::span<const BurstFrame> frames, TimePoint now) {
  processor_->ProcessBurst(frames, now, *this, output_);
}

void LoopbackWireImpl::RaiseDelivered() {
  for (const ToRaise& r : to_raise_) {
    *r.queued = false;
    r.signal->Raise();
  }
  to_raise_.clear();
}

void LoopbackWireImpl::ProcessAndDeliver(EndpointId from, std::span<const FrameRef> frames) {
  std::lock_guard<std::mutex> lock(mu_);
  const TimePoint now = clock_();
  Bump(frames_in_, frames.size());
  processor_->BeginBurst();
  std::array<BurstFrame, kMaxBurst> run;
  for (size_t first = 0; first < frames.size(); first += kMaxBurst) {
    const size_t n = std::min(kMaxBurst, frames.size() - first);
    for (size_t i = 0; i < n; ++i) run[i] = BurstFrame{frames[first + i].data, from};
    ProcessRun({run.data(), n}, now);
  }
  processor_->EndBurst();
  RaiseDelivered();
}

size_t LoopbackWireImpl::StepRing(const IngressRing& ring, size_t most, TimePoint now,
                                  bool* burst_begun) {
  std::array<uint8_t*, kMaxBurst> slots;
  const size_t n = ring.ring->Peek({slots.data(), most});
  if (n == 0) return 0;
  if (!*burst_begun) {
    processor_->BeginBurst();
    *burst_begun = true;
  }
  std::array<BurstFrame, kMaxBurst> run;
  for (size_t i = 0; i < n; ++i) run[i] = BurstFrame{slots[i], ring.from};
  ProcessRun({run.data(), n}, now);
  // In the sender's slots: processed and their copies delivered before the
  // slots go back to the sender.
  ring.ring->PopPeeked();
  return n;
}

size_t LoopbackWireImpl::StepProcessor(size_t budget) {
  if (!stepped_) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const TimePoint now = clock_();
  // Every (endpoint, queue) ring in turn, starting one further each step so
  // that no sender's frames always go first.
  const std::vector<IngressRing>& rings = ingress_rings_;
  size_t done = 0;
  bool begun = false;  // BeginBurst called
  bool looked_again = false;
  while (done < budget && !rings.empty()) {
    size_t this_pass = 0;
    for (size_t k = 0; k < rings.size() && done < budget; ++k) {
      const IngressRing& ring = rings[(next_ingress_ + k) % rings.size()];
      const size_t n = StepRing(ring, std::min(kMaxBurst, budget - done), now, &begun);
      done += n;
      this_pass += n;
    }
    next_ingress_ = (next_ingress_ + 1) % rings.size();
    if (this_pass > 0) continue;
    // All empty: lower the wait_fd, then look once more (a sender may have
    // pushed just before it raised).
    if (looked_again || !processor_signal_.LowerIfRaised()) break;
    looked_again = true;
  }
  if (begun) processor_->EndBurst();
  Bump(frames_in_, done);
  RaiseDelivered();
  return done;
}

}  // namespace internal
}  // namespace atp::transport
