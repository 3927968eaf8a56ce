#include "sim/packet.h"

#include <cstring>

namespace atp::sim {

PacketPool::~PacketPool() = default;

void PacketPool::Grow() {
  auto slab = std::make_unique<Packet[]>(kPacketsPerSlab);
  free_.reserve(free_.size() + kPacketsPerSlab);
  for (size_t i = kPacketsPerSlab; i-- > 0;) {
    slab[i].pool = this;
    free_.push_back(&slab[i]);
  }
  storage_.push_back(std::move(slab));
}

PacketPtr PacketPool::Allocate() {
  if (free_.empty()) [[unlikely]] {
    Grow();
  }
  Packet* packet = free_.back();
  free_.pop_back();
  ++outstanding_;
  return PacketPtr(packet);
}

PacketPtr PacketPool::Clone(const Packet& packet) {
  PacketPtr copy = Allocate();
  std::memcpy(copy->bytes.data(), packet.bytes.data(), packet.bytes.size());
  return copy;
}

}  // namespace atp::sim
