// tests/unit/wire/wire_test_util.h: random valid headers and frames, and
// helpers to edit frames, for the wire tests. Deterministic: every generator
// takes the caller's seeded engine.
#ifndef ATP_TESTS_UNIT_WIRE_WIRE_TEST_UTIL_H_
#define ATP_TESTS_UNIT_WIRE_WIRE_TEST_UTIL_H_

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <string_view>
#include <vector>

#include "atp/wire.h"

namespace atp::wire::testing {

using Frame = std::array<uint8_t, kFrameBytes>;
using Rng = std::mt19937_64;

inline uint32_t Uniform(Rng& rng, uint32_t lo, uint32_t hi) {
  return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
}
inline bool Coin(Rng& rng) { return (rng() & 1) != 0; }

// RandomValidHeader: a header that ValidateHeader accepts, covering gradients
// at both levels, parameter packets (with and without a new index) and
// overflow requests.
inline AtpHeader RandomValidHeader(Rng& rng) {
  AtpHeader h;
  h.job = static_cast<uint8_t>(Uniform(rng, 1, kMaxJobId));
  h.seq = Uniform(rng, 0, kSeqMask);
  h.fan_in0 = static_cast<uint8_t>(Uniform(rng, 1, kMaxFanIn));
  h.fan_in1 = static_cast<uint8_t>(Uniform(rng, 1, kMaxFanIn));
  h.edge = Coin(rng);
  h.resend = Coin(rng);
  h.collision = Coin(rng);
  h.ecn = Coin(rng);
  h.ack = Uniform(rng, 0, 3) == 0;
  h.fp = Coin(rng);
  h.aggregator = static_cast<uint16_t>(rng());
  const uint32_t mask0 = h.fan_in0 == 32 ? ~0u : (1u << h.fan_in0) - 1;
  const uint32_t mask1 = h.fan_in1 == 32 ? ~0u : (1u << h.fan_in1) - 1;
  h.bitmap0 = static_cast<uint32_t>(rng()) & mask0;
  h.bitmap1 = static_cast<uint32_t>(rng()) & mask1;
  if (h.ack && h.collision) h.bitmap1 = static_cast<uint32_t>(rng());  // any new index
  if (h.IsOverflowRequest() && Coin(rng)) h.bitmap0 = h.bitmap1 = 0;
  if (!h.ack) {
    if (h.bitmap0 == 0) h.bitmap0 = 1;
    if (!h.edge) h.bitmap1 = 1u << Uniform(rng, 0, h.fan_in1 - 1u);
    if (h.bitmap1 == 0) h.bitmap1 = 1;
  }
  return h;
}

inline Payload RandomPayload(Rng& rng) {
  Payload p;
  for (uint32_t& v : p) v = static_cast<uint32_t>(rng());
  return p;
}

inline FrameFields RandomFields(Rng& rng) {
  FrameFields f;
  for (uint8_t& b : f.dst_mac.bytes) b = static_cast<uint8_t>(rng());
  for (uint8_t& b : f.src_mac.bytes) b = static_cast<uint8_t>(rng());
  f.src_ip.value = static_cast<uint32_t>(rng());
  f.dst_ip.value = static_cast<uint32_t>(rng());
  f.ip_tos = Coin(rng) ? kTosEct0 : kTosCe;
  f.header = RandomValidHeader(rng);
  return f;
}

inline Frame Encode(const FrameFields& fields, const Payload& payload,
                    uint16_t base_port = kDefaultBasePort) {
  Frame frame;
  EncodeFrame(fields, payload, base_port, frame);
  return frame;
}

// A fixed, valid level-1 gradient frame for hand-written tests.
inline FrameFields SampleFields() {
  FrameFields f;
  f.dst_mac.bytes = {0x02, 0, 0, 0, 0, 0x10};
  f.src_mac.bytes = {0x02, 0, 0, 0, 0x01, 0x02};
  f.src_ip.value = 0xC000020C;  // 192.0.2.12
  f.dst_ip.value = 0xC0000264;  // 192.0.2.100
  f.header.job = 3;
  f.header.seq = MakeSeq(2, 5);
  f.header.bitmap0 = 0x4;
  f.header.bitmap1 = 0x2;
  f.header.fan_in0 = 4;
  f.header.fan_in1 = 2;
  f.header.aggregator = 1234;
  return f;
}
inline Payload SamplePayload() {
  Payload p;
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint32_t>(i * 0x01010101u);
  return p;
}

// Big-endian field edits at a frame offset.
inline void Put16(Frame& frame, size_t offset, uint16_t v) {
  frame[offset] = static_cast<uint8_t>(v >> 8);
  frame[offset + 1] = static_cast<uint8_t>(v);
}
inline void Put32(Frame& frame, size_t offset, uint32_t v) {
  Put16(frame, offset, static_cast<uint16_t>(v >> 16));
  Put16(frame, offset + 2, static_cast<uint16_t>(v));
}
inline uint16_t Get16(std::span<const uint8_t> frame, size_t offset) {
  return static_cast<uint16_t>(frame[offset] << 8 | frame[offset + 1]);
}

// RefreshIpv4Checksum: recompute the IPv4 header checksum after an edit.
inline void RefreshIpv4Checksum(Frame& frame) {
  Put16(frame, kIpv4Offset + 10, 0);
  Put16(frame, kIpv4Offset + 10,
        Ipv4HeaderChecksum(std::span<const uint8_t, kIpv4HeaderBytes>(
            frame.data() + kIpv4Offset, kIpv4HeaderBytes)));
}

// Offsets of IPv4/UDP fields inside a frame.
inline constexpr size_t kEtherTypeAt = 12;
inline constexpr size_t kVersionIhlAt = kIpv4Offset + 0;
inline constexpr size_t kTosAt = kIpv4Offset + 1;
inline constexpr size_t kTotalLengthAt = kIpv4Offset + 2;
inline constexpr size_t kIdentificationAt = kIpv4Offset + 4;
inline constexpr size_t kFlagsFragmentAt = kIpv4Offset + 6;
inline constexpr size_t kTtlAt = kIpv4Offset + 8;
inline constexpr size_t kProtocolAt = kIpv4Offset + 9;
inline constexpr size_t kChecksumAt = kIpv4Offset + 10;
inline constexpr size_t kSrcPortAt = kUdpOffset + 0;
inline constexpr size_t kDstPortAt = kUdpOffset + 2;
inline constexpr size_t kUdpLengthAt = kUdpOffset + 4;
inline constexpr size_t kUdpChecksumAt = kUdpOffset + 6;

inline std::vector<uint8_t> HexToBytes(std::string_view hex) {
  auto nibble = [](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    return static_cast<uint8_t>(c - 'A' + 10);
  };
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<uint8_t>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  }
  return bytes;
}

}  // namespace atp::wire::testing

#endif  // ATP_TESTS_UNIT_WIRE_WIRE_TEST_UTIL_H_
