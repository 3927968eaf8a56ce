// PollingThread with several steps (what SharedIoThreads runs): every step
// runs in turn; Add and Remove work while the thread runs, and Remove returns
// only once the step can no longer run; the earliest deadline and any step's
// wait_fd end a sleep; SharedIoThreads places loops on the least busy thread.
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "atp/shared_io_threads.h"
#include "gtest/gtest.h"
#include "lib/host/polling_thread.h"
#include "lib/runtime/loop_threads.h"

namespace atp::host {
namespace {

// Sleepy: back off to a one-second sleep at once, so that whatever ends a
// sleep early (a deadline, a wait_fd, a Wake) shows against the test's
// sub-second waits.
PollingOptions Sleepy() {
  PollingOptions options;
  options.spin_iterations = 0;
  options.yield_iterations = 0;
  options.min_sleep = absl::Seconds(1);
  options.max_sleep = absl::Seconds(1);
  return options;
}

// Counter: a step that counts its calls, and a way to wait for a count.
class Counter {
 public:
  PollingThread::StepFunction Step() {
    return [this](TimePoint) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_;
      cv_.notify_all();
      return StepResult{};
    };
  }
  // WaitFor: true once the step ran `calls` times, false after 10 s.
  bool WaitFor(uint64_t calls) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return calls_ >= calls; });
  }
  uint64_t calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t calls_ = 0;
};

TEST(SharedPollingThreadTest, EveryStepRunsInTurn) {
  std::vector<std::unique_ptr<Counter>> counters;
  auto thread = PollingThread::Start("test", PollingOptions{});
  ASSERT_TRUE(thread.ok()) << thread.status();
  for (int i = 0; i < 3; ++i) {
    counters.push_back(std::make_unique<Counter>());
    (*thread)->Add({}, counters.back()->Step());
  }
  EXPECT_EQ((*thread)->steps(), 3u);
  for (auto& counter : counters) EXPECT_TRUE(counter->WaitFor(100));
}

TEST(SharedPollingThreadTest, RemoveReturnsOnlyOnceTheStepCanNoLongerRun) {
  Counter other;
  auto thread = PollingThread::Start("test", PollingOptions{});
  ASSERT_TRUE(thread.ok());
  (*thread)->Add({}, other.Step());
  for (int round = 0; round < 50; ++round) {
    // What the step touches without synchronization of its own: after Remove
    // returns, this thread owns it again (TSan checks that claim), and may
    // destroy it.
    auto owned = std::make_unique<uint64_t>(0);
    const PollingThread::StepId id = (*thread)->Add({}, [value = owned.get()](TimePoint) {
      ++*value;
      return StepResult{true, TimePoint::Infinite()};
    });
    // Let it run at least once in some rounds, remove it at once in others.
    if (round % 2 == 0) {
      const uint64_t before = other.calls();
      ASSERT_TRUE(other.WaitFor(before + 2));
    }
    (*thread)->Remove(id);
    const uint64_t seen = *owned;
    if (round % 2 == 0) {
      EXPECT_GT(seen, 0u);
    }
    // The other step goes on; the removed one never runs again.
    const uint64_t before = other.calls();
    ASSERT_TRUE(other.WaitFor(before + 3));
    EXPECT_EQ(*owned, seen);
    owned.reset();
  }
  EXPECT_EQ((*thread)->steps(), 1u);
}

TEST(SharedPollingThreadTest, AddingAndRemovingFromSeveralThreadsAtOnce) {
  auto thread = PollingThread::Start("test", PollingOptions{});
  ASSERT_TRUE(thread.ok());
  std::vector<std::thread> users;
  for (int u = 0; u < 4; ++u) {
    users.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        uint64_t calls = 0;  // this thread's again once Remove returns
        const PollingThread::StepId id = (*thread)->Add({}, [&calls](TimePoint) {
          ++calls;
          return StepResult{};
        });
        (*thread)->Remove(id);
        calls = 0;
      }
    });
  }
  for (auto& user : users) user.join();
  EXPECT_EQ((*thread)->steps(), 0u);
}

TEST(SharedPollingThreadTest, TheEarliestDeadlineEndsTheSleep) {
  // One step never asks to run again, one only in 10 s, one 1 ms after its
  // first call: the thread must call it again long before a 1 s sleep ends.
  Counter never;
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  TimePoint first = TimePoint::Infinite();
  auto thread = PollingThread::Start("test", Sleepy());
  ASSERT_TRUE(thread.ok());
  (*thread)->Add({}, never.Step());
  (*thread)->Add({}, [start = TimePoint::Infinite()](TimePoint now) mutable {
    if (start.IsInfinite()) start = now;
    return StepResult{false, start + TimeDelta::FromSeconds(10)};
  });
  (*thread)->Add({}, [&](TimePoint now) {
    std::lock_guard<std::mutex> lock(mu);
    if (first.IsInfinite()) first = now;
    ++calls;
    cv.notify_all();
    return StepResult{false, first + TimeDelta::FromMilliseconds(1)};
  });
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::milliseconds(800), [&] { return calls >= 3; }));
}

