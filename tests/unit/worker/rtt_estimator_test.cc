#include "lib/worker/rtt_estimator.h"

#include "gtest/gtest.h"

namespace atp::worker {
namespace {

TimeDelta Us(int64_t us) { return TimeDelta::FromMicroseconds(us); }
TimeDelta Ms(int64_t ms) { return TimeDelta::FromMilliseconds(ms); }

constexpr TimePoint kNow = TimePoint::FromNanoseconds(1'000'000'000);

RttEstimator::Config TestConfig() {
  return RttEstimator::Config{
      .rto_floor = Ms(1), .initial_rto = Ms(10), .max_rto = Ms(100), .rto_backoff = 2.0};
}

TEST(RttEstimatorTest, InitialRtoBeforeAnySample) {
  RttEstimator rtt(TestConfig());
  EXPECT_FALSE(rtt.has_sample());
  EXPECT_EQ(rtt.Rto(), Ms(10));
}

TEST(RttEstimatorTest, FirstSampleSetsSrttAndHalfVariance) {
  RttEstimator rtt(TestConfig());
  rtt.OnSample(Ms(4), kNow);
  EXPECT_EQ(rtt.srtt(), Ms(4));
  EXPECT_EQ(rtt.rttvar(), Ms(2));
  EXPECT_EQ(rtt.Rto(), Ms(4) + Ms(2) * 4);
}

TEST(RttEstimatorTest, LaterSamplesFollowRfc6298) {
  RttEstimator rtt(TestConfig());
  rtt.OnSample(Ms(4), kNow);
  rtt.OnSample(Ms(8), kNow);
  // rttvar = 3/4 * 2 + 1/4 * |4 - 8| = 2.5 ms; srtt = 7/8 * 4 + 1/8 * 8 = 4.5 ms.
  EXPECT_EQ(rtt.rttvar(), Us(2500));
  EXPECT_EQ(rtt.srtt(), Us(4500));
  EXPECT_EQ(rtt.Rto(), Us(4500 + 4 * 2500));
  RttEstimator::DebugState state = rtt.debug_state();
  EXPECT_EQ(state.samples, 2u);
  EXPECT_EQ(state.min_rtt, Ms(4));
  EXPECT_EQ(state.latest_rtt, Ms(8));
}

TEST(RttEstimatorTest, Rule_RtoBackoffAndFloor) {
  RttEstimator rtt(TestConfig());
  // Floor: a 10 us round trip gives srtt + 4 rttvar = 30 us, below the 1 ms floor.
  rtt.OnSample(Us(10), kNow);
  EXPECT_EQ(rtt.Rto(), Ms(1));
  // Backoff: doubles per consecutive timeout...
  rtt.OnTimeout();
  EXPECT_EQ(rtt.Rto(), Ms(2));
  rtt.OnTimeout();
  EXPECT_EQ(rtt.Rto(), Ms(4));
  // ... up to max_rto.
  for (int i = 0; i < 100; ++i) rtt.OnTimeout();
  EXPECT_EQ(rtt.Rto(), Ms(100));
  EXPECT_EQ(rtt.debug_state().rto, Ms(100));
  // A new sample resets the backoff.
  rtt.OnSample(Us(10), kNow);
  EXPECT_EQ(rtt.debug_state().timeouts, 0u);
  EXPECT_EQ(rtt.Rto(), Ms(1));
}

TEST(RttEstimatorTest, InitialRtoBacksOffToo) {
  RttEstimator rtt(TestConfig());
  rtt.OnTimeout();
  EXPECT_EQ(rtt.Rto(), Ms(20));
}

TEST(RttEstimatorTest, BackoffFactorIsConfigurable) {
  RttEstimator::Config config = TestConfig();
  config.rto_backoff = 1.5;
  RttEstimator rtt(config);
  rtt.OnTimeout();
  EXPECT_EQ(rtt.Rto(), Ms(15));
}

TEST(RttEstimatorTest, LargeRttCappedAtMaxRto) {
  RttEstimator rtt(TestConfig());
  for (int i = 0; i < 8; ++i) rtt.OnSample(Ms(500), kNow);
  EXPECT_EQ(rtt.Rto(), Ms(100));
}

TEST(RttEstimatorTest, SampleBoundedByTwiceTheRto) {
  // A Karn-valid sample that waited for another worker's timeout: one such
  // sample moves srtt by at most an eighth of twice the RTO.
  RttEstimator rtt(TestConfig());
  for (int i = 0; i < 64; ++i) rtt.OnSample(Ms(2), kNow);  // rto: the 2 ms of the samples
  const TimeDelta rto = rtt.Rto();
  rtt.OnSample(Ms(900), kNow);
  EXPECT_EQ(rtt.debug_state().latest_rtt, rto * 2);
  EXPECT_LE(rtt.srtt(), Ms(2) + rto * 2 / 8);
}

TEST(RttEstimatorTest, SlowestRecentRoundTripHoldsTheRto) {
  // Long round trips every few samples (waits for another worker) keep the
  // RTO above them although smoothing and variance forget them between two.
  RttEstimator rtt(TestConfig());  // slowest_window: 200 ms
  TimePoint now = kNow;
  for (int i = 0; i < 200; ++i, now = now + Us(100)) {
    rtt.OnSample(i % 20 == 0 ? Ms(3) : Us(1100), now);
    if (i > 20) {
      EXPECT_GE(rtt.Rto(), Ms(3)) << i;
    }
  }
  // Once they stop, it is forgotten after one to two windows.
  rtt.OnSample(Us(1100), now + Ms(150));
  EXPECT_GE(rtt.Rto(), Ms(3));
  rtt.OnSample(Us(1100), now + Ms(401));
  rtt.OnSample(Us(1100), now + Ms(402));
  EXPECT_LT(rtt.Rto(), Ms(2));
}

TEST(RttEstimatorTest, TimeoutForgetsTheSlowestRoundTrip) {
  // A remembered wait that a timeout proved too short (on a lossy path:
  // another worker's timer) no longer holds the RTO after the timeout.
  RttEstimator rtt(TestConfig());  // floor 1 ms, backoff 2
  for (int i = 0; i < 64; ++i) rtt.OnSample(Us(100), kNow);
  rtt.OnSample(Ms(3), kNow + Us(10));
  for (int i = 0; i < 32; ++i) rtt.OnSample(Us(100), kNow + Us(20));
  EXPECT_EQ(rtt.slowest(), Ms(2));  // bounded to twice the 1 ms floor
  EXPECT_EQ(rtt.Rto(), Ms(2));      // smoothing forgot it, the slowest did not
  rtt.OnTimeout();
  EXPECT_EQ(rtt.slowest(), TimeDelta::Zero());
  EXPECT_EQ(rtt.Rto(), Ms(2));  // the backoff doubles the floor, not the wait
  rtt.OnProgress();
  EXPECT_EQ(rtt.Rto(), Ms(1));
}

TEST(RttEstimatorTest, NegativeSampleIgnored) {
  RttEstimator rtt(TestConfig());
  rtt.OnSample(Us(-5), kNow);
  EXPECT_FALSE(rtt.has_sample());
  EXPECT_EQ(rtt.Rto(), Ms(10));
}

TEST(RttEstimatorTest, ValidateNamesTheField) {
  RttEstimator::Config config = TestConfig();
  EXPECT_TRUE(config.Validate().ok());

  config = TestConfig();
  config.rto_floor = TimeDelta::Zero();
  EXPECT_NE(config.Validate().message().find("rto_floor"), std::string::npos);

  config = TestConfig();
  config.initial_rto = Us(500);
  EXPECT_NE(config.Validate().message().find("initial_rto"), std::string::npos);

  config = TestConfig();
  config.max_rto = Ms(5);
  EXPECT_NE(config.Validate().message().find("max_rto"), std::string::npos);

  config = TestConfig();
  config.rto_backoff = 0.5;
  EXPECT_NE(config.Validate().message().find("rto_backoff"), std::string::npos);
}

TEST(RttEstimatorTest, Rule_ProgressResetsBackoffButKeepsStatistics) {
  RttEstimator rtt(RttEstimator::Config{
      .rto_floor = Ms(1), .initial_rto = Ms(10), .max_rto = Ms(100), .rto_backoff = 2.0});
  rtt.OnSample(Ms(2), kNow);  // rto = 2 + 4 * 1 = 6 ms
  rtt.OnTimeout();
  rtt.OnTimeout();
  EXPECT_EQ(rtt.Rto(), Ms(24));
  rtt.OnProgress();
  EXPECT_EQ(rtt.Rto(), Ms(6));
  EXPECT_EQ(rtt.srtt(), Ms(2));
  EXPECT_EQ(rtt.debug_state().samples, 1u);
}

TEST(RttEstimatorTest, DefaultsAreAFloorOf200UsAndACeilingOf100Ms) {
  RttEstimator::Config config;
  EXPECT_EQ(config.rto_floor, TimeDelta::FromMicroseconds(200));
  EXPECT_EQ(config.max_rto, Ms(100));
  ASSERT_TRUE(config.Validate().ok());
  RttEstimator rtt(config);
  rtt.OnSample(TimeDelta::FromMicroseconds(10), kNow);
  EXPECT_EQ(rtt.Rto(), TimeDelta::FromMicroseconds(200));
}

}  // namespace
}  // namespace atp::worker
