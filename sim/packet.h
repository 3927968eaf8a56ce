// sim/packet.h: a frame travelling through the simulated network, and the
// pool that recycles them.
//
// Frames are real 306-byte ATP frames (wire::EncodeFrame), because the switch
// pipeline rewrites them in place exactly as it would on a port. A Packet is
// owned by exactly one holder at a time (a link's queue, a node during
// Receive), through PacketPtr; destroying a PacketPtr returns the packet to
// its pool. The pool only allocates when it runs dry (warm-up), so the
// steady state allocates nothing.
//
//   atp::sim::PacketPool pool;
//   atp::sim::PacketPtr packet = pool.Allocate();
//   atp::wire::EncodeFrame(fields, payload, base_port, packet->frame());
//   link->Send(std::move(packet));
#ifndef ATP_SIM_PACKET_H_
#define ATP_SIM_PACKET_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "atp/wire.h"

namespace atp::sim {

class PacketPool;

struct Packet {
  std::array<uint8_t, wire::kFrameBytes> bytes;
  // pool: where the packet returns when released; set by the pool.
  PacketPool* pool = nullptr;
  // next_free: the pool's free list (meaningful only while the packet is free).
  Packet* next_free = nullptr;

  std::span<uint8_t, wire::kFrameBytes> frame() { return bytes; }
  std::span<const uint8_t, wire::kFrameBytes> frame() const { return bytes; }
};

// PacketReturner: the deleter of PacketPtr (returns the packet to its pool).
struct PacketReturner {
  void operator()(Packet* packet) const;
};

using PacketPtr = std::unique_ptr<Packet, PacketReturner>;

// PacketPool: a free list of packets. Used by one thread at a time: each
// partition of a network has its own (sim/network.h).
// Must outlive every PacketPtr it handed out. The free list runs through the
// packets themselves, so returning one is three stores (a PacketPtr's
// destructor inlines to them) and never allocates.
class PacketPool {
 public:
  PacketPool() = default;
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;
  ~PacketPool();

  // Allocate: a packet with unspecified bytes.
  PacketPtr Allocate() {
    if (free_ == nullptr) [[unlikely]] {
      Grow();
    }
    Packet* packet = free_;
    free_ = packet->next_free;
    ++outstanding_;
    return PacketPtr(packet);
  }
  // Clone: a new packet holding a copy of `packet`'s bytes.
  PacketPtr Clone(const Packet& packet);

  // outstanding: packets handed out and not yet returned (a leak check).
  uint64_t outstanding() const { return outstanding_; }
  // capacity: packets ever allocated by the pool.
  size_t capacity() const { return storage_.size() * kPacketsPerSlab; }

 private:
  friend struct PacketReturner;
  static constexpr size_t kPacketsPerSlab = 1024;

  void Release(Packet* packet) {
    packet->next_free = free_;
    free_ = packet;
    --outstanding_;
  }
  void Grow();

  std::vector<std::unique_ptr<Packet[]>> storage_;
  Packet* free_ = nullptr;  // head of the free list (LIFO)
  uint64_t outstanding_ = 0;
};

inline void PacketReturner::operator()(Packet* packet) const { packet->pool->Release(packet); }

}  // namespace atp::sim

#endif  // ATP_SIM_PACKET_H_
