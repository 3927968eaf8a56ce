// lib/wire/frame_view.h: in-place access to the ATP fields of a frame that
// DecodeFrame has already accepted. For forwarding elements (the switch
// pipeline) that rewrite a few fields and pass the frame on without a copy.
//
//   if (DecodeFrame(bytes, base_port, nullptr, nullptr) != DecodeError::kOk) drop();
//   FrameView frame(bytes.data());
//   frame.set_flag(FrameView::kEcn, true);
//
// FrameView does not own the bytes and does no validation of its own.
#ifndef ATP_LIB_WIRE_FRAME_VIEW_H_
#define ATP_LIB_WIRE_FRAME_VIEW_H_

#include <cstdint>
#include <cstring>

#include "atp/wire.h"
#include "lib/wire/byte_order.h"

namespace atp::wire {

class FrameView {
 public:
  // Flag bits of the 16-bit word at ATP header offset 12 (below the two 5-bit fan-ins).
  enum Flag : uint16_t {
    kEdge = 1u << 5,
    kResend = 1u << 4,
    kCollision = 1u << 3,
    kEcn = 1u << 2,
    kAck = 1u << 1,
    kFp = 1u << 0,
  };

  // `frame` points at kFrameBytes valid bytes and outlives the view.
  explicit FrameView(uint8_t* frame) : frame_(frame) {}

  uint8_t job() const { return atp()[0]; }
  uint32_t seq() const { return Load32(atp()) & kSeqMask; }
  uint32_t bitmap0() const { return Load32(atp() + 4); }
  uint32_t bitmap1() const { return Load32(atp() + 8); }
  uint16_t fan_word() const { return Load16(atp() + 12); }
  int fan_in0() const { return ((fan_word() >> 11) & 0x1F) + 1; }
  int fan_in1() const { return ((fan_word() >> 6) & 0x1F) + 1; }
  bool flag(Flag f) const { return (fan_word() & f) != 0; }
  uint16_t aggregator() const { return Load16(atp() + 14); }

  void set_bitmap0(uint32_t v) { Store32(atp() + 4, v); }
  void set_bitmap1(uint32_t v) { Store32(atp() + 8, v); }
  void set_flag(Flag f, bool on) {
    uint16_t w = fan_word();
    Store16(atp() + 12, static_cast<uint16_t>(on ? (w | f) : (w & ~f)));
  }
  void set_aggregator(uint16_t v) { Store16(atp() + 14, v); }

  uint8_t ip_tos() const { return frame_[kIpv4Offset + 1]; }
  // MarkCongestionExperienced: IPv4 ECN codepoint to CE, checksum updated
  // incrementally (RFC 1624).
  void MarkCongestionExperienced() {
    uint8_t* ip = frame_ + kIpv4Offset;
    if ((ip[1] & 0x03) == 0x03) return;
    uint16_t old_word = Load16(ip);
    ip[1] = static_cast<uint8_t>(ip[1] | 0x03);
    uint16_t new_word = Load16(ip);
    uint32_t sum = static_cast<uint16_t>(~Load16(ip + 10)) + static_cast<uint16_t>(~old_word) +
                   static_cast<uint32_t>(new_word);
    sum = (sum & 0xFFFF) + (sum >> 16);
    sum = (sum & 0xFFFF) + (sum >> 16);
    Store16(ip + 10, static_cast<uint16_t>(~sum));
  }

  // payload: the 248 big-endian payload bytes.
  uint8_t* payload() { return frame_ + kPayloadOffset; }
  const uint8_t* payload() const { return frame_ + kPayloadOffset; }
  uint8_t* data() { return frame_; }

 private:
  uint8_t* atp() { return frame_ + kAtpOffset; }
  const uint8_t* atp() const { return frame_ + kAtpOffset; }
  static uint32_t Load32(const uint8_t* p) { return internal::LoadBig32(p); }
  static uint16_t Load16(const uint8_t* p) { return internal::LoadBig16(p); }
  static void Store32(uint8_t* p, uint32_t v) { internal::StoreBig32(p, v); }
  static void Store16(uint8_t* p, uint16_t v) { internal::StoreBig16(p, v); }

  uint8_t* frame_;
};

}  // namespace atp::wire

#endif  // ATP_LIB_WIRE_FRAME_VIEW_H_
