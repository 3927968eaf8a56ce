// lib/ps/slot_window.h: where a gradient's position stands relative to its
// window slot at the PS (ATP-SPEC sections 3 and 6).
//
// Positions are 20-bit and compared with serial-number arithmetic. A slot
// holds at most two generations: its last completed position c (whose
// parameter packet the PS keeps) and the next one, c + slots, which may be
// live. A worker sends c + slots only after it got c's parameter packet, so
// anything else is a stale copy (behind c) or does not belong to this stream
// yet (beyond c + slots).
#ifndef ATP_LIB_PS_SLOT_WINDOW_H_
#define ATP_LIB_PS_SLOT_WINDOW_H_

#include <cstdint>

#include "atp/wire.h"

namespace atp::ps {

enum class Generation : uint8_t {
  kStale,      // behind the last completed position
  kCompleted,  // the last completed position
  kNext,       // the live generation: completed + slots
  kAhead,      // beyond the live generation
};

// kHalfPositionSpace: serial-number arithmetic treats a distance below this as
// "ahead" and at or above it as "behind".
inline constexpr uint32_t kHalfPositionSpace = (wire::kPositionMask + 1) / 2;

// ClassifyPosition: `position` and `completed` are 20-bit positions of the same
// slot (equal modulo `slots`); `slots` is a power of two below
// kHalfPositionSpace.
constexpr Generation ClassifyPosition(uint32_t position, uint32_t completed, uint32_t slots) {
  uint32_t distance = (position - completed) & wire::kPositionMask;
  if (distance == 0) return Generation::kCompleted;
  if (distance == slots) return Generation::kNext;
  if (distance < kHalfPositionSpace) return Generation::kAhead;
  return Generation::kStale;
}

// InitialCompletedPosition: before anything completes, a slot behaves as if
// position `slot - slots` had completed, so that its first live position is
// `slot` (every queue's stream starts at position 0).
constexpr uint32_t InitialCompletedPosition(uint32_t slot, uint32_t slots) {
  return (slot - slots) & wire::kPositionMask;
}

static_assert(ClassifyPosition(5, InitialCompletedPosition(5, 8), 8) == Generation::kNext);
static_assert(ClassifyPosition(0, wire::kPositionMask + 1 - 4, 4) == Generation::kNext);
static_assert(ClassifyPosition(4, 12, 8) == Generation::kStale);
static_assert(ClassifyPosition(28, 12, 8) == Generation::kAhead);

}  // namespace atp::ps

#endif  // ATP_LIB_PS_SLOT_WINDOW_H_
