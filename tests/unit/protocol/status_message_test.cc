// The kStatus control body (lib/protocol/status_message.h) and the worker
// sets it carries: what is encoded decodes unchanged, through a whole
// control frame, and unknown kinds are refused.
#include "lib/protocol/status_message.h"

#include <vector>

#include "gtest/gtest.h"
#include "lib/protocol/worker_set.h"

namespace atp::protocol {
namespace {

TEST(WorkerSetTest, HoldsAnyOfTheThousandTwentyFourIndicesInOrder) {
  WorkerSet set;
  EXPECT_TRUE(set.empty());
  for (int w : {1023, 0, 31, 32, 500}) set.Add(w);
  set.Add(1024);  // out of range: ignored
  set.Add(-1);
  EXPECT_EQ(set.ToVector(), (std::vector<int>{0, 31, 32, 500, 1023}));
  EXPECT_TRUE(set.Contains(500));
  EXPECT_FALSE(set.Contains(501));
  WorkerSet other;
  other.Add(7);
  set.AddAll(other);
  EXPECT_TRUE(set.Contains(7));
}

TEST(StatusMessageTest, RoundTripsThroughAControlFrame) {
  StatusBody status;
  status.kind = StatusKind::kWaitingForWorkers;
  status.position = 0xABCDE;
  status.workers.Add(3);
  status.workers.Add(1000);
  status.field = 9;
  status.expected = 0x0123456789ABCDEFull;
  status.received = 42;
  status.run = 0x8000000000000001ull;
  wire::ControlMessage control;
  control.sender = wire::kControlSenderPs;
  control.incarnation = 0xFEEDFACECAFEBEEFull;
  EncodeStatus(status, control);
  EXPECT_EQ(control.type, wire::ControlType::kStatus);

  const wire::AtpMessage frame = wire::MakePsControl(/*job=*/5, 2, 3, /*queue=*/4, 0xABCDE, control);
  wire::ControlMessage decoded_control;
  ASSERT_EQ(wire::DecodeControl(frame, &decoded_control), wire::ControlError::kOk);
  EXPECT_EQ(decoded_control.incarnation, control.incarnation);
  StatusBody decoded;
  ASSERT_TRUE(DecodeStatus(decoded_control, &decoded));
  EXPECT_EQ(decoded.kind, status.kind);
  EXPECT_EQ(decoded.position, status.position);
  EXPECT_EQ(decoded.workers, status.workers);
  EXPECT_EQ(decoded.field, status.field);
  EXPECT_EQ(decoded.expected, status.expected);
  EXPECT_EQ(decoded.received, status.received);
  EXPECT_EQ(decoded.run, status.run);
  // Words 39-40, high word first (docs/protocol.md).
  EXPECT_EQ(control.body[39], 0x80000000u);
  EXPECT_EQ(control.body[40], 1u);
}

TEST(StatusMessageTest, RefusesUnknownKindsAndOtherTypes) {
  wire::ControlMessage control;
  EncodeStatus(StatusBody{}, control);
  StatusBody out;
  control.body[0] = 0;
  EXPECT_FALSE(DecodeStatus(control, &out));
  control.body[0] = kMaxStatusKind + 1;
  EXPECT_FALSE(DecodeStatus(control, &out));
  control.body[0] = 1;
  control.type = wire::ControlType::kJoin;
  EXPECT_FALSE(DecodeStatus(control, &out));
}

}  // namespace
}  // namespace atp::protocol
