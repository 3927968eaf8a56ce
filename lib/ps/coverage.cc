#include "lib/ps/coverage.h"

#include <bit>

namespace atp::ps {

AddOutcome Coverage::TryAdd(const JobLayout& layout, const Contributors& who) {
  if (layout.declared_fan_ins()) return TryAddDeclared(who);
  if (who.level == Contributors::Level::kRackWorkers) {
    auto r = static_cast<size_t>(who.rack);
    if ((workers_[r] & who.workers) != 0) return AddOutcome::kOverlap;
    workers_[r] |= who.workers;
    touched_racks_ |= 1u << who.rack;
    if (workers_[r] == layout.rack_bitmap(who.rack)) complete_racks_ |= 1u << who.rack;
    return AddOutcome::kAdded;
  }
  // Whole racks: any worker already covered in one of them is an overlap.
  for (uint32_t racks = who.racks; racks != 0; racks &= racks - 1) {
    if (workers_[static_cast<size_t>(std::countr_zero(racks))] != 0) return AddOutcome::kOverlap;
  }
  for (uint32_t racks = who.racks; racks != 0; racks &= racks - 1) {
    int rack = std::countr_zero(racks);
    workers_[static_cast<size_t>(rack)] = layout.rack_bitmap(rack);
  }
  touched_racks_ |= who.racks;
  complete_racks_ |= who.racks;
  return AddOutcome::kAdded;
}

AddOutcome Coverage::TryAddDeclared(const Contributors& who) {
  if (racks_target_ != 0 && who.racks_target != racks_target_) return AddOutcome::kMismatch;
  if (who.level == Contributors::Level::kRackWorkers) {
    auto r = static_cast<size_t>(who.rack);
    if (rack_target_[r] != 0 && who.rack_target != rack_target_[r]) return AddOutcome::kMismatch;
    if ((workers_[r] & who.workers) != 0) return AddOutcome::kOverlap;
    workers_[r] |= who.workers;
    rack_target_[r] = who.rack_target;
    touched_racks_ |= 1u << who.rack;
    racks_target_ = who.racks_target;
    if (workers_[r] == who.rack_target) complete_racks_ |= 1u << who.rack;
    return AddOutcome::kAdded;
  }
  for (uint32_t racks = who.racks; racks != 0; racks &= racks - 1) {
    if (workers_[static_cast<size_t>(std::countr_zero(racks))] != 0) return AddOutcome::kOverlap;
  }
  // How many workers a rack had is not in a level-2 header: any later
  // level-1 packet of these racks overlaps.
  for (uint32_t racks = who.racks; racks != 0; racks &= racks - 1) {
    workers_[static_cast<size_t>(std::countr_zero(racks))] = ~uint32_t{0};
  }
  touched_racks_ |= who.racks;
  complete_racks_ |= who.racks;
  racks_target_ = who.racks_target;
  return AddOutcome::kAdded;
}

bool Coverage::CoversAll(const Contributors& who) const {
  if (who.level == Contributors::Level::kRackWorkers) {
    return (workers_[static_cast<size_t>(who.rack)] & who.workers) == who.workers;
  }
  return (complete_racks_ & who.racks) == who.racks;
}

}  // namespace atp::ps
