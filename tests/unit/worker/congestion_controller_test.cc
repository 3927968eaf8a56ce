#include "lib/worker/congestion_controller.h"

#include <cstdint>
#include <random>

#include "gtest/gtest.h"

namespace atp::worker {
namespace {

using Mode = CongestionController::Mode;

CongestionController::Config Aimd(uint32_t initial, uint32_t max_window, uint32_t ssthresh = 0) {
  return CongestionController::Config{.mode = Mode::kAimd,
                                      .initial_window = initial,
                                      .max_window = max_window,
                                      .initial_ssthresh = ssthresh};
}

// InOrderAcks: acknowledges positions [from, to) in order, unmarked.
void InOrderAcks(CongestionController& cc, uint64_t from, uint64_t to) {
  for (uint64_t p = from; p < to; ++p) cc.OnAck(p, EcnMark::kNotMarked, p + 1);
}

TEST(CongestionControllerTest, StartsAtInitialWindow) {
  CongestionController cc(Aimd(200, 256));
  EXPECT_EQ(cc.window(), 200u);
  EXPECT_EQ(cc.ssthresh(), 256u);  // no threshold until the first reduction
  EXPECT_EQ(cc.send_bound(), 200u);
  EXPECT_TRUE(cc.debug_state().in_slow_start);
}

TEST(CongestionControllerTest, Rule_SlowStartThenCongestionAvoidance) {
  CongestionController cc(Aimd(4, 1024, /*ssthresh=*/8));
  // Slow start: one more per acknowledged fragment, up to ssthresh.
  InOrderAcks(cc, 0, 1);
  EXPECT_EQ(cc.window(), 5u);
  InOrderAcks(cc, 1, 4);
  EXPECT_EQ(cc.window(), 8u);
  EXPECT_FALSE(cc.debug_state().in_slow_start);
  // Congestion avoidance: one more per window (8) of acknowledged fragments,
  // i.e. one per round trip.
  InOrderAcks(cc, 4, 11);
  EXPECT_EQ(cc.window(), 8u);
  InOrderAcks(cc, 11, 12);
  EXPECT_EQ(cc.window(), 9u);
  InOrderAcks(cc, 12, 12 + 8);
  EXPECT_EQ(cc.window(), 9u);
  InOrderAcks(cc, 20, 21);
  EXPECT_EQ(cc.window(), 10u);
}

TEST(CongestionControllerTest, Rule_EcnHalvesWindow) {
  CongestionController cc(Aimd(200, 256));
  cc.OnAck(0, EcnMark::kMarked, 1);
  EXPECT_EQ(cc.window(), 100u);
  EXPECT_EQ(cc.ssthresh(), 100u);
  EXPECT_EQ(cc.debug_state().reductions, 1u);
  EXPECT_TRUE(cc.debug_state().in_reduction_epoch);
}

TEST(CongestionControllerTest, Rule_EcnHalvesAtMostOncePerRoundTrip) {
  CongestionController cc(Aimd(16, 64));
  // Everything below send_bound (0 + 16) may have been sent before the mark.
  cc.OnAck(0, EcnMark::kMarked, 1);
  EXPECT_EQ(cc.window(), 8u);
  EXPECT_EQ(cc.debug_state().reduction_epoch_end, 16u);
  // More marks on fragments sent before the reduction: the same event.
  for (uint64_t p = 1; p < 16; ++p) cc.OnAck(p, EcnMark::kMarked, p + 1);
  EXPECT_EQ(cc.window(), 8u);
  EXPECT_EQ(cc.debug_state().ignored_signals, 15u);
  // No growth during the epoch either.
  EXPECT_EQ(cc.debug_state().reductions, 1u);
  // A mark on position 16, sent after the reduction: a new event.
  cc.OnAck(16, EcnMark::kMarked, 17);
  EXPECT_EQ(cc.window(), 4u);
  EXPECT_EQ(cc.debug_state().reductions, 2u);
}

TEST(CongestionControllerTest, Rule_LossHalvesWindowOncePerRtt) {
  CongestionController cc(Aimd(16, 64));
  cc.OnLoss(0, 0);
  EXPECT_EQ(cc.window(), 8u);
  // Another loss, or a mark, from the same flight: ignored.
  cc.OnLoss(3, 3);
  cc.OnAck(5, EcnMark::kMarked, 3);
  EXPECT_EQ(cc.window(), 8u);
  // A loss of a position sent after the reduction halves again.
  cc.OnLoss(16, 16);
  EXPECT_EQ(cc.window(), 4u);
}

TEST(CongestionControllerTest, EpochEndIsTheLargestSendBoundSoFar) {
  // The window grew to 20 with lowest_unacked 10: positions up to 29 may be
  // out; a reduction's epoch must cover all of them.
  CongestionController cc(Aimd(10, 64));
  InOrderAcks(cc, 0, 10);
  EXPECT_EQ(cc.window(), 20u);
  EXPECT_EQ(cc.send_bound(), 30u);
  cc.OnAck(29, EcnMark::kMarked, 10);
  EXPECT_EQ(cc.window(), 10u);
  EXPECT_EQ(cc.debug_state().reduction_epoch_end, 30u);
  // With 29 acknowledged and 10 still missing, the engine may now send up to
  // 29 + 1 + 10 (at most 10 in flight, the rest acknowledged).
  EXPECT_EQ(cc.send_bound(), 40u);
  cc.OnAck(28, EcnMark::kMarked, 10);
  EXPECT_EQ(cc.window(), 10u);
  // send_bound never shrinks.
  cc.OnAck(10, EcnMark::kNotMarked, 11);
  EXPECT_EQ(cc.send_bound(), 40u);
}

TEST(CongestionControllerTest, Rule_WindowNeverBelowOneOrAboveSlots) {
  CongestionController cc(Aimd(8, 16));
  InOrderAcks(cc, 0, 1000);
  EXPECT_EQ(cc.window(), 16u);  // slow start stops at max_window (the slots)
  uint64_t p = 1000;
  for (int i = 0; i < 20; ++i) {
    // Each mark is on a position beyond the previous epoch: 20 halvings.
    p = cc.send_bound();
    cc.OnAck(p, EcnMark::kMarked, p + 1);
    EXPECT_GE(cc.window(), 1u);
  }
  EXPECT_EQ(cc.window(), 1u);
  EXPECT_EQ(cc.ssthresh(), 1u);
  // Congestion avoidance from 1 back up, never past 16.
  InOrderAcks(cc, p + 1, p + 100000);
  EXPECT_EQ(cc.window(), 16u);
}

TEST(CongestionControllerTest, FixedWindowNeverMoves) {
  CongestionController cc(CongestionController::Config{
      .mode = Mode::kFixedWindow, .initial_window = 32, .max_window = 64});
  InOrderAcks(cc, 0, 100);
  cc.OnAck(100, EcnMark::kMarked, 101);
  cc.OnLoss(101, 101);
  EXPECT_EQ(cc.window(), 32u);
  EXPECT_EQ(cc.debug_state().reductions, 0u);
  EXPECT_EQ(cc.send_bound(), 101u + 32u);
}

TEST(CongestionControllerTest, SameAckStreamGivesSameWindow) {
  // Two controllers fed the same (random, reordered, marked) stream agree
  // after every packet: no local state enters the window.
  CongestionController a(Aimd(20, 128));
  CongestionController b(Aimd(20, 128));
  std::mt19937 rng(7);
  uint64_t lowest = 0;
  for (int i = 0; i < 5000; ++i) {
    uint64_t position = lowest + rng() % 8;
    EcnMark mark = rng() % 20 == 0 ? EcnMark::kMarked : EcnMark::kNotMarked;
    if (rng() % 2 == 0) ++lowest;
    a.OnAck(position, mark, lowest);
    b.OnAck(position, mark, lowest);
    if (rng() % 50 == 0) {
      a.OnLoss(lowest, lowest);
      b.OnLoss(lowest, lowest);
    }
    ASSERT_EQ(a.window(), b.window()) << "after packet " << i;
    ASSERT_EQ(a.ssthresh(), b.ssthresh());
  }
  EXPECT_GT(a.debug_state().reductions, 3u);
}

TEST(CongestionControllerTest, Rule_TimeoutCollapsesWindowToOneThenSlowStarts) {
  CongestionController cc(Aimd(16, 256));
  cc.OnTimeout();
  EXPECT_EQ(cc.window(), CongestionController::kTimeoutWindow);
  EXPECT_EQ(cc.ssthresh(), 8u);
  EXPECT_TRUE(cc.debug_state().in_timeout_epoch);
  // Acks of resent fragments (below the epoch's end) still slow start.
  InOrderAcks(cc, 0, 7);
  EXPECT_EQ(cc.window(), 8u);
  // Then congestion avoidance: one per window of acks.
  InOrderAcks(cc, 7, 15);
  EXPECT_EQ(cc.window(), 9u);
}

TEST(CongestionControllerTest, Rule_TimeoutEpochIgnoresEcnAndLossAndMarkedAcksDoNotGrow) {
  CongestionController cc(Aimd(16, 256));
  cc.OnTimeout();
  const uint64_t end = cc.debug_state().reduction_epoch_end;
  EXPECT_EQ(end, 16u);
  cc.OnAck(0, EcnMark::kMarked, 1);
  EXPECT_EQ(cc.window(), 1u);  // neither halved nor grown
  cc.OnLoss(1, 1);
  EXPECT_EQ(cc.window(), 1u);
  EXPECT_EQ(cc.debug_state().reductions, 0u);
  EXPECT_EQ(cc.debug_state().ignored_signals, 2u);
  // An ack at or beyond the epoch's end: signals count again.
  cc.OnAck(end, EcnMark::kMarked, 1);
  EXPECT_FALSE(cc.debug_state().in_timeout_epoch);
  EXPECT_EQ(cc.debug_state().reductions, 1u);
}

TEST(CongestionControllerTest, Rule_TimeoutInsideATimeoutEpochKeepsSsthresh) {
  CongestionController cc(Aimd(64, 256));
  cc.OnTimeout();
  EXPECT_EQ(cc.ssthresh(), 32u);
  InOrderAcks(cc, 0, 3);  // window 4, still inside the epoch
  cc.OnTimeout();
  EXPECT_EQ(cc.window(), 1u);
  EXPECT_EQ(cc.ssthresh(), 32u);  // the same event: the threshold stays
  // After the epoch, a new timeout halves again (never below 2).
  CongestionController small(Aimd(3, 256));
  small.OnTimeout();
  EXPECT_EQ(small.ssthresh(), CongestionController::kMinTimeoutSsthresh);
}

TEST(CongestionControllerTest, FixedWindowIgnoresTimeouts) {
  CongestionController cc(CongestionController::Config{
      .mode = Mode::kFixedWindow, .initial_window = 16, .max_window = 64});
  cc.OnTimeout();
  EXPECT_EQ(cc.window(), 16u);
  EXPECT_EQ(cc.debug_state().timeouts, 0u);
}

TEST(CongestionControllerTest, SameAckStreamAndTimeoutsGiveSameWindow) {
  // Two workers that time out between the same two parameter packets.
  CongestionController a(Aimd(32, 256));
  CongestionController b(Aimd(32, 256));
  std::mt19937 rng(7);
  for (uint64_t p = 0; p < 2000; ++p) {
    const EcnMark mark = rng() % 50 == 0 ? EcnMark::kMarked : EcnMark::kNotMarked;
    a.OnAck(p, mark, p + 1);
    b.OnAck(p, mark, p + 1);
    if (rng() % 300 == 0) {
      a.OnTimeout();
      b.OnTimeout();
    }
    ASSERT_EQ(a.window(), b.window()) << p;
    ASSERT_EQ(a.ssthresh(), b.ssthresh()) << p;
  }
  EXPECT_GT(a.debug_state().timeouts, 0u);
}

TEST(CongestionControllerTest, Rule_LossWithoutRecentEcnDoesNotHalveWhenConfigured) {
  CongestionController::Config config = Aimd(16, 256, /*ssthresh=*/16);
  config.loss_response = CongestionController::LossResponse::kHalveOnlyWithEcn;
  CongestionController cc(config);
  InOrderAcks(cc, 0, 10);
  cc.OnLoss(10, 10);  // no mark ever: not congestion
  EXPECT_EQ(cc.debug_state().reductions, 0u);
  EXPECT_EQ(cc.debug_state().losses_without_ecn, 1u);
  // A mark (which halves by itself), then a loss two round trips later is
  // congestion again: within 2 x window acks of the mark.
  cc.OnAck(10, EcnMark::kMarked, 11);
  EXPECT_EQ(cc.debug_state().reductions, 1u);
  const uint64_t end = cc.debug_state().reduction_epoch_end;
  InOrderAcks(cc, 11, end + 1);
  const uint32_t before = cc.window();
  cc.OnLoss(end + 1, end + 1);
  EXPECT_EQ(cc.debug_state().reductions, 2u);
  EXPECT_EQ(cc.window(), before / 2);
  // The spec's default halves on every loss.
  CongestionController spec(Aimd(16, 256, 16));
  InOrderAcks(spec, 0, 10);
  spec.OnLoss(10, 10);
  EXPECT_EQ(spec.debug_state().reductions, 1u);
}

}  // namespace
}  // namespace atp::worker
