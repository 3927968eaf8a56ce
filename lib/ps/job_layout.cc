#include "lib/ps/job_layout.h"

#include <algorithm>
#include <bit>

namespace atp::ps {
namespace {

// OneBit: exactly one bit set. (std::popcount compiles to a libgcc call
// without -mpopcnt; this is two instructions.)
constexpr bool OneBit(uint32_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

JobLayout::JobLayout(const protocol::JobShape& shape, bool declared_fan_ins)
    : job_(shape.job),
      declared_fan_ins_(declared_fan_ins),
      racks_(shape.racks()), all_racks_(shape.AllRacksBitmap()) {
  int offset = 0;
  for (int r = 0; r < racks_; ++r) {
    auto i = static_cast<size_t>(r);
    rack_workers_[i] = static_cast<uint8_t>(shape.workers_in_rack(r));
    rack_bitmap_[i] = shape.RackBitmap(r);
    rack_offset_[i] = offset;
    offset += shape.workers_in_rack(r);
    max_rack_workers_ = std::max(max_rack_workers_, shape.workers_in_rack(r));
  }
  total_workers_ = offset;
}

ParseOutcome JobLayout::Parse(const wire::AtpHeader& header, Contributors* out) const {
  // Structural rules first (wire::ValidateHeader has them too; they are
  // repeated here because the indexing below depends on them).
  if (header.bitmap1 == 0) return ParseOutcome::kMalformed;
  if (!header.edge && (!OneBit(header.bitmap1) || header.bitmap0 == 0)) {
    return ParseOutcome::kMalformed;
  }
  if (header.fp && (header.edge || !OneBit(header.bitmap0))) {
    return ParseOutcome::kMalformed;
  }
  if (declared_fan_ins_) return ParseDeclared(header, out);
  // Then agreement with the job's shape.
  if (header.fan_in1 != racks_ || (header.bitmap1 & ~all_racks_) != 0) {
    return ParseOutcome::kShapeMismatch;
  }
  if (header.edge) {
    out->level = Contributors::Level::kWholeRacks;
    out->racks = header.bitmap1;
    out->rack = 0;
    out->workers = 0;
    return ParseOutcome::kOk;
  }
  int rack = std::countr_zero(header.bitmap1);
  auto r = static_cast<size_t>(rack);
  if (header.fan_in0 != rack_workers_[r] || (header.bitmap0 & ~rack_bitmap_[r]) != 0) {
    return ParseOutcome::kShapeMismatch;
  }
  out->level = Contributors::Level::kRackWorkers;
  out->rack = rack;
  out->workers = header.bitmap0;
  out->racks = 0;
  return ParseOutcome::kOk;
}

ParseOutcome JobLayout::ParseDeclared(const wire::AtpHeader& header, Contributors* out) const {
  // The header declares the seq's contributor set; it must fit in the shape.
  const uint32_t racks_target = protocol::JobShape::LowBits(header.fan_in1);
  if (header.fan_in1 == 0 || header.fan_in1 > racks_ || (header.bitmap1 & ~racks_target) != 0) {
    return ParseOutcome::kShapeMismatch;
  }
  out->racks_target = racks_target;
  if (header.edge) {
    out->level = Contributors::Level::kWholeRacks;
    out->racks = header.bitmap1;
    out->rack = 0;
    out->workers = 0;
    out->rack_target = 0;
    return ParseOutcome::kOk;
  }
  const uint32_t rack_target = protocol::JobShape::LowBits(header.fan_in0);
  if (header.fan_in0 == 0 || header.fan_in0 > max_rack_workers_ ||
      (header.bitmap0 & ~rack_target) != 0) {
    return ParseOutcome::kShapeMismatch;
  }
  out->level = Contributors::Level::kRackWorkers;
  out->rack = std::countr_zero(header.bitmap1);
  out->workers = header.bitmap0;
  out->racks = 0;
  out->rack_target = rack_target;
  return ParseOutcome::kOk;
}

}  // namespace atp::ps
