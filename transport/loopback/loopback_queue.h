// transport/loopback/loopback_queue.h: a loopback endpoint (Device) and its
// queues. Private to transport/loopback.
#ifndef ATP_TRANSPORT_LOOPBACK_LOOPBACK_QUEUE_H_
#define ATP_TRANSPORT_LOOPBACK_LOOPBACK_QUEUE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "atp/transport.h"
#include "atp/transport/frame_pool.h"
#include "transport/common/frame_layout.h"
#include "transport/loopback/loopback_wire_impl.h"

namespace atp::transport::internal {

class LoopbackQueue final : public Queue {
 public:
  // Create: the queue `index` of endpoint `id`; `wire` outlives it (the
  // device holds it).
  static absl::StatusOr<std::unique_ptr<LoopbackQueue>> Create(
      LoopbackWireImpl* wire, EndpointId id, uint32_t index,
      const LoopbackEndpointOptions& options);
  ~LoopbackQueue() override;

  uint32_t index() const override { return index_; }
  const QueueCapabilities& capabilities() const override { return capabilities_; }
  size_t RxBurst(std::span<FrameRef> frames) override;
  size_t TxBurst(std::span<const FrameRef> frames) override;
  size_t TxSegmented(const SegmentationJob& job) override;
  size_t Flush() override;
  FramePool& rx_pool() override { return *rx_pool_; }
  // With a stepped processor the transmit pool is the wire's ingress ring
  // (frames written there go to the processor without a copy).
  FramePool& tx_pool() override {
    return ingress_ != nullptr ? static_cast<FramePool&>(*ingress_) : *tx_pool_;
  }
  QueueStats stats() const override;
  // wait_fd: an eventfd, readable while frames may be waiting (rx_signal.h).
  int wait_fd() const override { return signal_.fd(); }

 private:
  // TxEntry: a taken frame waiting for room at its receiver.
  struct TxEntry {
    FrameRef frame;
    RoutableFrame route;
  };
  // SlotLender: the "pool" of the frames a zero_copy_rx queue lends out of
  // its receive ring; freeing one gives its slot back (ReturnSlots).
  class SlotLender;

  LoopbackQueue(LoopbackWireImpl* wire, EndpointId id, uint32_t index,
                const LoopbackEndpointOptions& options, std::unique_ptr<HeapFramePool> rx_pool,
                std::unique_ptr<HeapFramePool> tx_pool);

  // RxBurstInPlace: RxBurst of a zero_copy_rx queue: the ring's slots after
  // those already lent, lent in turn.
  size_t RxBurstInPlace(std::span<FrameRef> frames);
  // ReturnSlots: lent frames came back (any order); the ring pops every
  // returned slot at its head.
  void ReturnSlots(std::span<const FrameRef> frames);

  // Drain: moves frames from the transmit ring onto the wire, oldest first,
  // until one does not fit at its receiver (direct mode), or all are gone.
  void Drain();
  void DrainDirect();
  void DrainThroughProcessor();
  // Stepped processor: the transmit ring is not used. TxBurst marks frames
  // written in the ingress ring's slots sent (and copies any other frame into
  // a slot), then publishes them to the processor.
  size_t TxBurstToIngress(std::span<const FrameRef> frames);
  size_t TxSegmentedToIngress(const SegmentationJob& job);
  bool tx_full() const { return tx_count_ == tx_ring_.size(); }
  void PushTx(const FrameRef& frame, const RoutableFrame& route);
  void FreeFrame(const FrameRef& frame);

  LoopbackWireImpl* const wire_;
  const EndpointId id_;
  const uint32_t index_;
  const uint16_t base_port_;
  QueueCapabilities capabilities_;
  FrameSlotRing& rx_ring_;
  RxSignal& signal_;
  IngressSlotRing* const ingress_;  // stepped processor only: this queue's ingress ring
  std::unique_ptr<HeapFramePool> rx_pool_;
  std::unique_ptr<HeapFramePool> tx_pool_;  // null with a stepped processor (ingress_ instead)
  std::vector<TxEntry> tx_ring_;  // power-of-two size; empty with a stepped processor
  size_t tx_head_ = 0;
  size_t tx_count_ = 0;
  std::vector<FrameRef> scratch_;  // a contiguous run of the ring, for the processor
  // zero_copy_rx only: the lender, the slots lent and not yet popped (from
  // the ring's head), and which of them came back, by ring position & mask.
  std::unique_ptr<SlotLender> lender_;
  uint64_t lent_ = 0;
  std::vector<uint8_t> returned_;
  // One-entry route cache: the last destination address and its endpoint.
  uint32_t cached_ipv4_ = 0;
  std::optional<EndpointId> cached_endpoint_;
  QueueStats stats_;
};

class LoopbackDevice final : public Device {
 public:
  LoopbackDevice(std::shared_ptr<LoopbackWireImpl> wire, EndpointId id,
                 const LoopbackEndpointOptions& options,
                 std::vector<std::unique_ptr<LoopbackQueue>> queues);
  ~LoopbackDevice() override;

  std::string_view backend() const override { return "loopback"; }
  const DeviceAddress& address() const override { return address_; }
  uint16_t base_port() const override { return base_port_; }
  uint32_t num_queues() const override { return static_cast<uint32_t>(queues_.size()); }
  Queue& queue(uint32_t index) override { return *queues_[index]; }

 private:
  std::shared_ptr<LoopbackWireImpl> wire_;
  EndpointId id_;
  DeviceAddress address_;
  uint16_t base_port_;
  std::vector<std::unique_ptr<LoopbackQueue>> queues_;
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_LOOPBACK_LOOPBACK_QUEUE_H_
