// transport/dpdk/steering_rings.cc
#include "transport/dpdk/steering_rings.h"

#include <bit>

#include "absl/strings/str_cat.h"

namespace atp::transport::internal {

absl::StatusOr<std::unique_ptr<SteeringRings>> SteeringRings::Create(uint32_t num_queues,
                                                                     uint32_t ring_frames) {
  if (!std::has_single_bit(ring_frames)) {
    return absl::InvalidArgumentError(
        absl::StrCat("steering ring of ", ring_frames, " frames: a power of two"));
  }
  std::unique_ptr<SteeringRings> rings(new SteeringRings());
  for (uint32_t q = 0; q < num_queues; ++q) rings->slots_.push_back(std::make_unique<Slot>(ring_frames));
  return rings;
}

SteeringRings::~SteeringRings() {
  for (uint32_t q = 0; q < slots_.size(); ++q) {
    rte_mbuf* mbufs[64];
    for (size_t n; (n = Take(q, mbufs, 64)) > 0;) FreeMbufs(mbufs, n);
  }
}

}  // namespace atp::transport::internal
