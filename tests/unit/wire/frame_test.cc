// Whole frames: what EncodeFrame writes, each DecodeError that DecodeFrame
// and ValidateFrame report (and in which order), what they ignore, and
// IsAtpFrame's classification.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/wire/frame_checks.h"
#include "tests/unit/wire/wire_test_util.h"

namespace atp::wire {
namespace {

using testing::Frame;
using testing::Get16;
using testing::Put16;
using testing::Put32;
using testing::RefreshIpv4Checksum;

Frame SampleFrame() { return testing::Encode(testing::SampleFields(), testing::SamplePayload()); }

DecodeError Decode(const Frame& frame, uint16_t base_port = kDefaultBasePort) {
  FrameFields fields;
  Payload payload;
  const DecodeError error = DecodeFrame(frame, base_port, &fields, &payload);
  // Both entry points, and the check-by-check reference, always agree.
  EXPECT_EQ(ValidateFrame(frame, base_port), error);
  EXPECT_EQ(internal::ValidateFrameInOrder(frame, base_port), error);
  return error;
}

TEST(WireIpv4Checksum, MatchesAKnownHeader) {
  // A textbook header: 4500 0073 0000 4000 4011 [b861] c0a8 0001 c0a8 00c7.
  const std::array<uint8_t, kIpv4HeaderBytes> header = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40,
                                                        0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
                                                        0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(Ipv4HeaderChecksum(header), 0xb861) << "the checksum field is taken as zero";
}

TEST(WireEncodeFrame, WritesTheSpecL2L4Headers) {
  testing::Frame frame = SampleFrame();
  EXPECT_EQ(Get16(frame, testing::kEtherTypeAt), 0x0800);
  EXPECT_EQ(frame[testing::kVersionIhlAt], 0x45);
  EXPECT_EQ(frame[testing::kTosAt], kTosEct0);
  EXPECT_EQ(Get16(frame, testing::kTotalLengthAt), 292);
  EXPECT_EQ(Get16(frame, testing::kIdentificationAt), 0);
  EXPECT_EQ(Get16(frame, testing::kFlagsFragmentAt), 0x4000) << "DF set, not fragmented";
  EXPECT_EQ(frame[testing::kTtlAt], 64);
  EXPECT_EQ(frame[testing::kProtocolAt], 17);
  EXPECT_EQ(Get16(frame, testing::kSrcPortAt), kDefaultBasePort + 2) << "queue 2";
  EXPECT_EQ(Get16(frame, testing::kDstPortAt), kDefaultBasePort + 2);
  EXPECT_EQ(Get16(frame, testing::kUdpLengthAt), 272);
  EXPECT_EQ(Get16(frame, testing::kUdpChecksumAt), 0);
  EXPECT_TRUE(internal::Ipv4ChecksumVerifies(frame.data() + kIpv4Offset));
}

TEST(WireEncodeFrame, WritesTheTosItIsGiven) {
  FrameFields fields = testing::SampleFields();
  fields.ip_tos = kTosCe;
  Frame frame = testing::Encode(fields, {});
  EXPECT_EQ(frame[testing::kTosAt], kTosCe);
  FrameFields decoded;
  ASSERT_EQ(DecodeFrame(frame, kDefaultBasePort, &decoded, nullptr), DecodeError::kOk);
  EXPECT_EQ(decoded.ip_tos, kTosCe);
}

TEST(WireDecodeFrame, AcceptsAnEncodedFrameAndNullOutputs) {
  Frame frame = SampleFrame();
  EXPECT_EQ(Decode(frame), DecodeError::kOk);
  EXPECT_EQ(DecodeFrame(frame, kDefaultBasePort, nullptr, nullptr), DecodeError::kOk);
  Payload payload;
  ASSERT_EQ(DecodeFrame(frame, kDefaultBasePort, nullptr, &payload), DecodeError::kOk);
  EXPECT_EQ(payload, testing::SamplePayload());
}

TEST(WireDecodeFrame, WrongLengthsAreShortOrLong) {
  std::vector<uint8_t> bytes(kFrameBytes + 1);
  Frame frame = SampleFrame();
  std::copy(frame.begin(), frame.end(), bytes.begin());
  EXPECT_EQ(ValidateFrame(bytes, kDefaultBasePort), DecodeError::kLongFrame);
  EXPECT_EQ(DecodeFrame(bytes, kDefaultBasePort, nullptr, nullptr), DecodeError::kLongFrame);
  bytes.resize(kFrameBytes - 1);
  EXPECT_EQ(ValidateFrame(bytes, kDefaultBasePort), DecodeError::kShortFrame);
  EXPECT_EQ(DecodeFrame(bytes, kDefaultBasePort, nullptr, nullptr), DecodeError::kShortFrame);
  EXPECT_EQ(DecodeFrame({}, kDefaultBasePort, nullptr, nullptr), DecodeError::kShortFrame);
}

TEST(WireDecodeFrame, NonIpv4EtherTypeIsNotIpv4) {
  Frame frame = SampleFrame();
  Put16(frame, testing::kEtherTypeAt, 0x86DD);
  EXPECT_EQ(Decode(frame), DecodeError::kNotIpv4);
}

TEST(WireDecodeFrame, OptionsOtherVersionsAndFragmentsAreBadIpv4Headers) {
  for (uint8_t version_ihl : {0x46, 0x44, 0x65, 0x00}) {
    Frame frame = SampleFrame();
    frame[testing::kVersionIhlAt] = version_ihl;
    RefreshIpv4Checksum(frame);
    EXPECT_EQ(Decode(frame), DecodeError::kBadIpv4Header) << int{version_ihl};
  }
  for (uint16_t flags_fragment : {0x2000, 0x6000, 0x4001, 0x0001, 0x1FFF}) {
    Frame frame = SampleFrame();
    Put16(frame, testing::kFlagsFragmentAt, flags_fragment);
    RefreshIpv4Checksum(frame);
    EXPECT_EQ(Decode(frame), DecodeError::kBadIpv4Header) << flags_fragment;
  }
}

TEST(WireDecodeFrame, DontFragmentMayBeSetOrClear) {
  Frame frame = SampleFrame();
  Put16(frame, testing::kFlagsFragmentAt, 0x0000);
  RefreshIpv4Checksum(frame);
  EXPECT_EQ(Decode(frame), DecodeError::kOk);
}

TEST(WireDecodeFrame, TotalLengthMustBe292) {
  Frame frame = SampleFrame();
  Put16(frame, testing::kTotalLengthAt, 291);
  RefreshIpv4Checksum(frame);
  EXPECT_EQ(Decode(frame), DecodeError::kBadIpv4TotalLength);
}

TEST(WireDecodeFrame, ChecksumMustVerify) {
  Frame frame = SampleFrame();
  frame[testing::kChecksumAt + 1] ^= 0x01;
  EXPECT_EQ(Decode(frame), DecodeError::kBadIpv4Checksum);
  frame = SampleFrame();
  frame[kIpv4Offset + 12] ^= 0x80;  // source address, checksum left stale
  EXPECT_EQ(Decode(frame), DecodeError::kBadIpv4Checksum);
}

TEST(WireDecodeFrame, ProtocolMustBeUdp) {
  Frame frame = SampleFrame();
  frame[testing::kProtocolAt] = 6;
  RefreshIpv4Checksum(frame);
  EXPECT_EQ(Decode(frame), DecodeError::kNotUdp);
}

TEST(WireDecodeFrame, UdpLengthMustBe272) {
  Frame frame = SampleFrame();
  Put16(frame, testing::kUdpLengthAt, 273);
  EXPECT_EQ(Decode(frame), DecodeError::kBadUdpLength);
}

TEST(WireDecodeFrame, PortsMustBothBeBasePortPlusQueueOfSeq) {
  Frame frame = SampleFrame();  // queue 2
  Put16(frame, testing::kSrcPortAt, kDefaultBasePort + 3);
  EXPECT_EQ(Decode(frame), DecodeError::kBadUdpPort) << "source port";
  frame = SampleFrame();
  Put16(frame, testing::kDstPortAt, kDefaultBasePort + 3);
  EXPECT_EQ(Decode(frame), DecodeError::kBadUdpPort) << "destination port";
  frame = SampleFrame();
  Put32(frame, kAtpOffset, (3u << 24) | MakeSeq(4, 5));  // seq moved to queue 4
  EXPECT_EQ(Decode(frame), DecodeError::kBadUdpPort) << "seq names another queue";
  EXPECT_EQ(Decode(SampleFrame(), kDefaultBasePort + 1), DecodeError::kBadUdpPort)
      << "another base port";
}

TEST(WireDecodeFrame, PortBeyond65535NeverMatches) {
  // base_port + queue wraps to a small number in 16 bits; it must not match.
  FrameFields fields = testing::SampleFields();
  fields.header.seq = MakeSeq(0, 5);
  Frame frame = testing::Encode(fields, {}, 0);  // ports 0
  Put32(frame, kAtpOffset, (3u << 24) | MakeSeq(1, 5));
  Put16(frame, testing::kSrcPortAt, 0);
  Put16(frame, testing::kDstPortAt, 0);
  EXPECT_EQ(Decode(frame, 0xFFFF), DecodeError::kBadUdpPort);  // 0xFFFF + 1 is not port 0
  Put16(frame, testing::kSrcPortAt, 1);  // port 0x10000 = 1:0 if the ports were one word
  EXPECT_EQ(Decode(frame, 0xFFFF), DecodeError::kBadUdpPort);
}

TEST(WireDecodeFrame, TosMustBeEct0OrCe) {
  for (uint8_t tos : {0x00, 0x01, 0x06, 0x07, 0xB8, 0xBA}) {
    Frame frame = SampleFrame();
    frame[testing::kTosAt] = tos;
    RefreshIpv4Checksum(frame);
    EXPECT_EQ(Decode(frame), DecodeError::kBadTos) << int{tos};
  }
}

TEST(WireDecodeFrame, AppliesTheHeaderRules) {
  Frame frame = SampleFrame();
  frame[kAtpOffset] = 0;  // job 0
  EXPECT_EQ(Decode(frame), DecodeError::kJobZero);
  frame = SampleFrame();
  Put32(frame, kAtpOffset + 4, 0x10);  // bitmap0 bit 4, fan-in 4
  EXPECT_EQ(Decode(frame), DecodeError::kBitmap0BeyondFanIn);
  frame = SampleFrame();
  Put32(frame, kAtpOffset + 8, 0x4);  // bitmap1 bit 2, 2 racks
  EXPECT_EQ(Decode(frame), DecodeError::kBitmap1BeyondFanIn);
  frame = SampleFrame();
  Put32(frame, kAtpOffset + 4, 0);
  EXPECT_EQ(Decode(frame), DecodeError::kEmptyBitmap);
  frame = SampleFrame();
  Put32(frame, kAtpOffset + 8, 0x3);
  EXPECT_EQ(Decode(frame), DecodeError::kAmbiguousRack);
}

TEST(WireDecodeFrame, IgnoresIdentificationTtlAndUdpChecksum) {
  Frame frame = SampleFrame();
  Put16(frame, testing::kIdentificationAt, 0x1234);  // a TSO NIC numbers them
  frame[testing::kTtlAt] = 3;
  RefreshIpv4Checksum(frame);
  Put16(frame, testing::kUdpChecksumAt, 0xABCD);
  FrameFields fields;
  ASSERT_EQ(Decode(frame), DecodeError::kOk);
  ASSERT_EQ(DecodeFrame(frame, kDefaultBasePort, &fields, nullptr), DecodeError::kOk);
  EXPECT_EQ(fields.header, testing::SampleFields().header);
}

TEST(WireDecodeFrame, ReportsTheFirstFailureInSpecOrder) {
  // Break the frame from the last check to the first; after each step the
  // newly broken (earlier) check is the one reported.
  struct Step {
    DecodeError expect;
    std::function<void(Frame&)> breakit;
  };
  const Step steps[] = {
      {DecodeError::kJobZero, [](Frame& f) { f[kAtpOffset] = 0; }},
      {DecodeError::kBadTos,
       [](Frame& f) {
         f[testing::kTosAt] = 0;
         RefreshIpv4Checksum(f);
       }},
      {DecodeError::kBadUdpPort, [](Frame& f) { Put16(f, testing::kDstPortAt, 1); }},
      {DecodeError::kBadUdpLength, [](Frame& f) { Put16(f, testing::kUdpLengthAt, 8); }},
      {DecodeError::kNotUdp,
       [](Frame& f) {
         f[testing::kProtocolAt] = 6;
         RefreshIpv4Checksum(f);
       }},
      {DecodeError::kBadIpv4Checksum, [](Frame& f) { f[testing::kChecksumAt] ^= 0xFF; }},
      {DecodeError::kBadIpv4TotalLength, [](Frame& f) { Put16(f, testing::kTotalLengthAt, 20); }},
      {DecodeError::kBadIpv4Header, [](Frame& f) { f[testing::kVersionIhlAt] = 0x46; }},
      {DecodeError::kNotIpv4, [](Frame& f) { Put16(f, testing::kEtherTypeAt, 0x0806); }},
  };
  Frame frame = SampleFrame();
  for (const Step& step : steps) {
    step.breakit(frame);
    EXPECT_EQ(Decode(frame), step.expect) << DecodeErrorName(step.expect);
  }
  EXPECT_EQ(ValidateFrame(std::span(frame).first(kFrameBytes - 1), kDefaultBasePort),
            DecodeError::kShortFrame);
}

TEST(WireIsAtpFrame, ClassifiesByIpv4UdpAndPortRange) {
  Frame frame = SampleFrame();
  EXPECT_TRUE(IsAtpFrame(frame, kDefaultBasePort));
  EXPECT_TRUE(IsAtpFrame(frame, kDefaultBasePort - 13)) << "port base+15 is the last queue";
  EXPECT_FALSE(IsAtpFrame(frame, kDefaultBasePort - 14)) << "port base+16 is not ATP";
  EXPECT_FALSE(IsAtpFrame(frame, kDefaultBasePort + 3)) << "port below base";
  Frame tcp = frame;
  tcp[testing::kProtocolAt] = 6;
  EXPECT_FALSE(IsAtpFrame(tcp, kDefaultBasePort));
  Frame arp = frame;
  Put16(arp, testing::kEtherTypeAt, 0x0806);
  EXPECT_FALSE(IsAtpFrame(arp, kDefaultBasePort));
  Frame ipv6 = frame;
  ipv6[testing::kVersionIhlAt] = 0x60;
  EXPECT_FALSE(IsAtpFrame(ipv6, kDefaultBasePort));
  EXPECT_FALSE(IsAtpFrame(std::span(frame).first(kL2L4HeaderBytes - 1), kDefaultBasePort));
  EXPECT_TRUE(IsAtpFrame(std::span(frame).first(kL2L4HeaderBytes), kDefaultBasePort));
}

TEST(WireIsAtpFrame, ReadsThePortAfterIpv4Options) {
  // One 4-byte option word: the UDP header starts 4 bytes later.
  std::vector<uint8_t> bytes(kFrameBytes + 4, 0);
  Frame frame = SampleFrame();
  std::copy(frame.begin(), frame.begin() + kUdpOffset, bytes.begin());
  std::copy(frame.begin() + kUdpOffset, frame.end(), bytes.begin() + kUdpOffset + 4);
  bytes[testing::kVersionIhlAt] = 0x46;
  EXPECT_TRUE(IsAtpFrame(bytes, kDefaultBasePort));
  EXPECT_FALSE(IsAtpFrame(std::span(bytes).first(kL2L4HeaderBytes + 3), kDefaultBasePort));
  EXPECT_NE(DecodeFrame(bytes, kDefaultBasePort, nullptr, nullptr), DecodeError::kOk);
  bytes[testing::kVersionIhlAt] = 0x44;  // IHL below 5 is not IPv4
  EXPECT_FALSE(IsAtpFrame(bytes, kDefaultBasePort));
}

}  // namespace
}  // namespace atp::wire
