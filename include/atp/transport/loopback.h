// atp/transport/loopback.h: the in-process transport. A LoopbackWire connects
// any number of endpoints (each a Device with its own queues); a frame sent by
// one is delivered to the endpoint that owns its IPv4 destination, on the
// queue its UDP destination port names. A FrameProcessor (a switch pipeline,
// a loss filter) may sit in the middle and drop, forward or multicast.
//
//   std::shared_ptr<LoopbackWire> wire = LoopbackWire::Create({});
//   LoopbackEndpointOptions a;  a.address = {ip_a, mac_a};  a.device.num_queues = 2;
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<Device> worker, wire->AddEndpoint(a));
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<Device> ps, wire->AddEndpoint(b));
//   ... worker->queue(0).TxBurst(frames) ... ps->queue(0).RxBurst(frames) ...
//
// Each endpoint queue has a transmit ring of frame references and a receive
// ring of 306-byte slots. TxBurst puts frames on the transmit ring and moves
// what it can onto the receivers' rings at once (a copy); a frame whose
// receive ring is full waits on the transmit ring (in order) until a later
// TxBurst or Flush, so a slow receiver back-pressures its senders and nothing
// is lost. With a processor, a frame it sends to a full ring is dropped and
// counted (a switch's egress drop).
//
// Threads: endpoints and their queues may run on different threads; each
// receive ring takes frames from any number of sending threads (a bounded
// multi-producer ring, lock-free). The processor runs under the wire's lock,
// one sender's run of frames at a time (ProcessBurst): on whichever thread
// sends, or, with
// stepped_processor, on the thread that calls StepProcessor (a thread of its
// own for the switches, as a real switch is a machine of its own). Add every
// endpoint before traffic starts.
#ifndef ATP_TRANSPORT_LOOPBACK_H_
#define ATP_TRANSPORT_LOOPBACK_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "atp/transport.h"

namespace atp::transport {

class LoopbackWire;

// EndpointId: an endpoint's number on its wire, in the order AddEndpoint added
// them (0, 1, 2, ...).
using EndpointId = uint32_t;

// WireAction: what the wire does with a frame a processor has seen.
enum class WireAction : uint8_t {
  kDrop,    // consumed (aggregated, filtered out, malformed)
  kRoute,   // deliver to the endpoint owning the frame's (possibly rewritten) IPv4 destination
  kSendTo,  // deliver a copy to each endpoint in WireDecision::endpoints (one: a chosen port;
            // several: multicast)
};

struct WireDecision {
  WireAction action = WireAction::kRoute;
  // For kSendTo: storage owned by the processor, read before Process is called again.
  std::span<const EndpointId> endpoints;
};

// BurstFrame: one frame of a run handed to FrameProcessor::ProcessBurst: its
// bytes (kFrameBytes, in the wire's storage: the sender's ingress slot or
// transmit buffer; the processor may rewrite them, and reads or writes them
// only until ProcessBurst returns) and the endpoint it entered from.
struct BurstFrame {
  uint8_t* data = nullptr;
  EndpointId from = 0;
};

// WireOutput: how a processor's ProcessBurst sends frames on. Implemented by
// the wire; valid only during that ProcessBurst call, on its thread, under
// the wire's lock. Each call copies the bytes before it returns, so the
// processor may reuse or release them at once.
class WireOutput {
 public:
  // Deliver: a copy of `frame` onto `endpoint`'s receive ring, on the queue
  // its UDP destination port names (as kSendTo does for one endpoint).
  virtual void Deliver(EndpointId endpoint, const uint8_t* frame) = 0;
  // Route: a copy of `frame` to the endpoint owning its IPv4 destination (as
  // kRoute does).
  virtual void Route(const uint8_t* frame) = 0;
  // Dropped: `frames` frames of the run were consumed with no copy sent on
  // (counted as kDrop verdicts are: LoopbackWireStats::processor_drops).
  virtual void Dropped(uint64_t frames) = 0;

 protected:
  ~WireOutput() = default;
};

// FrameProcessor: sits in the middle of a wire. Implemented by whoever plugs
// a switch pipeline or a filter in; the wire does not own it.
class FrameProcessor {
 public:
  virtual ~FrameProcessor() = default;

  // ProcessBurst: a run of frames entering the wire (one sender's, in the
  // order sent), at `now`; the processor sends what it decides through
  // `output`. Called under the wire's lock, between BeginBurst and EndBurst,
  // with the same restriction on calling the wire back as Process. The
  // default calls Process on each frame in order and carries out its
  // decision; a processor that gains from seeing the frames together (a
  // switch polling its ports once per run) overrides it.
  virtual void ProcessBurst(std::span<const BurstFrame> frames, TimePoint now,
                            const LoopbackWire& wire, WireOutput& output);

  // Process: one frame entering the wire from endpoint `from`, at `now` (the
  // wire's clock, read once per burst). May rewrite the frame in place (its
  // length stays kFrameBytes). Called under the wire's lock: it must not call
  // the wire back except its const queries (RxBacklog, FindEndpoint). The
  // wire calls it only through the default ProcessBurst.
  virtual WireDecision Process(std::span<uint8_t, kFrameBytes> frame, EndpointId from,
                               TimePoint now, const LoopbackWire& wire) = 0;

