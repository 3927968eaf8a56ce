// Golden vectors: tests/vectors/atp-frames.json holds frames written byte by
// byte from ATP-SPEC section 2. Every valid one decodes to its fields and
// encodes back to its bytes; every invalid one is rejected with its error.
#include <bit>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "atp/wire.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/unit/wire/wire_test_util.h"

#ifndef ATP_TEST_VECTORS
#error "ATP_TEST_VECTORS must name tests/vectors/atp-frames.json"
#endif

namespace atp::wire {
namespace {

using nlohmann::json;
using testing::HexToBytes;

const json& Vectors() {
  static const json* const vectors = [] {
    std::ifstream in(ATP_TEST_VECTORS);
    if (!in) return new json();
    return new json(json::parse(in));
  }();
  return *vectors;
}

uint16_t BasePort() { return Vectors().at("base_port").get<uint16_t>(); }

bool Flag(const json& fields, const char* name) { return fields.value(name, 0) != 0; }

// ExpectedFields: the FrameFields and payload a vector's "fields" describe.
void ExpectedFields(const json& f, FrameFields* fields, Payload* payload) {
  auto mac = MacAddress::Parse(f.at("dst_mac").get<std::string>());
  ASSERT_TRUE(mac.ok()) << mac.status();
  fields->dst_mac = *mac;
  mac = MacAddress::Parse(f.at("src_mac").get<std::string>());
  ASSERT_TRUE(mac.ok()) << mac.status();
  fields->src_mac = *mac;
  auto ip = Ipv4Address::Parse(f.at("src_ip").get<std::string>());
  ASSERT_TRUE(ip.ok()) << ip.status();
  fields->src_ip = *ip;
  ip = Ipv4Address::Parse(f.at("dst_ip").get<std::string>());
  ASSERT_TRUE(ip.ok()) << ip.status();
  fields->dst_ip = *ip;
  fields->ip_tos = f.value("ip_tos", kTosEct0);
  AtpHeader& h = fields->header;
  h.job = f.at("job").get<uint8_t>();
  h.seq = f.at("seq").get<uint32_t>();
  h.bitmap0 = f.at("bitmap0").get<uint32_t>();
  h.bitmap1 = f.at("bitmap1").get<uint32_t>();
  h.fan_in0 = f.at("fan_in0").get<uint8_t>();
  h.fan_in1 = f.at("fan_in1").get<uint8_t>();
  h.edge = Flag(f, "edge");
  h.resend = Flag(f, "resend");
  h.collision = Flag(f, "collision");
  h.ecn = Flag(f, "ecn");
  h.ack = Flag(f, "ack");
  h.fp = Flag(f, "fp");
  h.aggregator = f.at("aggregator").get<uint16_t>();
  const json& data = f.at("data");
  ASSERT_EQ(data.size(), kValuesPerFragment);
  for (size_t i = 0; i < kValuesPerFragment; ++i) {
    if (h.fp) {
      const double value = data[i].get<double>();
      const float as_float = static_cast<float>(value);
      ASSERT_EQ(static_cast<double>(as_float), value) << "data[" << i << "] is not a float32";
      (*payload)[i] = std::bit_cast<uint32_t>(as_float);
    } else {
      (*payload)[i] = static_cast<uint32_t>(data[i].get<int32_t>());
    }
  }
}

TEST(WireGoldenVectors, FileHasValidAndInvalidFramesOfFrameSize) {
  ASSERT_FALSE(Vectors().is_null()) << "cannot read " << ATP_TEST_VECTORS;
  EXPECT_EQ(Vectors().at("frame_bytes").get<size_t>(), kFrameBytes);
  EXPECT_GE(Vectors().at("valid").size(), 10u);
  EXPECT_GE(Vectors().at("invalid").size(), 7u);
}

TEST(WireGoldenVectors, EveryValidFrameDecodesToItsFields) {
  ASSERT_FALSE(Vectors().is_null());
  for (const json& v : Vectors().at("valid")) {
    SCOPED_TRACE(v.at("name").get<std::string>());
    const std::vector<uint8_t> bytes = HexToBytes(v.at("hex").get<std::string>());
    FrameFields want;
    Payload want_payload;
    ExpectedFields(v.at("fields"), &want, &want_payload);
    FrameFields got;
    Payload got_payload;
    ASSERT_EQ(DecodeFrame(bytes, BasePort(), &got, &got_payload), DecodeError::kOk);
    EXPECT_EQ(ValidateFrame(bytes, BasePort()), DecodeError::kOk);
    EXPECT_TRUE(IsAtpFrame(bytes, BasePort()));
    EXPECT_EQ(got.dst_mac, want.dst_mac);
    EXPECT_EQ(got.src_mac, want.src_mac);
    EXPECT_EQ(got.src_ip, want.src_ip);
    EXPECT_EQ(got.dst_ip, want.dst_ip);
    EXPECT_EQ(got.ip_tos, want.ip_tos);
    EXPECT_EQ(got.header, want.header);
    EXPECT_EQ(got_payload, want_payload);
    // The last 264 bytes are the message a UDP socket carries.
    AtpMessage message;
    ASSERT_EQ(DecodeMessage(std::span(bytes).subspan(kAtpOffset), &message), DecodeError::kOk);
    EXPECT_EQ(message.header, want.header);
    EXPECT_EQ(message.payload, want_payload);
  }
}

TEST(WireGoldenVectors, EncodeReproducesEveryValidFrameByteForByte) {
  ASSERT_FALSE(Vectors().is_null());
  for (const json& v : Vectors().at("valid")) {
    SCOPED_TRACE(v.at("name").get<std::string>());
    const std::vector<uint8_t> bytes = HexToBytes(v.at("hex").get<std::string>());
    ASSERT_EQ(bytes.size(), kFrameBytes);
    FrameFields fields;
    Payload payload;
    ExpectedFields(v.at("fields"), &fields, &payload);
    ASSERT_EQ(ValidateHeader(fields.header), DecodeError::kOk);
    std::array<uint8_t, kFrameBytes> frame{};
    EncodeFrame(fields, payload, BasePort(), frame);
    EXPECT_EQ(std::vector<uint8_t>(frame.begin(), frame.end()), bytes);
    std::array<uint8_t, kMessageBytes> message{};
    EncodeMessage(AtpMessage{fields.header, payload}, message);
    EXPECT_TRUE(std::equal(message.begin(), message.end(), bytes.begin() + kAtpOffset));
  }
}

TEST(WireGoldenVectors, EveryInvalidFrameIsRejectedWithItsError) {
  ASSERT_FALSE(Vectors().is_null());
  const std::map<std::string, DecodeError> expected = {
      {"short_frame", DecodeError::kShortFrame},
      {"bad_ipv4_checksum", DecodeError::kBadIpv4Checksum},
      {"job_zero", DecodeError::kJobZero},
      {"bitmap0_beyond_fan_in", DecodeError::kBitmap0BeyondFanIn},
      {"bitmap1_beyond_fan_in", DecodeError::kBitmap1BeyondFanIn},
      {"bad_udp_length", DecodeError::kBadUdpLength},
      {"bad_ip_total_length", DecodeError::kBadIpv4TotalLength},
  };
  for (const json& v : Vectors().at("invalid")) {
    const std::string name = v.at("name").get<std::string>();
    SCOPED_TRACE(name + ": " + v.value("why", ""));
    auto it = expected.find(name);
    ASSERT_NE(it, expected.end()) << "new invalid vector: map it to its DecodeError here";
    const std::vector<uint8_t> bytes = HexToBytes(v.at("hex").get<std::string>());
    FrameFields fields;
    Payload payload;
    EXPECT_EQ(DecodeFrame(bytes, BasePort(), &fields, &payload), it->second)
        << DecodeErrorName(DecodeFrame(bytes, BasePort(), &fields, &payload));
    EXPECT_EQ(ValidateFrame(bytes, BasePort()), it->second);
  }
}

}  // namespace
}  // namespace atp::wire
