// sim/sim_port.h: a simulated port as a transport device, so the
// product's hosts (switch_emulator/host/switch_host.h) run in the simulator
// unchanged: the simulator swaps only the medium, as quiche's simulator runs
// the real connection and swaps only its packet writer.
//
// A SimPort is one queue of a device. Frames a node's Receive gets on the port
// are Deliver()ed to it and come out of RxBurst; TxBurst puts frames on the
// port's Link; Flush answers the link's queue depth (frames waiting or on the
// wire), which is what a switch host compares with its ECN threshold. A
// switch port sends every frame and the link tail-drops what its queue has no
// room for (TxMode::kTailDrop); a host's NIC queue takes only what the link's
// queue has room for and reports the rest as not taken, as a full TX ring does
// (TxMode::kBackpressure), so a host never drops its own frames. Several
// SimPorts (queues 0..n-1 of a worker's NIC) may share one link. Frames are
// the simulator's Packets: a FrameRef's handle is its Packet*, and both pools
// of the queue are a PacketFramePool over the simulation's PacketPool. The
// ports of one node share one PacketFramePool, so a frame received on one
// port and sent on another (a switch forwarding) leaves without a copy.
//
//   PacketFramePool frames(&pool);      // outlives the node's ports
//   SimPort port(&frames, link, address, base_port);
//   port.Deliver(std::move(packet));   // from Node::Receive
//   host->PollPort(index, now);        // RxBurst, pipeline, TxBurst onto links
#ifndef ATP_SIM_SIM_PORT_H_
#define ATP_SIM_SIM_PORT_H_

#include <cstdint>
#include <span>
#include <utility>

#include "atp/transport.h"
#include "sim/link.h"
#include "sim/packet.h"
#include "sim/ring_queue.h"

namespace atp::sim {

// PacketFramePool: FrameRefs over a PacketPool (which grows on demand, so
// AllocBurst always fills the burst). Used by one thread: its partition's
// (sim/network.h).
class PacketFramePool final : public transport::FramePool {
 public:
  explicit PacketFramePool(PacketPool* pool) : pool_(pool) {}

  size_t AllocBurst(std::span<transport::FrameRef> frames) override;
  void FreeBurst(std::span<const transport::FrameRef> frames) override;
  // free_count / capacity: capacity() - free_count() frames are held.
  size_t free_count() const override { return kCapacity - held_; }
  size_t capacity() const override { return kCapacity; }
  size_t frame_capacity() const override { return wire::kFrameBytes; }
  size_t headroom() const override { return 0; }

  // Wrap: `packet` as a FrameRef of this pool (whole frame). Unwrap: back.
  transport::FrameRef Wrap(PacketPtr packet) {
    ++held_;
    Packet* raw = packet.release();
    return transport::FrameRef{raw->bytes.data(), this, reinterpret_cast<uintptr_t>(raw),
                               static_cast<uint32_t>(wire::kFrameBytes)};
  }
  PacketPtr Unwrap(const transport::FrameRef& frame) {
    --held_;
    return PacketPtr(reinterpret_cast<Packet*>(static_cast<uintptr_t>(frame.handle)));
  }

 private:
  static constexpr size_t kCapacity = size_t{1} << 40;  // unbounded in practice
  PacketPool* pool_;
  size_t held_ = 0;
};

class SimPort final : public transport::Device, public transport::Queue {
 public:
  enum class TxMode : uint8_t { kTailDrop, kBackpressure };

  // `frames` (shared by the node's ports) and `egress` (the Link the port
  // sends on; null: Attach it before the first TxBurst) outlive the port.
  // `queue`: the queue index it reports.
  SimPort(PacketFramePool* frames, Link* egress, const transport::DeviceAddress& address,
          uint16_t base_port, uint32_t queue = 0, TxMode tx_mode = TxMode::kTailDrop);
  ~SimPort() override;

  // Attach: the link to send on, when the node's port exists only after the
  // port was made (nodes are connected after they are created).
  void Attach(Link* egress) { egress_ = egress; }
  bool attached() const { return egress_ != nullptr; }
  // TakeRefused: whether a TxBurst or TxSegmented took fewer frames than it
  // was offered (kBackpressure) since the last call; clears it.
  bool TakeRefused() {
    const bool refused = refused_;
    refused_ = false;
    return refused;
  }

  // Deliver: a frame that arrived on the port, for the next RxBurst.
  void Deliver(PacketPtr packet) { rx_.push_back(frames_->Wrap(std::move(packet))); }

  // transport::Device
  std::string_view backend() const override { return "sim"; }
  const transport::DeviceAddress& address() const override { return address_; }
  uint16_t base_port() const override { return base_port_; }
  uint32_t num_queues() const override { return 1; }
  transport::Queue& queue(uint32_t) override { return *this; }

  // transport::Queue
  uint32_t index() const override { return queue_; }
  const transport::QueueCapabilities& capabilities() const override { return capabilities_; }
  size_t RxBurst(std::span<transport::FrameRef> frames) override;
  size_t TxBurst(std::span<const transport::FrameRef> frames) override;
  size_t TxSegmented(const transport::SegmentationJob& job) override;
  size_t Flush() override { return egress_->QueueDepth(); }
  transport::FramePool& rx_pool() override { return *frames_; }
  transport::FramePool& tx_pool() override { return *frames_; }
  transport::QueueStats stats() const override { return stats_; }

 private:
  void Send(PacketPtr packet) {
    ++stats_.tx_frames;
    egress_->Send(std::move(packet));  // a full queue drops it (the link counts tail drops)
  }
  // Room: how many of `offered` frames the port takes now.
  size_t Room(size_t offered);

  PacketFramePool* frames_;
  Link* egress_;
  transport::DeviceAddress address_;
  uint16_t base_port_;
  uint32_t queue_;
  TxMode tx_mode_;
  bool refused_ = false;
  transport::QueueCapabilities capabilities_;
  RingQueue<transport::FrameRef> rx_;
  transport::QueueStats stats_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_SIM_PORT_H_
