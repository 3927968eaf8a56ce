// lib/wire/wire.cc: the ATP header, payload and message codec, and the
// header-level rules (ATP-SPEC section 2). The frame codec is in frame.cc,
// address parsing in address.cc.
#include <cassert>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#if defined(__x86_64__)
#include <tmmintrin.h>
#endif

#include "atp/wire.h"
#include "lib/wire/byte_order.h"
#include "lib/wire/frame_checks.h"
#include "lib/wire/header_layout.h"

namespace atp::wire {
namespace {

using internal::kAckBit;
using internal::kAggregatorOffset;
using internal::kBitmap0Offset;
using internal::kBitmap1Offset;
using internal::kCollisionBit;
using internal::kEcnBit;
using internal::kEdgeBit;
using internal::kFanFlagsOffset;
using internal::kFanIn0Shift;
using internal::kFanIn1Shift;
using internal::kFanInFieldMask;
using internal::kFpBit;
using internal::kJobSeqOffset;
using internal::kJobShift;
using internal::kResendBit;
using internal::LoadBig16;
using internal::LoadBig32;
using internal::StoreBig16;
using internal::StoreBig32;

}  // namespace

std::string_view DecodeErrorName(DecodeError error) {
  switch (error) {
    case DecodeError::kOk: return "ok";
    case DecodeError::kShortFrame: return "short_frame";
    case DecodeError::kLongFrame: return "long_frame";
    case DecodeError::kNotIpv4: return "not_ipv4";
    case DecodeError::kBadIpv4Header: return "bad_ipv4_header";
    case DecodeError::kBadIpv4TotalLength: return "bad_ipv4_total_length";
    case DecodeError::kBadIpv4Checksum: return "bad_ipv4_checksum";
    case DecodeError::kNotUdp: return "not_udp";
    case DecodeError::kBadUdpLength: return "bad_udp_length";
    case DecodeError::kBadUdpPort: return "bad_udp_port";
    case DecodeError::kBadTos: return "bad_tos";
    case DecodeError::kJobZero: return "job_zero";
    case DecodeError::kSeqOutOfRange: return "seq_out_of_range";
    case DecodeError::kFanInOutOfRange: return "fan_in_out_of_range";
    case DecodeError::kBitmap0BeyondFanIn: return "bitmap0_beyond_fan_in";
    case DecodeError::kBitmap1BeyondFanIn: return "bitmap1_beyond_fan_in";
    case DecodeError::kEmptyBitmap: return "empty_bitmap";
    case DecodeError::kAmbiguousRack: return "ambiguous_rack";
  }
  return "unknown";
}

DecodeError ValidateHeader(const AtpHeader& header) {
  if (header.job == 0) return DecodeError::kJobZero;
  if (header.seq > kSeqMask) return DecodeError::kSeqOutOfRange;
  if (header.fan_in0 < 1 || header.fan_in0 > kMaxFanIn || header.fan_in1 < 1 ||
      header.fan_in1 > kMaxFanIn) {
    return DecodeError::kFanInOutOfRange;
  }
  if ((header.bitmap0 & ~internal::ContributorMask(header.fan_in0 - 1u)) != 0) {
    return DecodeError::kBitmap0BeyondFanIn;
  }
  // A parameter packet reporting a collision carries the new aggregator index
  // in bitmap1, not racks.
  const bool carries_index = header.ack && header.collision;
  if (!carries_index && (header.bitmap1 & ~internal::ContributorMask(header.fan_in1 - 1u)) != 0) {
    return DecodeError::kBitmap1BeyondFanIn;
  }
  // Gradients (not ack) name their contributors; parameter packets, among them
  // overflow requests, may carry empty bitmaps.
  if (!header.ack) {
    if (header.bitmap0 == 0 || header.bitmap1 == 0) return DecodeError::kEmptyBitmap;
    // At level 1, bitmap1 says which rack bitmap0's workers belong to: one
    // bit (nonzero, checked above). Not std::popcount: without -mpopcnt that
    // is a libgcc call on every gradient the PS validates.
    if (!header.edge && (header.bitmap1 & (header.bitmap1 - 1)) != 0) {
      return DecodeError::kAmbiguousRack;
    }
  }
  return DecodeError::kOk;
}

void EncodeHeader(const AtpHeader& header, std::span<uint8_t, kAtpHeaderBytes> out) {
  assert(header.seq <= kSeqMask);
  assert(header.fan_in0 >= 1 && header.fan_in0 <= kMaxFanIn);
  assert(header.fan_in1 >= 1 && header.fan_in1 <= kMaxFanIn);
  uint8_t* p = out.data();
  StoreBig32(p + kJobSeqOffset,
             (static_cast<uint32_t>(header.job) << kJobShift) | (header.seq & kSeqMask));
  StoreBig32(p + kBitmap0Offset, header.bitmap0);
  StoreBig32(p + kBitmap1Offset, header.bitmap1);
  const uint32_t fan_flags =
      (((header.fan_in0 - 1u) & kFanInFieldMask) << kFanIn0Shift) |
      (((header.fan_in1 - 1u) & kFanInFieldMask) << kFanIn1Shift) |
      (header.edge ? kEdgeBit : 0u) | (header.resend ? kResendBit : 0u) |
      (header.collision ? kCollisionBit : 0u) | (header.ecn ? kEcnBit : 0u) |
      (header.ack ? kAckBit : 0u) | (header.fp ? kFpBit : 0u);
  StoreBig16(p + kFanFlagsOffset, static_cast<uint16_t>(fan_flags));
  StoreBig16(p + kAggregatorOffset, header.aggregator);
}

AtpHeader DecodeHeader(std::span<const uint8_t, kAtpHeaderBytes> in) {
  AtpHeader header;
  internal::DecodeHeaderWords(internal::LoadHeaderWordsAt(in.data()), &header);
  return header;
}

namespace {

#if defined(__x86_64__)
// SwapPayloadSsse3: internal::SwapBytes32 of the 62 values with one byte
// shuffle per four (pshufb) instead of the SSE2 baseline's five shifts and
// shuffles: the PS decodes and encodes every payload it handles. SSSE3 is on
// every x86-64 CPU since 2007 and still 128 bits wide (ATP_MAX_CPU_ISA,
// about 512-bit clock hazards, does not apply); checked at run time anyway.
[[gnu::target("ssse3")]] void SwapPayloadSsse3(const uint8_t* in, uint8_t* out) {
  const __m128i reverse_each_word =
      _mm_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
  size_t i = 0;
  // Unrolled whole: 15 loads, shuffles and stores, without a counter and a
  // branch per four values (about 55 instructions instead of 100).
#pragma GCC unroll 16
  for (; i + 4 <= kValuesPerFragment; i += 4) {
    __m128i v;
    std::memcpy(&v, in + 4 * i, sizeof(v));
    v = _mm_shuffle_epi8(v, reverse_each_word);
    std::memcpy(out + 4 * i, &v, sizeof(v));
  }
  internal::SwapBytes32(in + 4 * i, out + 4 * i, kValuesPerFragment - i);
}
#endif

void SwapPayload(const uint8_t* in, uint8_t* out) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("ssse3")) return SwapPayloadSsse3(in, out);
#endif
  internal::SwapBytes32(in, out, kValuesPerFragment);
}

}  // namespace

