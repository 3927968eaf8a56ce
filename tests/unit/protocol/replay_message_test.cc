// The kReplay control body and the join's results beyond the lowest
// unacknowledged position (lib/protocol/replay_message.h, join_message.h):
// a parameter packet split in two parts comes back whole and bit-exact
// through control frames, in either order; parts that disagree or belong to
// other fragments are not mixed; a join says which results its worker holds.
#include "lib/protocol/replay_message.h"

#include <array>
#include <cstdint>
#include <optional>

#include "gtest/gtest.h"
#include "lib/protocol/join_message.h"
#include "lib/wire/control_message.h"

namespace atp::protocol {
namespace {

// Packet: a parameter packet of job 9, queue 3, position `position`, whose
// payload words are distinct (so a misplaced word shows).
wire::AtpMessage Packet(uint32_t position, uint32_t salt = 0) {
  wire::AtpMessage m;
  m.header.job = 9;
  m.header.seq = wire::MakeSeq(3, position);
  m.header.ack = true;
  m.header.edge = true;
  m.header.fan_in0 = 4;
  m.header.fan_in1 = 2;
  m.header.bitmap0 = 0xF;
  m.header.bitmap1 = 0x1234;  // a new index
  m.header.collision = true;
  m.header.ecn = true;
  m.header.fp = true;
  m.header.aggregator = 777;
  for (size_t i = 0; i < m.payload.size(); ++i) {
    m.payload[i] = 0x80000000u + static_cast<uint32_t>(i) * 0x01010101u + salt;
  }
  return m;
}

std::array<ReplayPart, kReplayParts> Split(const wire::AtpMessage& m, uint64_t position) {
  std::array<uint8_t, wire::kPayloadBytes> bytes{};
  wire::EncodePayload(m.payload, bytes);
  return SplitReplay(position, m.header, bytes);
}

// ThroughFrame: `part` encoded in a worker's control frame, the frame's
// bytes decoded back.
ReplayPart ThroughFrame(const ReplayPart& part) {
  wire::ControlMessage control;
  control.sender = 5;
  control.incarnation = 0x1122334455667788ull;
  EncodeReplay(part, control);
  const wire::ControlSender sender{.worker_in_rack = 1, .rack = 1, .fan_in0 = 4, .fan_in1 = 2};
  const wire::AtpMessage sent =
      wire::MakeWorkerControl(9, sender, 3, part.header.position(), control);
  std::array<uint8_t, wire::kMessageBytes> bytes{};
  wire::EncodeMessage(sent, bytes);
  wire::AtpMessage received;
  EXPECT_EQ(wire::DecodeMessage(bytes, &received), wire::DecodeError::kOk);
  wire::ControlMessage decoded;
  EXPECT_EQ(wire::DecodeControl(received, &decoded), wire::ControlError::kOk);
  EXPECT_EQ(decoded.type, wire::ControlType::kReplay);
  ReplayPart out;
  EXPECT_TRUE(DecodeReplay(decoded, &out));
  return out;
}

TEST(ReplayMessageTest, APacketComesBackWholeAndBitExactInEitherOrder) {
  const uint64_t position = (uint64_t{7} << 20) + 0xABCDE;  // beyond 20 bits
  const wire::AtpMessage packet = Packet(static_cast<uint32_t>(position & wire::kPositionMask));
  const std::array<ReplayPart, kReplayParts> parts = Split(packet, position);
  for (const ReplayPart& part : parts) EXPECT_EQ(ThroughFrame(part), part);

  ReplayAssembler forward;
  EXPECT_FALSE(forward.Add(ThroughFrame(parts[0])).has_value());
  std::optional<wire::AtpMessage> whole = forward.Add(ThroughFrame(parts[1]));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->header, packet.header);
  EXPECT_EQ(whole->payload, packet.payload);
  EXPECT_EQ(forward.incomplete(), 0u);

  ReplayAssembler backward;
  EXPECT_FALSE(backward.Add(parts[1]).has_value());
  whole = backward.Add(parts[0]);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->payload, packet.payload);
}

