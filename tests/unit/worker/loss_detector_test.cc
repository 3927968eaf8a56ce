#include "lib/worker/loss_detector.h"

#include "gtest/gtest.h"

namespace atp::worker {
namespace {

// The tests play the engine: positions 0..n-1 are in flight and the test
// says which parameter packets arrive. `bound` stands for the congestion
// controller's send_bound (everything sent so far is below it).

TEST(LossDetectorTest, Rule_ThreeOutOfOrderAcksTriggerResend) {
  // Send 0..4, ack 1, 2, 3: position 0 is lost.
  LossDetector detector;
  EXPECT_EQ(detector.OnAck(1, 0, 5), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(2, 0, 5), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(3, 0, 5), LossVerdict::kLost);
  EXPECT_EQ(detector.debug_state().losses, 1u);
}

TEST(LossDetectorTest, InOrderAcksAreNeverALoss) {
  LossDetector detector;
  for (uint64_t p = 0; p < 100; ++p) {
    EXPECT_EQ(detector.OnAck(p, p + 1, p + 10), LossVerdict::kNone);
  }
}

TEST(LossDetectorTest, ReorderingOfTwoIsNotALoss) {
  LossDetector detector;
  EXPECT_EQ(detector.OnAck(1, 0, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(2, 0, 8), LossVerdict::kNone);
  // 0 arrives after all: the expected position moves to 3.
  EXPECT_EQ(detector.OnAck(0, 3, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(4, 3, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(5, 3, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.debug_state().losses, 0u);
}

TEST(LossDetectorTest, CounterRestartsWhenExpectedAdvances) {
  LossDetector detector;
  EXPECT_EQ(detector.OnAck(1, 0, 10), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(2, 0, 10), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(0, 3, 10), LossVerdict::kNone);  // expected is now 3
  EXPECT_EQ(detector.debug_state().count, 0u);
  EXPECT_EQ(detector.OnAck(4, 3, 10), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(5, 3, 10), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(6, 3, 10), LossVerdict::kLost);
}

TEST(LossDetectorTest, AcksOfFragmentsSentBeforeTheResendDoNotDeclareItAgain) {
  LossDetector detector;
  // 0..9 sent (bound 10); 0 lost, declared after 1, 2, 3, and resent.
  detector.OnAck(1, 0, 10);
  detector.OnAck(2, 0, 10);
  ASSERT_EQ(detector.OnAck(3, 0, 10), LossVerdict::kLost);
  EXPECT_EQ(detector.debug_state().count_from, 10u);
  // 4..9 were sent before the resend: their acks say nothing about it.
  for (uint64_t p = 4; p < 10; ++p) EXPECT_EQ(detector.OnAck(p, 0, 12), LossVerdict::kNone);
  // Acks of positions sent after the resend (10, 11, 12) do: the resend was
  // lost as well.
  EXPECT_EQ(detector.OnAck(10, 0, 14), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(11, 0, 14), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(12, 0, 14), LossVerdict::kLost);
  EXPECT_EQ(detector.debug_state().losses, 2u);
}

TEST(LossDetectorTest, TimeoutRearmsEveryPositionResentWithIt) {
  LossDetector detector;
  // 0..7 in flight; a timeout resends all of them (bound 8).
  detector.OnTimeout(0, 8);
  // Late acks of the first transmissions of 1..3 say nothing about 0's resend.
  EXPECT_EQ(detector.OnAck(1, 0, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(2, 0, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(3, 0, 8), LossVerdict::kNone);
  // 0 arrives; 4 becomes expected, also resent at the timeout: acks of 5..7
  // do not declare it either.
  EXPECT_EQ(detector.OnAck(0, 4, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(5, 4, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(6, 4, 8), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(7, 4, 8), LossVerdict::kNone);
  // Fragments sent after the timeout count again.
  EXPECT_EQ(detector.OnAck(8, 4, 12), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(9, 4, 12), LossVerdict::kNone);
  EXPECT_EQ(detector.OnAck(10, 4, 12), LossVerdict::kLost);
}

}  // namespace
}  // namespace atp::worker
