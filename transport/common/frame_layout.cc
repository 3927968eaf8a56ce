// transport/common/frame_layout.cc: rebuilding L2-L4 headers for backends whose
// medium carries only the ATP message.
#include "transport/common/frame_layout.h"

#include <cstring>

namespace atp::transport::internal {
namespace {

void StoreBig16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void StoreBig32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}

constexpr uint16_t kDontFragment = 0x4000;

}  // namespace

void WriteL2L4Header(const L2L4Addresses& addresses, uint8_t tos, uint16_t port,
                     std::span<uint8_t, wire::kL2L4HeaderBytes> out) {
  uint8_t* p = out.data();
  std::memcpy(p, addresses.dst.mac.bytes.data(), 6);
  std::memcpy(p + 6, addresses.src.mac.bytes.data(), 6);
  StoreBig16(p + 12, wire::kEtherTypeIpv4);
  uint8_t* ip = p + wire::kIpv4Offset;
  ip[0] = 0x45;
  ip[1] = tos;
  StoreBig16(ip + 2, wire::kIpv4TotalLength);
  StoreBig16(ip + 4, 0);  // identification
  StoreBig16(ip + 6, kDontFragment);
  ip[8] = wire::kDefaultTtl;
  ip[9] = wire::kIpProtocolUdp;
  StoreBig16(ip + 10, 0);
  StoreBig32(ip + 12, addresses.src.ipv4.value);
  StoreBig32(ip + 16, addresses.dst.ipv4.value);
  // Ipv4HeaderChecksum returns the value in the form a big-endian load of the
  // stored field reads; store it the same way.
  StoreBig16(ip + 10, wire::Ipv4HeaderChecksum(
                          std::span<const uint8_t, wire::kIpv4HeaderBytes>(ip, wire::kIpv4HeaderBytes)));
  uint8_t* udp = p + wire::kUdpOffset;
  StoreBig16(udp, port);
  StoreBig16(udp + 2, port);
  StoreBig16(udp + 4, wire::kUdpLength);
  StoreBig16(udp + 6, 0);
}

}  // namespace atp::transport::internal
