// ATP header: the bit layout of ATP-SPEC section 2, the header rules of
// ValidateHeader, the message codec and DecodeErrorName.
#include <array>
#include <cctype>
#include <cstdint>
#include <set>
#include <string>

#include "atp/wire.h"
#include "gtest/gtest.h"
#include "tests/unit/wire/wire_test_util.h"

namespace atp::wire {
namespace {

AtpHeader Gradient() { return testing::SampleFields().header; }

std::array<uint8_t, kAtpHeaderBytes> EncodeToBytes(const AtpHeader& h) {
  std::array<uint8_t, kAtpHeaderBytes> bytes{};
  EncodeHeader(h, bytes);
  return bytes;
}

TEST(WireHeader, LayoutPutsEachFieldAtItsSpecOffset) {
  AtpHeader h;
  h.job = 0xAB;
  h.seq = 0x3CDEF1;
  h.bitmap0 = 0x01020304;
  h.bitmap1 = 0x05060708;
  h.fan_in0 = 32;  // encoded 31 = 11111
  h.fan_in1 = 1;   // encoded 0 = 00000
  h.aggregator = 0xBEEF;
  const std::array<uint8_t, kAtpHeaderBytes> want = {0xAB, 0x3C, 0xDE, 0xF1, 0x01, 0x02,
                                                     0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                                     0xF8, 0x00, 0xBE, 0xEF};
  EXPECT_EQ(EncodeToBytes(h), want);
}

TEST(WireHeader, FanInsAndFlagsFillBytes12And13MostSignificantFirst) {
  AtpHeader h = Gradient();
  h.fan_in0 = 1;
  h.fan_in1 = 32;  // encoded 11111 in bits 10..6
  EXPECT_EQ(testing::Get16(EncodeToBytes(h), 12), 0x07C0);
  h.fan_in1 = 1;
  struct Case {
    bool AtpHeader::*flag;
    uint16_t bit;
  };
  const Case cases[] = {{&AtpHeader::edge, 1u << 5},      {&AtpHeader::resend, 1u << 4},
                        {&AtpHeader::collision, 1u << 3}, {&AtpHeader::ecn, 1u << 2},
                        {&AtpHeader::ack, 1u << 1},       {&AtpHeader::fp, 1u << 0}};
  for (const Case& c : cases) {
    AtpHeader one = h;
    one.*c.flag = true;
    EXPECT_EQ(testing::Get16(EncodeToBytes(one), 12), c.bit);
    EXPECT_EQ(DecodeHeader(EncodeToBytes(one)), one);
  }
}

TEST(WireHeader, DecodeDoesNotValidate) {
  std::array<uint8_t, kAtpHeaderBytes> zeros{};
  const AtpHeader h = DecodeHeader(zeros);
  EXPECT_EQ(h.job, 0);
  EXPECT_EQ(h.fan_in0, 1);
  EXPECT_EQ(h.fan_in1, 1);
  EXPECT_EQ(ValidateHeader(h), DecodeError::kJobZero);
}

TEST(WireHeader, SeqSplitsIntoQueueAndPosition) {
  EXPECT_EQ(MakeSeq(15, kPositionMask), kSeqMask);
  EXPECT_EQ(QueueOfSeq(MakeSeq(7, 12345)), 7u);
  EXPECT_EQ(PositionOfSeq(MakeSeq(7, 12345)), 12345u);
  EXPECT_EQ(QueueOfSeq(0xFF000000u | MakeSeq(3, 1)), 3u) << "bits above seq are not queue bits";
}

TEST(WireValidateHeader, AcceptsAValidGradient) {
  EXPECT_EQ(ValidateHeader(Gradient()), DecodeError::kOk);
}

TEST(WireValidateHeader, JobZeroIsNeverValid) {
  AtpHeader h = Gradient();
  h.job = 0;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kJobZero);
}

TEST(WireValidateHeader, SeqWiderThan24BitsIsRejected) {
  AtpHeader h = Gradient();
  h.seq = kSeqMask;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
  h.seq = kSeqMask + 1;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kSeqOutOfRange);
}

TEST(WireValidateHeader, FanInsOutside1To32AreRejected) {
  for (int bad : {0, 33, 255}) {
    AtpHeader h = Gradient();
    h.fan_in0 = static_cast<uint8_t>(bad);
    EXPECT_EQ(ValidateHeader(h), DecodeError::kFanInOutOfRange) << "fan_in0 " << bad;
    h = Gradient();
    h.fan_in1 = static_cast<uint8_t>(bad);
    EXPECT_EQ(ValidateHeader(h), DecodeError::kFanInOutOfRange) << "fan_in1 " << bad;
  }
  AtpHeader h = Gradient();
  h.fan_in0 = 32;
  h.fan_in1 = 32;
  h.bitmap0 = 0x80000000;
  h.bitmap1 = 0x80000000;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
}

TEST(WireValidateHeader, Bitmap0BitsMustBeBelowFanIn0) {
  AtpHeader h = Gradient();  // fan_in0 4
  h.bitmap0 = 0xF;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
  h.bitmap0 = 0x10;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kBitmap0BeyondFanIn);
  h.ack = true;  // parameter packets too
  EXPECT_EQ(ValidateHeader(h), DecodeError::kBitmap0BeyondFanIn);
}

TEST(WireValidateHeader, Bitmap1BitsMustBeBelowFanIn1) {
  AtpHeader h = Gradient();  // fan_in1 2
  h.edge = true;
  h.bitmap1 = 0x3;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
  h.bitmap1 = 0x4;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kBitmap1BeyondFanIn);
  h.collision = true;  // a collided gradient still names racks
  EXPECT_EQ(ValidateHeader(h), DecodeError::kBitmap1BeyondFanIn);
  h.collision = false;
  h.ack = true;  // a parameter packet without collision names racks
  EXPECT_EQ(ValidateHeader(h), DecodeError::kBitmap1BeyondFanIn);
}

