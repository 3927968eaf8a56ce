// transport/loopback/loopback_wire_impl.h: the wire behind LoopbackWire: its
// endpoints' receive rings, the routing table and the processor. Private to
// transport/loopback.
#ifndef ATP_TRANSPORT_LOOPBACK_LOOPBACK_WIRE_IMPL_H_
#define ATP_TRANSPORT_LOOPBACK_LOOPBACK_WIRE_IMPL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "atp/transport/loopback.h"
#include "transport/common/frame_layout.h"
#include "transport/common/rx_signal.h"
#include "transport/loopback/frame_slot_ring.h"
#include "transport/loopback/ingress_slot_ring.h"

namespace atp::transport::internal {

// PushResult: what happened to one frame offered to the wire without a processor.
enum class PushResult : uint8_t {
  kDelivered,    // copied onto the receive ring
  kRingFull,     // the receive ring is full: try again later
  kUnroutable,   // no such endpoint or queue, or the endpoint is closed: drop it
};

class LoopbackWireImpl final : public LoopbackWire,
                               public std::enable_shared_from_this<LoopbackWireImpl> {
 public:
  explicit LoopbackWireImpl(LoopbackWireOptions options);

  absl::StatusOr<std::unique_ptr<Device>> AddEndpoint(
      const LoopbackEndpointOptions& options) override;
  std::optional<EndpointId> FindEndpoint(wire::Ipv4Address ipv4) const override;
  size_t num_endpoints() const override { return endpoints_.size(); }
  size_t RxBacklog(EndpointId endpoint, uint32_t queue) const override;
  LoopbackWireStats stats() const override;
  size_t StepProcessor(size_t budget) override;
  int processor_wait_fd() const override { return stepped_ ? processor_signal_.fd() : -1; }

  // The datapath, called by LoopbackQueue.
  bool has_processor() const { return processor_ != nullptr; }
  bool stepped() const { return stepped_; }

  // PushDirect: no processor. Delivers `frame` to queue `queue` of `endpoint`
  // (an id from FindEndpoint). The caller Raise()s the queue's signal once
  // it has pushed a run of frames.
  PushResult PushDirect(EndpointId endpoint, uint32_t queue, const uint8_t* frame);
  // Raise: frames were pushed onto queue `queue` of `endpoint`.
  void Raise(EndpointId endpoint, uint32_t queue) { endpoints_[endpoint]->signals[queue]->Raise(); }

  // ProcessAndDeliver: processor mode. Runs the processor over each frame, in
  // order, under the wire's lock, and delivers the copies it asks for. Every
  // frame is consumed (the caller frees them all afterwards).
  void ProcessAndDeliver(EndpointId from, std::span<const FrameRef> frames);

  // ingress: stepped mode. A queue's ingress ring: its sender writes frames
  // in the slots and publishes them (raising the processor's signal),
  // StepProcessor pops them.
  IngressSlotRing& ingress(EndpointId endpoint, uint32_t queue) {
    return *endpoints_[endpoint]->ingress[queue];
  }

  // Close: the endpoint's device is gone; frames for it are unroutable.
  void Close(EndpointId endpoint);

  // ring / ring_drops: a queue's receive ring and its egress-drop counter.
  FrameSlotRing& ring(EndpointId endpoint, uint32_t queue) {
    return *endpoints_[endpoint]->rings[queue];
  }
  const std::atomic<uint64_t>& ring_drops(EndpointId endpoint, uint32_t queue) const {
    return endpoints_[endpoint]->ring_drops[queue];
  }
  // signal: a queue's wait_fd and its flag.
  RxSignal& signal(EndpointId endpoint, uint32_t queue) {
    return *endpoints_[endpoint]->signals[queue];
  }

 private:
  struct Endpoint {
    DeviceAddress address;
    uint16_t base_port = 0;
    std::vector<std::unique_ptr<FrameSlotRing>> rings;  // one per queue
    std::vector<std::unique_ptr<RxSignal>> signals;     // one per queue: its wait_fd
    std::unique_ptr<std::atomic<uint64_t>[]> ring_drops;  // processor-mode drops per queue
    // raise_queued: per queue, under mu_: its signal is in to_raise_ already.
    std::unique_ptr<bool[]> raise_queued;
    std::vector<std::unique_ptr<IngressSlotRing>> ingress;  // stepped mode: one per queue
    std::atomic<bool> open{true};
  };

  // kMaxBurst: frames in one ProcessBurst at most: what StepProcessor takes
  // from one ingress ring before it turns to the next (a burst, as a port's
  // receive burst).
  static constexpr size_t kMaxBurst = 32;

  // Output: the WireOutput a processor's ProcessBurst sends through: the
  // wire's own Deliver and Route, under mu_.
  class Output final : public WireOutput {
   public:
    explicit Output(LoopbackWireImpl* wire) : wire_(wire) {}
    void Deliver(EndpointId endpoint, const uint8_t* frame) override {
      wire_->Deliver(endpoint, frame);
    }
    void Route(const uint8_t* frame) override { wire_->Route(frame); }
    void Dropped(uint64_t frames) override;

   private:
    LoopbackWireImpl* const wire_;
  };

  // ProcessRun: processor mode, under mu_: the processor over one sender's
  // run of frames (at most kMaxBurst), the copies it asks for delivered.
  void ProcessRun(std::span<const BurstFrame> frames, TimePoint now);
  // Deliver: processor mode, one copy to `endpoint` (the queue named by the
  // frame's UDP port); counts what goes wrong.
  void Deliver(EndpointId endpoint, const uint8_t* frame);
  // Route: processor mode, Deliver to the endpoint owning the frame's IPv4
  // destination, or counted unroutable.
  void Route(const uint8_t* frame);
  // RaiseDelivered: processor mode, under mu_: wakes the receivers Deliver
  // put frames on since the last call.
  void RaiseDelivered();

  FrameProcessor* const processor_;
  const std::function<TimePoint()> clock_;
  const bool stepped_;                  // processor and stepped_processor
  const uint32_t ingress_ring_frames_;  // a power of two
  RxSignal processor_signal_;           // stepped mode: frames on an ingress ring
  struct IngressRing {
    IngressSlotRing* ring;  // owned by the endpoint
    EndpointId from;
  };
  // StepRing: StepProcessor's run of at most `most` frames from `ring`.
  // Calls BeginBurst before it if *burst_begun is false (and sets it).
  // Returns the frames processed.
  size_t StepRing(const IngressRing& ring, size_t most, TimePoint now, bool* burst_begun);
  std::vector<IngressRing> ingress_rings_;  // under mu_: every queue's, in the order added
  size_t next_ingress_ = 0;                 // under mu_: the ring StepProcessor starts at
  std::mutex mu_;  // serializes AddEndpoint and the processor
  std::vector<std::unique_ptr<Endpoint>> endpoints_;      // appended before traffic only
  absl::flat_hash_map<uint32_t, EndpointId> by_ipv4_;     // likewise
  // to_raise_: under mu_: the queues Deliver put frames on since the last
  // RaiseDelivered, each once: its signal and its raise_queued flag.
  struct ToRaise {
    RxSignal* signal;
    bool* queued;
  };
  std::vector<ToRaise> to_raise_;
  Output output_{this};              // what ProcessRun hands the processor

  std::atomic<uint64_t> frames_in_{0};
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> processor_drops_{0};
  std::atomic<uint64_t> unroutable_{0};
  std::atomic<uint64_t> egress_drops_{0};
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_LOOPBACK_LOOPBACK_WIRE_IMPL_H_
