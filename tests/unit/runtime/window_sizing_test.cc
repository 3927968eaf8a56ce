// WindowForPath / SizeWindowsForPath: the bandwidth-delay product in
// 330-byte wire frames, per queue, and slots the next power of two of twice
// the window; explicit JobOptions stay as given unless sized.
#include "atp/window_sizing.h"

#include <limits>

#include "gtest/gtest.h"

namespace atp {
namespace {

PathEstimate Path(double bits_per_second, absl::Duration round_trip) {
  PathEstimate path;
  path.link_bits_per_second = bits_per_second;
  path.round_trip = round_trip;
  return path;
}

TEST(WindowSizingTest, OneHundredGigabitAndTenMicrosecondsIs379FramesIn1024Slots) {
  // 1e11 b/s x 1e-5 s = 1e6 bits; / 2640 bits per frame = 378.8.
  absl::StatusOr<WindowSizing> s = WindowForPath(Path(100e9, absl::Microseconds(10)), 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->frames_in_flight, 379u);
  EXPECT_EQ(s->initial_window, 379u);
  EXPECT_EQ(s->slots, 1024u);
}

TEST(WindowSizingTest, TheProductIsSharedByTheQueues) {
  absl::StatusOr<WindowSizing> s = WindowForPath(Path(100e9, absl::Microseconds(10)), 4);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->frames_in_flight, 379u);
  EXPECT_EQ(s->initial_window, 95u);  // ceil(379 / 4)
  EXPECT_EQ(s->slots, 256u);
}

TEST(WindowSizingTest, ASlowShortPathStillHasOneFrameInFlight) {
  absl::StatusOr<WindowSizing> s = WindowForPath(Path(1e6, absl::Microseconds(1)), 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->frames_in_flight, 1u);
  EXPECT_EQ(s->initial_window, 1u);
  EXPECT_EQ(s->slots, 2u);
}

TEST(WindowSizingTest, AProductBeyondTheSlotsIsCapped) {
  absl::StatusOr<WindowSizing> s = WindowForPath(Path(1e13, absl::Seconds(1)), 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->frames_in_flight, 65536u);
  EXPECT_EQ(s->initial_window, 32768u);
  EXPECT_EQ(s->slots, 65536u);
}

TEST(WindowSizingTest, BadPathsAndQueueCountsAreRefusedByName) {
  const absl::Duration rtt = absl::Microseconds(10);
  for (double rate : {0.0, -1.0, 2e13, std::numeric_limits<double>::quiet_NaN()}) {
    absl::StatusOr<WindowSizing> s = WindowForPath(Path(rate, rtt), 1);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << rate;
    EXPECT_NE(s.status().message().find("link_bits_per_second"), absl::string_view::npos);
  }
  for (absl::Duration bad : {absl::ZeroDuration(), absl::Seconds(2), absl::InfiniteDuration()}) {
    absl::StatusOr<WindowSizing> s = WindowForPath(Path(100e9, bad), 1);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("round_trip"), absl::string_view::npos);
  }
  for (uint32_t threads : {0u, 17u}) {
    absl::StatusOr<WindowSizing> s = WindowForPath(Path(100e9, rtt), threads);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("io_threads"), absl::string_view::npos);
  }
}

TEST(WindowSizingTest, SizedJobOptionsValidate) {
  JobOptions job;
  job.job_id = 1;
  job.layout = RackLayout::Uniform(1, 2);
  job.io_threads = 2;
  ASSERT_TRUE(SizeWindowsForPath(Path(25e9, absl::Microseconds(40)), &job).ok());
  // 25e9 x 4e-5 = 1e6 bits = 378.8 frames -> 379; ceil(379 / 2) = 190.
  EXPECT_EQ(job.initial_window, 190u);
  EXPECT_EQ(job.slots, 512u);
  EXPECT_TRUE(job.Validate().ok()) << job.Validate();
}

TEST(WindowSizingTest, ARefusedPathLeavesTheJobAsItWas) {
  JobOptions job;
  const uint32_t slots = job.slots;
  const uint32_t window = job.initial_window;
  EXPECT_FALSE(SizeWindowsForPath(Path(0, absl::Microseconds(10)), &job).ok());
  EXPECT_EQ(job.slots, slots);
  EXPECT_EQ(job.initial_window, window);
}

}  // namespace
}  // namespace atp
