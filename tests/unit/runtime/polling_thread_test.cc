// PollingThread: runs its step until stopped, and a sleeping thread wakes at
// once for new work (long before its sleep would end).
#include "lib/host/polling_thread.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "gtest/gtest.h"

namespace atp::host {
namespace {

TEST(PollingThreadTest, WakeCutsALongSleepShort) {
  PollingOptions options;
  options.spin_iterations = 1;
  options.yield_iterations = 1;
  options.min_sleep = absl::Seconds(1);  // a sleep that would outlast the test's deadline
  options.max_sleep = absl::Seconds(1);
  std::atomic<bool> work{false};
  std::mutex mu;
  std::condition_variable cv;
  bool seen = false;
  auto thread = PollingThread::Start("test", options, {}, [&](TimePoint) {
    StepResult r;
    if (work.exchange(false)) {
      std::lock_guard<std::mutex> lock(mu);
      seen = true;
      cv.notify_all();
      r.did_work = true;
    }
    return r;
  });
  ASSERT_TRUE(thread.ok()) << thread.status();
  // Wait (with a deadline) until the thread is asleep.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((*thread)->sleeps() == 0 && absl::Now() < deadline) std::this_thread::yield();
  ASSERT_GT((*thread)->sleeps(), 0u);
  const absl::Time woken_at = absl::Now();
  work.store(true);
  (*thread)->Wake();
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::milliseconds(900), [&] { return seen; }));
  EXPECT_LT(absl::Now() - woken_at, absl::Milliseconds(900));
}

TEST(PollingThreadTest, StepsUntilStoppedAndStopIsIdempotent) {
  std::atomic<uint64_t> steps{0};
  auto thread = PollingThread::Start("test", PollingOptions{}, {}, [&](TimePoint) {
    ++steps;
    return StepResult{};
  });
  ASSERT_TRUE(thread.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (steps.load() < 100 && absl::Now() < deadline) std::this_thread::yield();
  (*thread)->Stop();
  const uint64_t after = steps.load();
  EXPECT_GE(after, 100u);
  (*thread)->Stop();
  EXPECT_EQ(steps.load(), after);
}

TEST(PollingThreadTest, ADeadlineEndsTheSleepEarly) {
  PollingOptions options;
  options.spin_iterations = 0;
  options.yield_iterations = 0;
  options.min_sleep = absl::Seconds(1);
  options.max_sleep = absl::Seconds(1);
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  // The step asks to run again 1 ms after its first call.
  TimePoint first = TimePoint::Infinite();
  auto thread = PollingThread::Start("test", options, {}, [&](TimePoint now) {
    std::lock_guard<std::mutex> lock(mu);
    if (first.IsInfinite()) first = now;
    ++calls;
    cv.notify_all();
    return StepResult{false, first + TimeDelta::FromMilliseconds(1)};
  });
  ASSERT_TRUE(thread.ok());
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::milliseconds(800), [&] { return calls >= 3; }));
}

}  // namespace
}  // namespace atp::host
