#include "sim/packet.h"

#include <cstring>

namespace atp::sim {

PacketPool::~PacketPool() = default;

void PacketPool::Grow() {
  auto slab = std::make_unique<Packet[]>(kPacketsPerSlab);
  for (size_t i = kPacketsPerSlab; i-- > 0;) {  // slab[0] is handed out first
    slab[i].pool = this;
    slab[i].next_free = free_;
    free_ = &slab[i];
  }
  storage_.push_back(std::move(slab));
}

PacketPtr PacketPool::Clone(const Packet& packet) {
  PacketPtr copy = Allocate();
  std::memcpy(copy->bytes.data(), packet.bytes.data(), packet.bytes.size());
  return copy;
}

}  // namespace atp::sim
