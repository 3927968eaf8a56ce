// sim/addressing.h: the simulated network's address plan.
//
// Host h of rack r has IPv4 address 10.r.(h >> 8).(h & 255) and MAC
// 02:00:<its four IPv4 bytes>. A multicast group g (one per job: the group the
// PS's parameter packets go to) has address 239.0.(g >> 8).(g & 255) and the
// matching IPv4 multicast MAC 01:00:5e:.... Switches route unicast frames by
// destination address and multicast frames by group.
#ifndef ATP_SIM_ADDRESSING_H_
#define ATP_SIM_ADDRESSING_H_

#include <cstdint>

#include "atp/wire.h"
#include "sim/packet.h"

namespace atp::sim {

inline constexpr int kMaxRacks = 255;
inline constexpr int kMaxHostsPerRack = 65536;

constexpr uint32_t HostIp(int rack, int host) {
  return (10u << 24) | (static_cast<uint32_t>(rack) << 16) | static_cast<uint32_t>(host);
}
constexpr uint32_t GroupIp(uint32_t group) { return (239u << 24) | (group & 0xFFFF); }
constexpr bool IsGroupIp(uint32_t ip) { return (ip >> 24) == 239u; }
constexpr uint32_t GroupOfIp(uint32_t ip) { return ip & 0xFFFF; }

// MacOf: the MAC of a host or group address.
inline wire::MacAddress MacOf(uint32_t ip) {
  wire::MacAddress mac;
  if (IsGroupIp(ip)) {
    mac.bytes = {0x01, 0x00, 0x5e, static_cast<uint8_t>((ip >> 16) & 0x7F),
                 static_cast<uint8_t>(ip >> 8), static_cast<uint8_t>(ip)};
  } else {
    mac.bytes = {0x02, 0x00, static_cast<uint8_t>(ip >> 24), static_cast<uint8_t>(ip >> 16),
                 static_cast<uint8_t>(ip >> 8), static_cast<uint8_t>(ip)};
  }
  return mac;
}

// DstIpOf: the destination IPv4 address of a frame, read without validation.
inline uint32_t DstIpOf(const Packet& packet) {
  const uint8_t* p = packet.bytes.data() + wire::kIpv4Offset + 16;
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | p[3];
}

}  // namespace atp::sim

#endif  // ATP_SIM_ADDRESSING_H_
