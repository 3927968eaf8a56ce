// transport/dpdk/dpdk_queue.h: one queue of a DPDK device: its hardware RX
// and TX queue, its pools, its software transmit ring and its share of
// software steering. Private to transport/dpdk.
#ifndef ATP_TRANSPORT_DPDK_DPDK_QUEUE_H_
#define ATP_TRANSPORT_DPDK_DPDK_QUEUE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "atp/transport.h"
#include "atp/transport/dpdk.h"
#include "transport/common/frame_layout.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/interrupt_gate.h"
#include "transport/dpdk/mbuf_pool.h"
#include "transport/dpdk/peer_table.h"
#include "transport/dpdk/rx_wait.h"
#include "transport/dpdk/steering_rings.h"

namespace atp::transport::internal {

// TxFreePolicy: what the port's TX queue may be handed.
enum class TxFreePolicy : uint8_t {
  kAnyMbuf,           // mbufs of any mempool (zero-copy forwarding)
  kOwnPoolOnly,       // MBUF_FAST_FREE is on: only this queue's tx_pool mbufs
};

// PortRestarter: the device's side of a memif client that reconnects by
// itself (DpdkReconnect::kAuto): a queue calls RestartIfDown from its own
// thread, holding the interrupt gate, at most every kRestartCheckEvery while
// its port gives it nothing.
class PortRestarter {
 public:
  virtual void RestartIfDown() = 0;

 protected:
  ~PortRestarter() = default;
};

// DpdkQueueConfig: what a queue needs from its device.
struct DpdkQueueConfig {
  uint16_t port_id = 0;
  uint32_t index = 0;       // also its hardware RX and TX queue
  uint32_t num_queues = 1;  // of the device
  uint16_t base_port = wire::kDefaultBasePort;
  uint32_t max_burst = 32;
  uint32_t tx_ring_frames = 1024;
  TxFreePolicy tx_free = TxFreePolicy::kAnyMbuf;
  DpdkDestinations destinations = DpdkDestinations::kKnownPeers;
  // gate: set for memif ports (interrupt_gate.h): every burst holds it.
  InterruptGate* gate = nullptr;
  // restarter: set on the one queue that restarts its port when the link is
  // down (queue 0 of a memif client with DpdkReconnect::kAuto).
  PortRestarter* restarter = nullptr;
};

// DpdkQueue: every burst call first makes its thread an lcore if it is not
// one (thread_lcore.h), so that mbufs go through the thread's mempool cache.
class DpdkQueue final : public Queue {
 public:
  // DpdkQueue: `peers` and `steering_rings` outlive the queue and do not
  // change while it runs.
  DpdkQueue(const DpdkQueueConfig& config, const PeerTable* peers, SteeringRings* steering_rings,
            std::unique_ptr<MbufPool> rx_pool, std::unique_ptr<MbufPool> tx_pool);
  // ~DpdkQueue: frees the mbufs still on the software transmit ring.
  ~DpdkQueue() override;

  uint32_t index() const override { return config_.index; }
  const QueueCapabilities& capabilities() const override { return capabilities_; }
  size_t RxBurst(std::span<FrameRef> frames) override;
  size_t TxBurst(std::span<const FrameRef> frames) override;
  size_t TxSegmented(const SegmentationJob& job) override;
  size_t Flush() override;
  FramePool& rx_pool() override { return *rx_pool_; }
  FramePool& tx_pool() override { return *tx_pool_; }
  QueueStats stats() const override;
  // wait_fd: the port's Rx interrupt and the steering ring's signal
  // (rx_wait.h), when the device has Rx interrupts; else -1.
  int wait_fd() const override { return rx_wait_ != nullptr ? rx_wait_->fd() : -1; }

  // set_rx_wait: the device's RxWait for this queue (it outlives its use
  // here), or null; control path, no burst running.
  void set_rx_wait(RxWait* rx_wait) { rx_wait_ = rx_wait; }

  // set_steering: what the device chose once the port was started; control
  // path, before traffic.
  void set_steering(Steering steering) { capabilities_.steering = steering; }

  // kChunk: mbufs per rte_eth_rx_burst / rte_ring call.
  static constexpr size_t kChunk = 64;
  // kRestartCheckEvery: how often a queue with a restarter looks at the link.
  static constexpr TimeDelta kRestartCheckEvery = TimeDelta::FromMilliseconds(200);

 private:
  // Receive: RxBurst's work: the steering ring, then the hardware queue.
  size_t Receive(std::span<FrameRef> frames);
  // SortReceived: classifies what the hardware queue returned: frames for
  // this queue go to `out` (returns how many), frames for another queue to
  // its outbox, the rest is freed and counted as bad.
  size_t SortReceived(rte_mbuf** mbufs, size_t n, FrameRef* out);
  void PostOutboxes();
  bool Routable(const RoutableFrame& route);
  // TxMbufFor: the mbuf that carries `frame` to the port: the frame's own
  // mbuf, or a tx_pool copy (then the frame is released). Null when a copy is
  // needed and the TX pool is empty (the frame stays the caller's).
  rte_mbuf* TxMbufFor(const FrameRef& frame);
  void ReleaseTaken(const FrameRef& frame);
  size_t tx_room() const { return tx_ring_.size() - tx_count_; }
  void PushTx(rte_mbuf* mbuf) {
    tx_ring_[(tx_head_ + tx_count_) & (tx_ring_.size() - 1)] = mbuf;
    ++tx_count_;
  }
  // DrainTx: hands the software transmit ring to the port, oldest first,
  // until the port refuses or the ring is empty.
  void DrainTx();
  // MaybeRestartPort: the restarter's turn, when kRestartCheckEvery has
  // passed; the caller holds the gate.
  void MaybeRestartPort();

  const DpdkQueueConfig config_;
  const PeerTable* const peers_;
  SteeringRings* const steering_rings_;
  QueueCapabilities capabilities_;
  std::unique_ptr<MbufPool> rx_pool_;
  std::unique_ptr<MbufPool> tx_pool_;

  // Software transmit ring: taken mbufs the port has not accepted yet.
  std::vector<rte_mbuf*> tx_ring_;  // power-of-two size
  size_t tx_head_ = 0;
  size_t tx_count_ = 0;

  // Outboxes: received frames for other queues, one run per destination,
  // posted to the steering rings after each hardware burst.
  std::vector<rte_mbuf*> outbox_;             // num_queues * kChunk
  std::array<uint16_t, kMaxQueues> outbox_count_{};

  size_t own_frames_taken_ = 0;  // tx_pool frames taken in this TxBurst

  // One-entry route cache: the last destination and its number of queues.
  uint32_t cached_ipv4_ = 0;
  uint32_t cached_queues_ = 0;

  QueueStats stats_;
  RxWait* rx_wait_ = nullptr;

  GateSlot gate_slot_;              // this queue's thread, inside a burst
  uint64_t next_restart_check_ = 0;  // TSC cycles
  uint64_t restart_check_cycles_ = 0;
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_DPDK_QUEUE_H_
