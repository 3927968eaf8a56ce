// lib/wire/header_layout.h: where the ATP header's fields lie (ATP-SPEC
// section 2), and the header rules evaluated on raw wire words. Private to
// lib/wire: shared by the message codec (wire.cc) and the frame codec
// (frame.cc) so that both apply exactly the same rules.
#ifndef ATP_LIB_WIRE_HEADER_LAYOUT_H_
#define ATP_LIB_WIRE_HEADER_LAYOUT_H_

#include <cstdint>

#include "atp/wire.h"
#include "lib/wire/frame_view.h"

namespace atp::wire::internal {

// Byte offsets inside the 16-byte ATP header.
inline constexpr int kJobSeqOffset = 0;  // job (8) | seq (24), one 32-bit word.
inline constexpr int kBitmap0Offset = 4;
inline constexpr int kBitmap1Offset = 8;
inline constexpr int kFanFlagsOffset = 12;  // fanIn0-1 (5) | fanIn1-1 (5) | 6 flags.
inline constexpr int kAggregatorOffset = 14;
static_assert(kAggregatorOffset + 2 == static_cast<int>(kAtpHeaderBytes));

inline constexpr int kJobShift = kSeqBits;
static_assert(kJobShift + 8 == 32, "job and seq share one 32-bit word");

// The 16-bit fan/flags word, most significant bit first: fanIn0 - 1 (5 bits),
// fanIn1 - 1 (5 bits), edge, resend, collision, ecn, ack, fp.
inline constexpr int kFanInFieldBits = 5;
inline constexpr uint16_t kFanInFieldMask = (1u << kFanInFieldBits) - 1;
inline constexpr int kFanIn0Shift = 11;
inline constexpr int kFanIn1Shift = 6;
inline constexpr uint16_t kEdgeBit = 1u << 5;
inline constexpr uint16_t kResendBit = 1u << 4;
inline constexpr uint16_t kCollisionBit = 1u << 3;
inline constexpr uint16_t kEcnBit = 1u << 2;
inline constexpr uint16_t kAckBit = 1u << 1;
inline constexpr uint16_t kFpBit = 1u << 0;
static_assert(kFanIn0Shift + kFanInFieldBits == 16);
static_assert(kFanIn1Shift + kFanInFieldBits == kFanIn0Shift);
static_assert(kEdgeBit << 1 == 1u << kFanIn1Shift, "six flags fill the bits below fanIn1");
static_assert((1 << kFanInFieldBits) == kMaxFanIn, "5 bits encode fan-ins 1..32");
// FrameView (frame_view.h) addresses the same bits.
static_assert(FrameView::kEdge == kEdgeBit && FrameView::kResend == kResendBit &&
              FrameView::kCollision == kCollisionBit && FrameView::kEcn == kEcnBit &&
              FrameView::kAck == kAckBit && FrameView::kFp == kFpBit);

// ContributorMask: the bitmap bits a fan-in of `encoded_fan_in + 1` allows
// (bits 0..fan_in-1). Only the low 5 bits of `encoded_fan_in` count, so the
// shift never reaches 32.
constexpr uint32_t ContributorMask(uint32_t encoded_fan_in) {
  return ~uint32_t{0} >> ((encoded_fan_in & kFanInFieldMask) ^ kFanInFieldMask);
}
static_assert(ContributorMask(0) == 0x1 && ContributorMask(3) == 0xF &&
              ContributorMask(31) == 0xFFFFFFFF);

// RawHeaderIsValid: ValidateHeader(DecodeHeader(bytes)) == kOk, evaluated on
// the raw words, for the per-packet fast path: a few branches, each one
// predictable when packets are valid. seq
// width and fan-in range cannot be wrong on the wire (their fields are exactly
// wide enough), so only the job and bitmap rules remain. On false, callers run
// ValidateHeader to learn which rule failed.
inline bool RawHeaderIsValid(uint32_t job_seq, uint32_t bitmap0, uint32_t bitmap1,
                             uint16_t fan_flags) {
  const uint32_t mask0 = ContributorMask(fan_flags >> kFanIn0Shift);
  const uint32_t mask1 = ContributorMask(fan_flags >> kFanIn1Shift);
  if (job_seq < (1u << kJobShift)) return false;  // job 0
  if ((fan_flags & kAckBit) == 0) [[likely]] {
    // A gradient: both bitmaps non-empty and inside their fan-ins (b - 1 <
    // mask, unsigned, says both at once), and at level 1 bitmap1 one rack.
    return bitmap0 - 1 < mask0 && bitmap1 - 1 < mask1 &&
           ((fan_flags & kEdgeBit) != 0 || (bitmap1 & (bitmap1 - 1)) == 0);
  }
  // A parameter packet: bitmaps may be empty; bitmap1 carries the new index
  // instead of racks when collision is set.
  return (bitmap0 & ~mask0) == 0 && ((fan_flags & kCollisionBit) != 0 || (bitmap1 & ~mask1) == 0);
}

}  // namespace atp::wire::internal

#endif  // ATP_LIB_WIRE_HEADER_LAYOUT_H_
