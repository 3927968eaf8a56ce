// TaskThread: tasks run once, on the helper or in Wait; Wait returns only
// after its task ran; Cancel drops a queued task and waits for a running one;
// without a thread every task runs in Wait, and a dropped one never.
#include "sim/task_thread.h"

#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace atp::sim {
namespace {

TEST(TaskThreadTest, WithoutAThreadATaskRunsInWaitOnTheCallersThread) {
  TaskThread tasks(/*threaded=*/false);
  EXPECT_FALSE(tasks.threaded());
  std::thread::id ran_on;
  int runs = 0;
  const TaskThread::Ticket ticket = tasks.Post([&] {
    ran_on = std::this_thread::get_id();
    ++runs;
  });
  EXPECT_NE(ticket, 0u);
  EXPECT_EQ(runs, 0);  // nothing runs until it is needed
  tasks.Wait(ticket);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  tasks.Wait(ticket);  // done: nothing more
  tasks.Wait(0);
  EXPECT_EQ(runs, 1);
}

TEST(TaskThreadTest, WithoutAThreadACancelledTaskNeverRuns) {
  bool ran = false;
  {
    TaskThread tasks(/*threaded=*/false);
    const TaskThread::Ticket cancelled = tasks.Post([&] { ran = true; });
    tasks.Post([&] { ran = true; });  // dropped with the TaskThread
    tasks.Cancel(cancelled);
    tasks.Wait(cancelled);
  }
  EXPECT_FALSE(ran);
}

TEST(TaskThreadTest, EveryTaskRunsOnceAndWaitSeesItsWrites) {
  TaskThread tasks(/*threaded=*/true);
  EXPECT_TRUE(tasks.threaded());
  constexpr int kTasks = 200;
  std::vector<int> results(kTasks, -1);
  std::vector<std::atomic<int>> runs(kTasks);
  std::vector<TaskThread::Ticket> tickets;
  for (int i = 0; i < kTasks; ++i) {
    tickets.push_back(tasks.Post([&results, &runs, i] {
      results[static_cast<size_t>(i)] = i * i;  // plain write: Wait must order it
      runs[static_cast<size_t>(i)].fetch_add(1);
    }));
  }
  // Waiting from the back: the caller runs what the helper has not reached.
  for (int i = kTasks - 1; i >= 0; --i) {
    tasks.Wait(tickets[static_cast<size_t>(i)]);
    EXPECT_EQ(results[static_cast<size_t>(i)], i * i);
  }
  for (int i = 0; i < kTasks; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 1) << i;
}

TEST(TaskThreadTest, WaitRunsOtherQueuedTasksWhileTheHelperRunsItsOwn) {
  TaskThread tasks(/*threaded=*/true);
  std::promise<void> helper_started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id blocker_ran_on;
  std::thread::id second_ran_on;
  const TaskThread::Ticket blocker = tasks.Post([&] {
    blocker_ran_on = std::this_thread::get_id();
    helper_started.set_value();
    released.wait();
  });
  helper_started.get_future().wait();  // the helper holds `blocker`
  const TaskThread::Ticket second = tasks.Post([&] {
    second_ran_on = std::this_thread::get_id();
    release.set_value();  // lets the helper finish `blocker`
  });
  // Waiting for the blocker, the caller runs `second`, which releases it.
  tasks.Wait(blocker);
  EXPECT_NE(blocker_ran_on, caller);
  EXPECT_EQ(second_ran_on, caller);
  tasks.Wait(second);
}

TEST(TaskThreadTest, CancelDropsAQueuedTaskAndWaitsForARunningOne) {
  TaskThread tasks(/*threaded=*/true);
  std::promise<void> helper_started;
  std::promise<void> release;
  std::atomic<bool> running_finished{false};
  bool queued_ran = false;
  const TaskThread::Ticket running = tasks.Post([&] {
    helper_started.set_value();
    release.get_future().wait();
    running_finished = true;
  });
  helper_started.get_future().wait();
  const TaskThread::Ticket queued = tasks.Post([&] { queued_ran = true; });
  tasks.Cancel(queued);  // still queued: the helper is busy
  std::thread releaser([&] { release.set_value(); });
  tasks.Cancel(running);  // returns only once it finished
  EXPECT_TRUE(running_finished.load());
  releaser.join();
  EXPECT_FALSE(queued_ran);
}

TEST(TaskThreadTest, DestroyingDropsQueuedTasksAndFinishesTheRunningOne) {
  std::promise<void> helper_started;
  std::promise<void> release;
  std::promise<void> dropped;
  std::atomic<bool> running_finished{false};
  std::atomic<int> queued_runs{0};
  std::thread releaser;
  {
    TaskThread tasks(/*threaded=*/true);
    tasks.Post([&] {
      helper_started.set_value();
      release.get_future().wait();
      running_finished = true;
    });
    helper_started.get_future().wait();
    // The queued tasks share a token whose last copy, going away, says the
    // queue was dropped: only then is the running task let go, so the
    // helper cannot reach the queued ones before the destructor drops them.
    std::shared_ptr<void> token(nullptr, [&dropped](void*) { dropped.set_value(); });
    for (int i = 0; i < 10; ++i) tasks.Post([&queued_runs, token] { queued_runs.fetch_add(1); });
    token.reset();
    releaser = std::thread([&] {
      dropped.get_future().wait();
      release.set_value();
    });
  }
  releaser.join();
  EXPECT_TRUE(running_finished.load());
  EXPECT_EQ(queued_runs.load(), 0);
}

}  // namespace
}  // namespace atp::sim