TEST(WireValidateHeader, AckWithCollisionCarriesAnIndexInBitmap1) {
  AtpHeader h = Gradient();
  h.edge = true;
  h.ack = true;
  h.collision = true;
  h.bitmap1 = 0xFFFF;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
  EXPECT_EQ(h.NewAggregatorIndex(), 0xFFFF);
  h.bitmap1 = 0;  // new index 0
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
  EXPECT_EQ(h.NewAggregatorIndex(), 0);
}

TEST(WireValidateHeader, GradientNeedsContributorsInBothBitmaps) {
  AtpHeader h = Gradient();
  h.bitmap0 = 0;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kEmptyBitmap);
  h = Gradient();
  h.bitmap1 = 0;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kEmptyBitmap);
  h.edge = true;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kEmptyBitmap);
}

TEST(WireValidateHeader, OverflowRequestMayHaveEmptyBitmaps) {
  AtpHeader h = Gradient();
  h.ack = true;
  h.resend = true;
  h.bitmap0 = 0;
  h.bitmap1 = 0;
  ASSERT_TRUE(h.IsOverflowRequest());
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
}

TEST(WireValidateHeader, Level1GradientNamesExactlyOneRack) {
  AtpHeader h = Gradient();
  h.fan_in1 = 8;
  h.bitmap1 = 0x80;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
  h.bitmap1 = 0x81;
  EXPECT_EQ(ValidateHeader(h), DecodeError::kAmbiguousRack);
  h.edge = true;  // a level-2 partial result may name several racks
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
  h.edge = false;
  h.ack = true;  // parameter packets are not level-1 gradients
  EXPECT_EQ(ValidateHeader(h), DecodeError::kOk);
}

TEST(WireMessage, RoundTripsHeaderAndPayload) {
  AtpMessage message{Gradient(), testing::SamplePayload()};
  std::array<uint8_t, kMessageBytes> bytes{};
  EncodeMessage(message, bytes);
  // Values are big-endian: value 1 is 0x01010101, value 2 is 0x02020202.
  EXPECT_EQ(bytes[kAtpHeaderBytes + 4], 0x01);
  AtpMessage decoded;
  ASSERT_EQ(DecodeMessage(bytes, &decoded), DecodeError::kOk);
  EXPECT_EQ(decoded.header, message.header);
  EXPECT_EQ(decoded.payload, message.payload);
}

TEST(WireMessage, PayloadValuesAreBigEndian) {
  Payload payload{};
  payload[0] = 0x11223344;
  payload[61] = static_cast<uint32_t>(-2);
  std::array<uint8_t, kPayloadBytes> bytes{};
  EncodePayload(payload, bytes);
  EXPECT_EQ(bytes[0], 0x11);
  EXPECT_EQ(bytes[3], 0x44);
  EXPECT_EQ(bytes[kPayloadBytes - 1], 0xFE);
  Payload back;
  DecodePayload(bytes, back);
  EXPECT_EQ(back, payload);
}

TEST(WireMessage, WrongLengthsAreShortOrLong) {
  std::array<uint8_t, kMessageBytes + 1> bytes{};
  AtpMessage message{Gradient(), {}};
  EncodeMessage(message, std::span<uint8_t, kMessageBytes>(bytes.data(), kMessageBytes));
  AtpMessage out;
  EXPECT_EQ(DecodeMessage(std::span(bytes).first(kMessageBytes), &out), DecodeError::kOk);
  EXPECT_EQ(DecodeMessage(std::span(bytes).first(kMessageBytes - 1), &out),
            DecodeError::kShortFrame);
  EXPECT_EQ(DecodeMessage(std::span<const uint8_t>(), &out), DecodeError::kShortFrame);
  EXPECT_EQ(DecodeMessage(bytes, &out), DecodeError::kLongFrame);
}

TEST(WireMessage, DecodeAppliesTheHeaderRules) {
  AtpHeader h = Gradient();
  h.job = 0;
  std::array<uint8_t, kMessageBytes> bytes{};
  EncodeMessage(AtpMessage{h, {}}, bytes);
  AtpMessage out;
  EXPECT_EQ(DecodeMessage(bytes, &out), DecodeError::kJobZero);
  h = Gradient();
  h.bitmap1 = 0x3;
  EncodeMessage(AtpMessage{h, {}}, bytes);
  EXPECT_EQ(DecodeMessage(bytes, &out), DecodeError::kAmbiguousRack);
}

TEST(WireDecodeErrorName, EveryErrorHasAUniqueSnakeCaseName) {
  std::set<std::string> names;
  for (size_t i = 0; i < kDecodeErrorCount; ++i) {
    const std::string name(DecodeErrorName(static_cast<DecodeError>(i)));
    EXPECT_NE(name, "unknown") << i;
    EXPECT_FALSE(name.empty());
    for (char c : name) EXPECT_TRUE(std::islower(static_cast<unsigned char>(c)) || c == '_' ||
                                    std::isdigit(static_cast<unsigned char>(c)))
        << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
  }
  EXPECT_EQ(DecodeErrorName(DecodeError::kOk), "ok");
  EXPECT_EQ(DecodeErrorName(DecodeError::kBadIpv4Checksum), "bad_ipv4_checksum");
  EXPECT_EQ(DecodeErrorName(static_cast<DecodeError>(kDecodeErrorCount)), "unknown");
}

}  // namespace
}  // namespace atp::wire