TEST(ReplayMessageTest, PartsOfDifferentFragmentsOrHeadersAreNeverMixed) {
  ReplayAssembler assembler;
  const std::array<ReplayPart, kReplayParts> a = Split(Packet(10), 10);
  const std::array<ReplayPart, kReplayParts> b = Split(Packet(11, /*salt=*/1), 11);
  EXPECT_FALSE(assembler.Add(a[0]).has_value());
  EXPECT_FALSE(assembler.Add(b[1]).has_value()) << "another position";
  EXPECT_EQ(assembler.incomplete(), 2u);
  // A second half of position 10 with another header starts it over.
  ReplayPart odd = a[1];
  odd.header.ecn = false;
  EXPECT_FALSE(assembler.Add(odd).has_value());
  EXPECT_FALSE(assembler.Add(a[1]).has_value()) << "part 0 was dropped with the mismatch";
  const std::optional<wire::AtpMessage> whole = assembler.Add(a[0]);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->payload, Packet(10).payload);
  EXPECT_EQ(assembler.Add(b[0])->payload, Packet(11, 1).payload);
}

TEST(ReplayMessageTest, TheOldestIncompletePacketIsForgottenFirst) {
  ReplayAssembler assembler(/*capacity=*/2);
  for (uint32_t p = 0; p < 3; ++p) EXPECT_FALSE(assembler.Add(Split(Packet(p), p)[0]).has_value());
  EXPECT_EQ(assembler.incomplete(), 2u);
  EXPECT_FALSE(assembler.Add(Split(Packet(0), 0)[1]).has_value()) << "position 0 was forgotten";
  EXPECT_TRUE(assembler.Add(Split(Packet(2), 2)[1]).has_value());
}

TEST(ReplayMessageTest, RefusesOtherTypesAndPartNumbers) {
  wire::ControlMessage control;
  EncodeReplay(Split(Packet(1), 1)[0], control);
  ReplayPart out;
  control.body[0] = 2;
  EXPECT_FALSE(DecodeReplay(control, &out));
  control.body[0] = 0;
  control.type = wire::ControlType::kJoin;
  EXPECT_FALSE(DecodeReplay(control, &out));
}

TEST(JoinMessageTest, CarriesTheResultsBeyondTheLowestUnacknowledgedPosition) {
  JoinBody join;
  join.io_threads = 2;
  join.slots = 4096;
  join.scale = 1e8;
  join.layout_fingerprint = 0xCAFE;
  join.lowest_unacked = (uint64_t{1} << 33) + 100;
  join.next_position = join.lowest_unacked + 3000;
  join.acked_end = join.lowest_unacked + 2000;
  // Results for lowest + 1, lowest + 32 and the last position the bits describe.
  join.acked_after_lowest[0] = 1u;
  join.acked_after_lowest[0] |= 1u << 31;
  join.acked_after_lowest[kJoinAckedBits / 32 - 1] = 1u << 31;
  join.answers = 0xFEDCBA9876543210;  // the PS whose request it answers
  wire::ControlMessage control;
  EncodeJoin(join, control);
  JoinBody back;
  ASSERT_TRUE(DecodeJoin(control, &back));
  EXPECT_EQ(back.lowest_unacked, join.lowest_unacked);
  EXPECT_EQ(back.next_position, join.next_position);
  EXPECT_EQ(back.acked_end, join.acked_end);
  EXPECT_EQ(back.acked_after_lowest, join.acked_after_lowest);
  EXPECT_EQ(back.answers, join.answers);

  const uint64_t low = join.lowest_unacked;
  EXPECT_EQ(back.HasResult(low - 1), true) << "below the lowest unacknowledged: acknowledged";
  EXPECT_EQ(back.HasResult(low), false);
  EXPECT_EQ(back.HasResult(low + 1), true);
  EXPECT_EQ(back.HasResult(low + 2), false);
  EXPECT_EQ(back.HasResult(low + 32), true);
  EXPECT_EQ(back.HasResult(low + kJoinAckedBits), true);
  EXPECT_EQ(back.HasResult(low + kJoinAckedBits + 1), std::nullopt) << "beyond the bits";
  EXPECT_EQ(back.HasResult(join.acked_end), false) << "nothing at or past acked_end";
}

}  // namespace
}  // namespace atp::protocol
