// transport/common/frame_layout.h: what a transport reads from, and writes
// into, the L2-L4 headers of an ATP frame. Private to transport/.
//
// Transports check only what they need to route and steer a frame (its length,
// IPv4 without options, UDP, a destination port in the ATP range); whether the
// ATP header makes sense is the decoder's business (wire::DecodeFrame).
#ifndef ATP_TRANSPORT_COMMON_FRAME_LAYOUT_H_
#define ATP_TRANSPORT_COMMON_FRAME_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "atp/transport.h"
#include "atp/wire.h"

namespace atp::transport::internal {

inline constexpr size_t kIpTosOffset = wire::kIpv4Offset + 1;
inline constexpr size_t kIpSrcOffset = wire::kIpv4Offset + 12;
inline constexpr size_t kIpDstOffset = wire::kIpv4Offset + 16;
inline constexpr size_t kUdpDstPortOffset = wire::kUdpOffset + 2;

inline uint32_t LoadBig32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
inline uint16_t LoadBig16(const uint8_t* p) {
  return static_cast<uint16_t>((p[0] << 8) | p[1]);
}

// RoutableFrame: the fields a transport routes and steers by.
struct RoutableFrame {
  uint32_t dst_ipv4 = 0;  // host order
  uint32_t queue = 0;     // UDP destination port - base_port, < kMaxQueues
  uint8_t tos = 0;        // IPv4 TOS byte (ECN in its low two bits)
};

// ClassifyFrame: true, with `out` filled, when `frame` is kFrameBytes long,
// IPv4 without options, UDP, and its destination port is in
// [base_port, base_port + 16).
inline bool ClassifyFrame(std::span<const uint8_t> frame, uint16_t base_port, RoutableFrame* out) {
  if (frame.size() != wire::kFrameBytes) return false;
  const uint8_t* p = frame.data();
  if (LoadBig16(p + 12) != wire::kEtherTypeIpv4 || p[wire::kIpv4Offset] != 0x45 ||
      p[wire::kIpv4Offset + 9] != wire::kIpProtocolUdp) {
    return false;
  }
  const uint32_t queue = uint32_t{LoadBig16(p + kUdpDstPortOffset)} - base_port;
  if (queue >= kMaxQueues) return false;  // also catches ports below base (wraps)
  out->dst_ipv4 = LoadBig32(p + kIpDstOffset);
  out->queue = queue;
  out->tos = p[kIpTosOffset];
  return true;
}

// L2L4Addresses: what a rebuilt frame's Ethernet and IPv4 headers carry.
struct L2L4Addresses {
  DeviceAddress src;
  DeviceAddress dst;
};

// WriteL2L4Header: the 42 bytes in front of an ATP message, exactly as
// wire::EncodeFrame writes them (identification 0, DF, TTL 64, UDP checksum 0),
// with both UDP ports = `port`.
void WriteL2L4Header(const L2L4Addresses& addresses, uint8_t tos, uint16_t port,
                     std::span<uint8_t, wire::kL2L4HeaderBytes> out);

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_COMMON_FRAME_LAYOUT_H_