void EncodePayload(const Payload& payload, std::span<uint8_t, kPayloadBytes> out) {
  static_assert(sizeof(Payload) == kPayloadBytes, "Payload is 62 packed uint32");
  SwapPayload(reinterpret_cast<const uint8_t*>(payload.data()), out.data());
}

void DecodePayload(std::span<const uint8_t, kPayloadBytes> in, Payload& out) {
  SwapPayload(in.data(), reinterpret_cast<uint8_t*>(out.data()));
}

void EncodeMessage(const AtpMessage& message, std::span<uint8_t, kMessageBytes> out) {
  EncodeHeader(message.header, out.first<kAtpHeaderBytes>());
  EncodePayload(message.payload, out.subspan<kAtpHeaderBytes, kPayloadBytes>());
}

DecodeError DecodeMessage(std::span<const uint8_t> in, AtpMessage* out) {
  if (in.size() < kMessageBytes) return DecodeError::kShortFrame;
  if (in.size() > kMessageBytes) return DecodeError::kLongFrame;
  const AtpHeader header = DecodeHeader(in.first<kAtpHeaderBytes>());
  const DecodeError error = ValidateHeader(header);
  if (error != DecodeError::kOk) return error;
  out->header = header;
  DecodePayload(in.subspan<kAtpHeaderBytes, kPayloadBytes>(), out->payload);
  return DecodeError::kOk;
}

}  // namespace atp::wire
