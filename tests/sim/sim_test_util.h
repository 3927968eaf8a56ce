// tests/sim/sim_test_util.h: small helpers shared by the simulator's tests.
#ifndef ATP_TESTS_SIM_SIM_TEST_UTIL_H_
#define ATP_TESTS_SIM_SIM_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "atp/wire.h"
#include "sim/link.h"
#include "sim/packet.h"
#include "sim/packet_filter.h"

namespace atp::sim::testing {

// MakeFrame: a valid gradient frame (or, for kParameterPackets, a parameter
// packet) whose position is `position`, so tests can tell frames apart after
// delivery.
inline PacketPtr MakeFrame(PacketPool& pool, uint32_t position,
                           TrafficClass kind = TrafficClass::kGradients) {
  const bool ack = kind == TrafficClass::kParameterPackets;
  wire::FrameFields fields;
  fields.src_ip.value = 0x0A000001;
  fields.dst_ip.value = 0x0A000002;
  fields.header.job = 1;
  fields.header.seq = wire::MakeSeq(0, position);
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  fields.header.ack = ack;
  wire::Payload payload{};
  payload[0] = position;
  PacketPtr packet = pool.Allocate();
  wire::EncodeFrame(fields, payload, wire::kDefaultBasePort, packet->frame());
  return packet;
}

// PositionOf: the position MakeFrame put in a frame (read without validation).
inline uint32_t PositionOf(const Packet& packet) {
  return wire::PositionOfSeq(
      wire::DecodeHeader(std::span<const uint8_t, wire::kAtpHeaderBytes>(
                             packet.bytes.data() + wire::kAtpOffset, wire::kAtpHeaderBytes))
          .seq);
}

// Collector: a receiver that records what arrived and when.
class Collector : public PacketReceiver {
 public:
  struct Arrival {
    uint32_t position;
    int64_t time_ns;
    int port;
    wire::DecodeError decode;
    uint8_t ip_tos;
  };
  void Receive(PacketPtr packet, int port, TimePoint now) override {
    arrivals.push_back(Arrival{PositionOf(*packet), now.ToNanoseconds(), port,
                               wire::DecodeFrame(packet->bytes, wire::kDefaultBasePort,
                                                 nullptr, nullptr),
                               packet->bytes[wire::kIpv4Offset + 1]});
  }
  std::vector<Arrival> arrivals;
};

}  // namespace atp::sim::testing

#endif  // ATP_TESTS_SIM_SIM_TEST_UTIL_H_
