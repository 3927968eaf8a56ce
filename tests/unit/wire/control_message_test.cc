// tests/unit/wire/control_message_test.cc: control frames (lib/wire/control_message.h)
// are valid ATP frames that no data packet can be mistaken for, and their
// payload round-trips through the frame codec.
#include "lib/wire/control_message.h"

#include <array>

#include "atp/wire.h"
#include "gtest/gtest.h"

namespace atp::wire {
namespace {

constexpr uint8_t kJob = 7;

ControlMessage SampleControl(ControlType type, uint32_t sender) {
  ControlMessage c;
  c.type = type;
  c.sender = sender;
  c.incarnation = 0x0123456789ABCDEFull;
  for (size_t i = 0; i < c.body.size(); ++i) c.body[i] = static_cast<uint32_t>(i * 2654435761u);
  return c;
}

// ThroughFrame: encode `message` as a frame and decode it back.
AtpMessage ThroughFrame(const AtpMessage& message) {
  FrameFields fields;
  fields.header = message.header;
  std::array<uint8_t, kFrameBytes> frame{};
  EncodeFrame(fields, message.payload, kDefaultBasePort, frame);
  FrameFields decoded;
  AtpMessage out;
  EXPECT_EQ(DecodeFrame(frame, kDefaultBasePort, &decoded, &out.payload), DecodeError::kOk);
  out.header = decoded.header;
  return out;
}

TEST(ControlMessageTest, WorkerControlIsAValidLevel1HeaderAndRoundTrips) {
  const ControlSender sender{.worker_in_rack = 2, .rack = 1, .fan_in0 = 4, .fan_in1 = 3};
  const ControlMessage sent = SampleControl(ControlType::kPull, /*sender=*/6);
  const AtpMessage m = MakeWorkerControl(kJob, sender, /*queue=*/5, /*position=*/1234, sent);
  EXPECT_EQ(ValidateHeader(m.header), DecodeError::kOk);
  EXPECT_TRUE(IsControl(m.header));
  EXPECT_FALSE(m.header.ack);
  EXPECT_FALSE(m.header.edge);
  EXPECT_EQ(m.header.bitmap0, 1u << 2);
  EXPECT_EQ(m.header.bitmap1, 1u << 1);
  EXPECT_EQ(m.header.queue(), 5u);
  EXPECT_EQ(m.header.position(), 1234u);

  const AtpMessage back = ThroughFrame(m);
  ControlMessage got;
  ASSERT_EQ(DecodeControl(back, &got), ControlError::kOk);
  EXPECT_EQ(got.type, sent.type);
  EXPECT_EQ(got.sender, sent.sender);
  EXPECT_EQ(got.incarnation, sent.incarnation);
  EXPECT_EQ(got.body, sent.body);
}

TEST(ControlMessageTest, PsControlIsAnAckAndRoundTrips) {
  const ControlMessage sent = SampleControl(ControlType::kStatus, kControlSenderPs);
  const AtpMessage m = MakePsControl(kJob, /*fan_in0=*/4, /*fan_in1=*/2, /*queue=*/0,
                                     /*position=*/0, sent);
  EXPECT_EQ(ValidateHeader(m.header), DecodeError::kOk);
  EXPECT_TRUE(IsControl(m.header));
  EXPECT_TRUE(m.header.ack);
  EXPECT_FALSE(m.header.IsOverflowRequest()) << "fp is set: not an overflow request";
  ControlMessage got;
  ASSERT_EQ(DecodeControl(ThroughFrame(m), &got), ControlError::kOk);
  EXPECT_EQ(got.type, ControlType::kStatus);
  EXPECT_EQ(got.sender, kControlSenderPs);
  EXPECT_EQ(got.body, sent.body);
}

TEST(ControlMessageTest, NoDataPacketIsControl) {
  // Every flag combination a data packet can carry (ATP-SPEC sections 4-6)
  // lacks at least one of fp, resend and collision together.
  AtpHeader h;
  h.job = kJob;
  for (int bits = 0; bits < 64; ++bits) {
    h.edge = bits & 1;
    h.resend = bits & 2;
    h.collision = bits & 4;
    h.ecn = bits & 8;
    h.ack = bits & 16;
    h.fp = bits & 32;
    const bool control = h.fp && h.resend && h.collision;
    EXPECT_EQ(IsControl(h), control) << bits;
  }
}

TEST(ControlMessageTest, BadPayloadsAreRefusedByReason) {
  const ControlSender sender{.worker_in_rack = 0, .rack = 0, .fan_in0 = 2, .fan_in1 = 1};
  const AtpMessage good =
      MakeWorkerControl(kJob, sender, 0, 0, SampleControl(ControlType::kJoin, 1));
  ControlMessage out;

  AtpMessage data = good;
  data.header.collision = false;
  EXPECT_EQ(DecodeControl(data, &out), ControlError::kNotControl);

  AtpMessage magic = good;
  magic.payload[0] ^= 0x00010000;
  EXPECT_EQ(DecodeControl(magic, &out), ControlError::kBadMagic);

  AtpMessage version = good;
  version.payload[0] += 1u << 8;
  EXPECT_EQ(DecodeControl(version, &out), ControlError::kBadVersion);

  AtpMessage type0 = good;
  type0.payload[0] &= ~0xFFu;
  EXPECT_EQ(DecodeControl(type0, &out), ControlError::kUnknownType);
  AtpMessage type_next = good;
  type_next.payload[0] = (type_next.payload[0] & ~0xFFu) | (kMaxControlType + 1u);
  EXPECT_EQ(DecodeControl(type_next, &out), ControlError::kUnknownType);

  AtpMessage ps_sender_without_ack = good;
  ps_sender_without_ack.payload[1] = kControlSenderPs;
  EXPECT_EQ(DecodeControl(ps_sender_without_ack, &out), ControlError::kBadDirection);
  AtpMessage worker_sender_with_ack = good;
  worker_sender_with_ack.header.ack = true;
  EXPECT_EQ(DecodeControl(worker_sender_with_ack, &out), ControlError::kBadDirection);

  EXPECT_EQ(ControlErrorName(ControlError::kBadDirection), "bad_direction");
}

}  // namespace
}  // namespace atp::wire
