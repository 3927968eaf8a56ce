// tests/unit/switch/switch_test_util.h: scripted frames for the switch
// pipeline tests, built with wire::EncodeFrame and read back with
// wire::DecodeFrame.
//
//   TestFrame f = Frame(Worker(/*job=*/1, /*seq=*/7, /*agg=*/5, /*worker=*/0, /*fan_in0=*/2),
//                       Ramp(10));
//   Decision d = pipeline.Process(f.span(), t0, 0);
#ifndef ATP_TESTS_UNIT_SWITCH_SWITCH_TEST_UTIL_H_
#define ATP_TESTS_UNIT_SWITCH_SWITCH_TEST_UTIL_H_

#include <cstdint>
#include <span>
#include <vector>

#include "atp/wire.h"
#include "gtest/gtest.h"

namespace atp::switch_emulator::testing {

// TestFrame: one frame in a heap buffer of exactly its size, so the address
// sanitizer catches any read or write beyond it.
struct TestFrame {
  std::vector<uint8_t> bytes;

  std::span<uint8_t> span() { return bytes; }
  std::span<const uint8_t> span() const { return bytes; }
};

// Worker: a level-1 gradient header from worker `worker` of rack `rack`.
inline wire::AtpHeader Worker(uint8_t job, uint32_t seq, uint16_t aggregator, int worker,
                              int fan_in0, int rack = 0, int fan_in1 = 1) {
  wire::AtpHeader h;
  h.job = job;
  h.seq = seq;
  h.aggregator = aggregator;
  h.bitmap0 = 1u << worker;
  h.bitmap1 = 1u << rack;
  h.fan_in0 = static_cast<uint8_t>(fan_in0);
  h.fan_in1 = static_cast<uint8_t>(fan_in1);
  return h;
}

// Rack: a level-2 gradient header (edge set): the complete result of rack
// `rack`, as a level-1 switch sends it on.
inline wire::AtpHeader Rack(uint8_t job, uint32_t seq, uint16_t aggregator, int rack, int fan_in1,
                            int workers_in_rack = 1) {
  wire::AtpHeader h = Worker(job, seq, aggregator, 0, workers_in_rack, rack, fan_in1);
  h.bitmap0 = workers_in_rack >= 32 ? 0xFFFFFFFFu : (1u << workers_in_rack) - 1;
  h.edge = true;
  return h;
}

// Ack: a parameter packet for (job, seq) at `aggregator`.
inline wire::AtpHeader Ack(uint8_t job, uint32_t seq, uint16_t aggregator) {
  wire::AtpHeader h;
  h.job = job;
  h.seq = seq;
  h.aggregator = aggregator;
  h.bitmap0 = 1;
  h.bitmap1 = 1;
  h.ack = true;
  return h;
}

// Ramp: payload value i = base * (i + 1), wrapping in uint32 arithmetic.
inline wire::Payload Ramp(int32_t base) {
  wire::Payload p;
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = static_cast<uint32_t>(base) * static_cast<uint32_t>(i + 1);
  }
  return p;
}

inline wire::Payload Sum(const wire::Payload& a, const wire::Payload& b) {
  wire::Payload s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = a[i] + b[i];
  return s;
}

inline TestFrame Frame(const wire::AtpHeader& header, const wire::Payload& payload,
                       uint16_t base_port = wire::kDefaultBasePort) {
  wire::FrameFields fields;
  fields.dst_mac.bytes = {0x02, 0, 0, 0, 0, 0x10};
  fields.src_mac.bytes = {0x02, 0, 0, 0, 0x01, 0x02};
  fields.src_ip.value = 0xC000020C;  // 192.0.2.12
  fields.dst_ip.value = 0xC0000264;  // 192.0.2.100
  fields.header = header;
  EXPECT_EQ(wire::ValidateHeader(header), wire::DecodeError::kOk) << "test builds a bad header";
  TestFrame f;
  f.bytes.resize(wire::kFrameBytes);
  wire::EncodeFrame(fields, payload, base_port,
                    std::span<uint8_t, wire::kFrameBytes>(f.bytes.data(), wire::kFrameBytes));
  return f;
}

// Decoded: a frame read back; `error` is kOk when it still validates.
struct Decoded {
  wire::DecodeError error = wire::DecodeError::kOk;
  wire::FrameFields fields;
  wire::Payload payload{};
  const wire::AtpHeader& header() const { return fields.header; }
};

inline Decoded Decode(const TestFrame& f, uint16_t base_port = wire::kDefaultBasePort) {
  Decoded d;
  d.error = wire::DecodeFrame(f.span(), base_port, &d.fields, &d.payload);
  return d;
}

// FixIpv4Checksum: recomputes the IPv4 header checksum after a test edited it.
inline void FixIpv4Checksum(TestFrame& f) {
  uint8_t* ip = f.bytes.data() + wire::kIpv4Offset;
  ip[10] = 0;
  ip[11] = 0;
  const uint16_t c = wire::Ipv4HeaderChecksum(
      std::span<const uint8_t, wire::kIpv4HeaderBytes>(ip, wire::kIpv4HeaderBytes));
  ip[10] = static_cast<uint8_t>(c >> 8);
  ip[11] = static_cast<uint8_t>(c);
}

}  // namespace atp::switch_emulator::testing

#endif  // ATP_TESTS_UNIT_SWITCH_SWITCH_TEST_UTIL_H_