  // BeginBurst / EndBurst: the wire calls them (under its lock) around every
  // run of ProcessBurst calls: the frames of one TxBurst, or of one
  // StepProcessor.
  // For a processor with a lock of its own: taken once per run, not once per
  // frame (a locked instruction waits for every store before it, here the
  // copies just delivered onto other cores' rings).
  virtual void BeginBurst() {}
  virtual void EndBurst() {}
};

// LoopbackWireOptions: the wire itself.
struct LoopbackWireOptions {
  // processor: null for a plain wire. Must outlive the wire's traffic.
  FrameProcessor* processor = nullptr;
  // clock: what the processor gets as `now`; unset: a monotonic clock. Tests
  // pass a fake one.
  std::function<TimePoint()> clock;
  // stepped_processor: false (the default): TxBurst runs the processor over
  // the frames it takes, on the sending thread. true: each queue's frames go
  // to the processor through an ingress ring of ingress_ring_frames slots
  // (rounded up to a power of two), which is also the queue's tx_pool(): a
  // frame written in a buffer from there is handed over in place, any other
  // is copied into a slot. TxBurst only publishes them, and StepProcessor
  // runs the processor over them later, so the processor's work leaves the
  // endpoints' threads. Frames from tx_pool() reach the processor in the
  // order their buffers were allocated; a slot comes back to the pool once
  // the processor is done with it (Flush counts the others as held), and a
  // ring full of them back-pressures AllocBurst and TxBurst, nothing is lost.
  // The ring's buffers keep kDefaultHeadroom whatever device.headroom says.
  // No effect on a wire without a processor (it delivers directly).
  bool stepped_processor = false;
  uint32_t ingress_ring_frames = 1024;
};

// LoopbackEndpointOptions: one endpoint. device.base_port is the ATP port range
// it receives on (queues steer by it); address.ipv4 must be unique on the wire.
struct LoopbackEndpointOptions {
  DeviceOptions device;
  DeviceAddress address;
  // zero_copy_rx: RxBurst hands out the receive ring's slots themselves
  // instead of copies in rx_pool buffers (one 306-byte copy less per frame,
  // and no pool buffer to touch). The frames then have no headroom
  // (FramePool::headroom() 0; capabilities().headroom still describes the
  // pools, and rx_pool stays unused), and each holds its slot until it is
  // released, in any order: a receiver that holds frames leaves its senders
  // less room. Release them on the queue's thread, as any frame.
  bool zero_copy_rx = false;

  absl::Status Validate() const { return device.Validate(); }
};

// LoopbackWireStats: what happened on the wire (not per queue).
struct LoopbackWireStats {
  uint64_t frames_in = 0;          // frames that entered the wire
  uint64_t delivered = 0;          // copies put on a receive ring
  uint64_t processor_drops = 0;    // kDrop verdicts
  uint64_t unroutable = 0;         // no endpoint, no such queue, or a closed endpoint
  uint64_t egress_drops = 0;       // processor mode: copies dropped at a full receive ring
};

class LoopbackWire {
 public:
  // Create: a wire with no endpoints yet.
  static std::shared_ptr<LoopbackWire> Create(LoopbackWireOptions options);

  virtual ~LoopbackWire() = default;

  // AddEndpoint: a device on this wire. Fails if the options are invalid or
  // the IPv4 address is taken. The device keeps the wire alive; the wire stops
  // delivering to it once it is destroyed.
  virtual absl::StatusOr<std::unique_ptr<Device>> AddEndpoint(
      const LoopbackEndpointOptions& options) = 0;

  // FindEndpoint: the endpoint owning `ipv4`, if any.
  virtual std::optional<EndpointId> FindEndpoint(wire::Ipv4Address ipv4) const = 0;
  virtual size_t num_endpoints() const = 0;

  // RxBacklog: frames waiting on an endpoint queue's receive ring (a snapshot;
  // 0 for an unknown endpoint or queue). What a switch processor compares
  // against its ECN threshold.
  virtual size_t RxBacklog(EndpointId endpoint, uint32_t queue) const = 0;

  // stats: any thread.
  virtual LoopbackWireStats stats() const = 0;

  // StepProcessor: stepped_processor only (else 0). Runs the processor over
  // at most `budget` frames waiting on the ingress rings, oldest first per
  // ring, the rings in turn (a ProcessBurst of up to 32 frames from each),
  // and delivers what it decides. Returns the frames
  // processed; 0 when none waited. Any thread, one at a time (it takes the
  // wire's lock).
  virtual size_t StepProcessor(size_t budget) = 0;
  // processor_wait_fd: readable while frames may wait for StepProcessor (for
  // a thread that sleeps when it returns 0); -1 without stepped_processor.
  virtual int processor_wait_fd() const = 0;
};

}  // namespace atp::transport

#endif  // ATP_TRANSPORT_LOOPBACK_H_
