// Spurious retransmission timeouts (lib/worker/spurious_timeout.h): a
// timeout whose resent position is answered twice (the original's parameter
// packet, then the PS's repeat for the resend) counts as spurious; a single
// answer (a real loss) does not. The timeout's response is not undone. The test
// plays switch and PS by hand and moves a fake clock.
#include "lib/worker/spurious_timeout.h"

#include <vector>

#include "gtest/gtest.h"
#include "lib/worker/worker_queue_engine.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using namespace atp::worker::testing;  // NOLINT(build/namespaces): test helpers

class SpuriousTimeoutTest : public ::testing::Test {
 protected:
  // Starts an engine (64 slots, window 8) with 40 fragments queued, sends
  // the first window, and takes one round trip of 1 ms for position 0
  // (RTO 3 ms; the window grows to 9 and positions 8 and 9 go out).
  void SetUp() override {
    engine_ = MakeEngine(SmallConfig(/*slots=*/64, /*initial_window=*/8));
    ASSERT_NE(engine_, nullptr);
    input_.assign(40 * 62, 0.5f);
    output_.assign(input_.size(), 0.0f);
    ASSERT_TRUE(engine_->Enqueue(input_, output_).ok());
    sent_ = Send(*engine_, now_);
    ASSERT_EQ(sent_.size(), 8u);
    now_ = now_ + Ms(1);
    engine_->OnParameterPacket(EchoAck(sent_[0]), now_);
    const std::vector<wire::AtpMessage> more = Send(*engine_, now_);
    sent_.insert(sent_.end(), more.begin(), more.end());
    ASSERT_EQ(engine_->stats().window, 9u);
    ASSERT_EQ(engine_->stats().rto, Ms(3));
  }

  void Deliver(const wire::AtpMessage& m) { engine_->OnParameterPacket(m, now_); }
  WorkerQueueStats stats() const { return engine_->stats(); }

  std::unique_ptr<WorkerQueueEngine> engine_;
  TimePoint now_ = kT0;
  std::vector<float> input_;
  std::vector<float> output_;
  std::vector<wire::AtpMessage> sent_;  // positions 0..9, first transmissions
};

TEST_F(SpuriousTimeoutTest, SecondAnswerToTheResentPositionCountsAsSpurious) {
  // Position 1's parameter packet is late (a descheduled peer, switch or
  // PS), not lost: the timer fires and resends it.
  now_ = engine_->NextDeadline();
  const std::vector<wire::AtpMessage> resent = Send(*engine_, now_);
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(PositionOf(resent[0]), 1u);
  // The original's answer, then the PS's repeat for the resend (a completed
  // position resent: the stored parameter packet).
  now_ = now_ + Ms(1);
  Deliver(EchoAck(sent_[1]));
  EXPECT_EQ(stats().spurious_timeouts, 0u);
  Deliver(EchoAck(resent[0]));
  EXPECT_EQ(stats().spurious_timeouts, 1u);
  EXPECT_EQ(stats().ignored_unknown_seq, 1u);
  EXPECT_EQ(stats().timeouts, 1u);
  // Counted only: the recovery goes on from the collapsed window.
  EXPECT_EQ(stats().window, 2u);
  // A third answer is not a second verdict.
  Deliver(EchoAck(resent[0]));
  EXPECT_EQ(stats().spurious_timeouts, 1u);
}

TEST_F(SpuriousTimeoutTest, OneAnswerToTheResendIsARealLoss) {
  now_ = engine_->NextDeadline();
  const std::vector<wire::AtpMessage> resent = Send(*engine_, now_);
  ASSERT_EQ(resent.size(), 1u);
  // Position 1 was lost: only the resend's answer comes.
  now_ = now_ + Ms(1);
  Deliver(EchoAck(resent[0]));
  EXPECT_EQ(stats().spurious_timeouts, 0u);
  EXPECT_EQ(stats().window, 2u);  // slow start from the collapsed window
  // The recovery goes on: the next presumed-lost positions are resent.
  const std::vector<wire::AtpMessage> next = Send(*engine_, now_);
  ASSERT_EQ(next.size(), 2u);
  for (const wire::AtpMessage& m : next) EXPECT_TRUE(m.header.resend) << PositionOf(m);
}

TEST_F(SpuriousTimeoutTest, ADuplicateOfAnotherPositionProvesNothing) {
  now_ = engine_->NextDeadline();
  const std::vector<wire::AtpMessage> resent = Send(*engine_, now_);
  ASSERT_EQ(resent.size(), 1u);
  Deliver(EchoAck(resent[0]));
  Deliver(EchoAck(sent_[0]));  // position 0 again: acknowledged before the timeout
  EXPECT_EQ(stats().spurious_timeouts, 0u);
  EXPECT_EQ(stats().window, 2u);
}

TEST(SpuriousTimeoutProbeTest, ExpiresAfterAWindowOfProgress) {
  SpuriousTimeoutProbe probe;
  probe.Arm(5);
  probe.OnAnswered(5);
  // A window (16 slots) later, 5's bits may name a newer position.
  EXPECT_FALSE(probe.OnDuplicate(5, /*lowest_unacked=*/21, /*slots=*/16));
  EXPECT_FALSE(probe.OnDuplicate(5, /*lowest_unacked=*/6, /*slots=*/16));
}

TEST(SpuriousTimeoutProbeTest, ADuplicateBeforeTheFirstAnswerIsNoVerdict) {
  SpuriousTimeoutProbe probe;
  probe.Arm(5);
  probe.Arm(5);  // backoff: the same event
  EXPECT_FALSE(probe.OnDuplicate(5, /*lowest_unacked=*/5, /*slots=*/16));
  probe.OnAnswered(5);
  EXPECT_TRUE(probe.OnDuplicate(5, /*lowest_unacked=*/6, /*slots=*/16));
}

}  // namespace
}  // namespace atp::worker