TEST(SharedPollingThreadTest, AnyStepsWaitFdEndsTheSleep) {
  const int quiet_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  const int busy_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(quiet_fd, 0);
  ASSERT_GE(busy_fd, 0);
  Counter quiet;
  std::mutex mu;
  std::condition_variable cv;
  bool seen = false;
  auto thread = PollingThread::Start("test", Sleepy());
  ASSERT_TRUE(thread.ok());
  (*thread)->Add({quiet_fd}, quiet.Step());
  (*thread)->Add({busy_fd}, [&](TimePoint) {
    uint64_t count;
    StepResult result;
    if (read(busy_fd, &count, sizeof(count)) == sizeof(count)) {
      std::lock_guard<std::mutex> lock(mu);
      seen = true;
      cv.notify_all();
      result.did_work = true;
    }
    return result;
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((*thread)->sleeps() == 0 && absl::Now() < deadline) std::this_thread::yield();
  ASSERT_GT((*thread)->sleeps(), 0u);
  const uint64_t one = 1;
  ASSERT_EQ(write(busy_fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::milliseconds(900), [&] { return seen; }));
  }
  thread->reset();  // before the fds close
  close(quiet_fd);
  close(busy_fd);
}

TEST(SharedPollingThreadTest, AnAddedStepRunsAtOnceOnASleepingThread) {
  std::mutex mu;
  std::condition_variable cv;
  bool ran = false;
  auto thread = PollingThread::Start("test", Sleepy());
  ASSERT_TRUE(thread.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((*thread)->sleeps() == 0 && absl::Now() < deadline) std::this_thread::yield();
  ASSERT_GT((*thread)->sleeps(), 0u);
  (*thread)->Add({}, [&](TimePoint) {
    std::lock_guard<std::mutex> lock(mu);
    ran = true;
    cv.notify_all();
    return StepResult{};
  });
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::milliseconds(900), [&] { return ran; }));
}

TEST(SharedPollingThreadTest, RemoveAfterStopAndUnknownIdsReturnAtOnce) {
  Counter counter;
  auto thread = PollingThread::Start("test", PollingOptions{});
  ASSERT_TRUE(thread.ok());
  const PollingThread::StepId id = (*thread)->Add({}, counter.Step());
  (*thread)->Remove(id + 100);
  EXPECT_EQ((*thread)->steps(), 1u);
  (*thread)->Stop();
  (*thread)->Remove(id);
  EXPECT_EQ((*thread)->steps(), 0u);
}

TEST(SharedIoThreadsTest, LoopsGoToTheLeastBusyThread) {
  Counter counters[3];
  auto threads = SharedIoThreads::Create(2, PollingOptions{}, "test");
  ASSERT_TRUE(threads.ok()) << threads.status();
  EXPECT_EQ((*threads)->size(), 2u);
  ::atp::internal::LoopThreads a(*threads, PollingOptions{});
  ::atp::internal::LoopThreads b(*threads, PollingOptions{});
  ASSERT_TRUE(a.Run("a0", {}, counters[0].Step()).ok());
  ASSERT_TRUE(b.Run("b0", {}, counters[1].Step()).ok());
  ASSERT_TRUE(a.Run("a1", {}, counters[2].Step()).ok());
  const auto& all = (*threads)->threads().all;
  EXPECT_EQ(all[0]->steps(), 2u);
  EXPECT_EQ(all[1]->steps(), 1u);
  for (Counter& counter : counters) EXPECT_TRUE(counter.WaitFor(10));
  a.StopAll();
  EXPECT_EQ(all[0]->steps(), 0u);
  EXPECT_EQ(all[1]->steps(), 1u);
  const uint64_t stopped_at = counters[0].calls();
  EXPECT_TRUE(counters[1].WaitFor(counters[1].calls() + 3));
  EXPECT_EQ(counters[0].calls(), stopped_at);
}

TEST(SharedIoThreadsTest, RefusesBadThreadCounts) {
  EXPECT_FALSE(SharedIoThreads::Create(0).ok());
  EXPECT_FALSE(SharedIoThreads::Create(65).ok());
  PollingOptions bad;
  bad.max_sleep = absl::ZeroDuration();
  EXPECT_FALSE(SharedIoThreads::Create(1, bad).ok());
}

}  // namespace
}  // namespace atp::host
