#include "lib/ps/coverage.h"

#include <bit>

namespace atp::ps {

bool Coverage::TryAdd(const JobLayout& layout, const Contributors& who) {
  if (who.level == Contributors::Level::kRackWorkers) {
    auto r = static_cast<size_t>(who.rack);
    if ((workers_[r] & who.workers) != 0) return false;
    workers_[r] |= who.workers;
    if (workers_[r] == layout.rack_bitmap(who.rack)) complete_racks_ |= 1u << who.rack;
    return true;
  }
  // Whole racks: any worker already covered in one of them is an overlap.
  for (uint32_t racks = who.racks; racks != 0; racks &= racks - 1) {
    if (workers_[static_cast<size_t>(std::countr_zero(racks))] != 0) return false;
  }
  for (uint32_t racks = who.racks; racks != 0; racks &= racks - 1) {
    int rack = std::countr_zero(racks);
    workers_[static_cast<size_t>(rack)] = layout.rack_bitmap(rack);
  }
  complete_racks_ |= who.racks;
  return true;
}

bool Coverage::CoversAll(const Contributors& who) const {
  if (who.level == Contributors::Level::kRackWorkers) {
    return (workers_[static_cast<size_t>(who.rack)] & who.workers) == who.workers;
  }
  return (complete_racks_ & who.racks) == who.racks;
}

}  // namespace atp::ps
