// AdaptiveBackoff: spin, then yield, then sleeps doubling up to the cap;
// any work starts over.
#include "lib/host/adaptive_backoff.h"

#include "gtest/gtest.h"

namespace atp::host {
namespace {

using Action = AdaptiveBackoff::Action;

PollingOptions Options() {
  PollingOptions o;
  o.spin_iterations = 3;
  o.yield_iterations = 2;
  o.min_sleep = absl::Microseconds(10);
  o.max_sleep = absl::Microseconds(50);
  return o;
}

TEST(AdaptiveBackoffTest, SpinsThenYieldsThenSleepsLongerUpToTheCap) {
  AdaptiveBackoff b(Options());
  EXPECT_EQ(b.OnIdle(), Action::kSpin);
  EXPECT_EQ(b.OnIdle(), Action::kSpin);
  EXPECT_EQ(b.OnIdle(), Action::kSpin);
  EXPECT_EQ(b.OnIdle(), Action::kYield);
  EXPECT_EQ(b.OnIdle(), Action::kYield);
  EXPECT_EQ(b.OnIdle(), Action::kSleep);
  EXPECT_EQ(b.sleep(), TimeDelta::FromMicroseconds(10));
  EXPECT_EQ(b.OnIdle(), Action::kSleep);
  EXPECT_EQ(b.sleep(), TimeDelta::FromMicroseconds(20));
  EXPECT_EQ(b.OnIdle(), Action::kSleep);
  EXPECT_EQ(b.sleep(), TimeDelta::FromMicroseconds(40));
  EXPECT_EQ(b.OnIdle(), Action::kSleep);
  EXPECT_EQ(b.sleep(), TimeDelta::FromMicroseconds(50));
  EXPECT_EQ(b.OnIdle(), Action::kSleep);
  EXPECT_EQ(b.sleep(), TimeDelta::FromMicroseconds(50));
}

TEST(AdaptiveBackoffTest, WorkStartsOverFromSpinningAndTheShortestSleep) {
  AdaptiveBackoff b(Options());
  for (int i = 0; i < 8; ++i) b.OnIdle();
  b.OnWork();
  EXPECT_EQ(b.idle_rounds(), 0u);
  EXPECT_EQ(b.OnIdle(), Action::kSpin);
  for (int i = 0; i < 4; ++i) b.OnIdle();
  EXPECT_EQ(b.OnIdle(), Action::kSleep);
  EXPECT_EQ(b.sleep(), TimeDelta::FromMicroseconds(10));
}

// The default never spins: an idle thread yields its core at once (a
// spinner delays the thread holding the next frame wherever threads
// outnumber cores; include/atp/options.h), then sleeps.
TEST(AdaptiveBackoffTest, TheDefaultYieldsFromTheFirstIdleRoundThenSleeps) {
  const PollingOptions defaults;
  AdaptiveBackoff b(defaults);
  for (uint32_t i = 0; i < defaults.yield_iterations; ++i) ASSERT_EQ(b.OnIdle(), Action::kYield);
  EXPECT_EQ(b.OnIdle(), Action::kSleep);
}

TEST(AdaptiveBackoffTest, BusyPollingNeverSleeps) {
  AdaptiveBackoff b(PollingOptions::BusyPolling());
  for (int i = 0; i < 100000; ++i) ASSERT_EQ(b.OnIdle(), Action::kSpin);
}

}  // namespace
}  // namespace atp::host
