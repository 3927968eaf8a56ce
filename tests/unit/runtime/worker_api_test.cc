// The Worker API's contract on a small in-process job (one rack of two
// workers, one switch, over loopback): PushPull (also in place), Push then
// Pull by key, Discard, empty tensors, argument errors, and cancellation
// when the Worker goes away.
#include <atomic>
#include <cstdint>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "atp/quantize.h"
#include "atp/worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testbed/local_cluster.h"
#include "tests/unit/runtime/local_job_checks.h"

namespace atp {
namespace {

using testbed::FabricAggregation;
using testbed::LocalCluster;
using testbed::LocalClusterOptions;
using testbed::LocalJob;
using testing::ExactSum;
using testing::Values;

constexpr absl::Duration kDeadline = absl::Seconds(20);

std::unique_ptr<LocalCluster> TwoWorkers() {
  LocalClusterOptions options;
  options.aggregation = FabricAggregation::kSingleSwitch;
  LocalJob job;
  job.job.job_id = 1;
  job.job.layout = RackLayout::Uniform(1, 2);
  job.job.io_threads = 2;
  job.job.slots = 64;
  job.job.initial_window = 32;
  options.jobs.push_back(job);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Create(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

TEST(WorkerApiTest, PushPullInPlaceGivesTheExactSumOnEveryWorker) {
  auto cluster = TwoWorkers();
  ASSERT_NE(cluster, nullptr);
  std::vector<std::vector<float>> inputs = {Values(5000, 1), Values(5000, 2)};
  const std::vector<float> expected = ExactSum(inputs);
  std::vector<std::vector<float>> buffers = inputs;
  std::vector<Handle> handles;
  for (size_t w = 0; w < 2; ++w) {
    auto h = cluster->worker(0, w).PushPull(buffers[w], buffers[w]);
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*h);
  }
  ASSERT_TRUE(WaitAll(handles, absl::Now() + kDeadline).ok());
  EXPECT_EQ(buffers[0], expected);
  EXPECT_EQ(buffers[1], expected);
}

// Handle::OnDone: the callback sees the finished output (what the PyTorch
// hook relies on to complete its future without a waiting thread), also on a
// Push whose handle already carries the runtime's own callback for a Pull.
TEST(WorkerApiTest, OnDoneRunsOnceWithTheOutputComplete) {
  auto cluster = TwoWorkers();
  ASSERT_NE(cluster, nullptr);
  std::vector<std::vector<float>> inputs = {Values(3000, 7), Values(3000, 8)};
  const std::vector<float> expected = ExactSum(inputs);
  std::vector<std::vector<float>> outputs(2, std::vector<float>(3000));
  std::vector<std::vector<float>> seen(2);
  std::atomic<int> calls{0};
  std::vector<Handle> handles;
  for (size_t w = 0; w < 2; ++w) {
    auto h = cluster->worker(0, w).PushPull(inputs[w], outputs[w]);
    ASSERT_TRUE(h.ok()) << h.status();
    h->OnDone([&, w](const absl::Status& status) {
      EXPECT_TRUE(status.ok()) << status;
      seen[w] = outputs[w];  // the output is complete when the callback runs
      ++calls;
    });
    handles.push_back(*h);
  }
  ASSERT_TRUE(WaitAll(handles, absl::Now() + kDeadline).ok());
  // Wait() returns once waiters are woken, the callback runs just after:
  // give it the same deadline without sleeping.
  const absl::Time deadline = absl::Now() + kDeadline;
  while (calls.load() < 2 && absl::Now() < deadline) std::this_thread::yield();
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(seen[0], expected);
  EXPECT_EQ(seen[1], expected);

  // A Push with a Pull pending (the runtime's callback) and one of ours.
  std::vector<Handle> pushes;
  for (size_t w = 0; w < 2; ++w) {
    auto push = cluster->worker(0, w).Push(/*key=*/5, inputs[w]);
    ASSERT_TRUE(push.ok()) << push.status();
    auto pull = cluster->worker(0, w).Pull(5, outputs[w]);
    ASSERT_TRUE(pull.ok()) << pull.status();
    push->OnDone([&](const absl::Status& status) {
      EXPECT_TRUE(status.ok()) << status;
      ++calls;
    });
    pushes.push_back(*pull);
  }
  ASSERT_TRUE(WaitAll(pushes, absl::Now() + kDeadline).ok());
  while (calls.load() < 4 && absl::Now() < deadline) std::this_thread::yield();
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(outputs[0], expected);
  EXPECT_EQ(outputs[1], expected);

  // Already finished: at once, on this thread. Invalid: FailedPrecondition.
  int now = 0;
  handles[0].OnDone([&](const absl::Status& status) { now += status.ok() ? 1 : 100; });
  EXPECT_EQ(now, 1);
  Handle().OnDone(
      [&](const absl::Status& status) { now += absl::IsFailedPrecondition(status) ? 10 : 100; });
  EXPECT_EQ(now, 11);
}

TEST(WorkerApiTest, PushKeepsTheResultUntilPullCopiesIt) {
  auto cluster = TwoWorkers();
  ASSERT_NE(cluster, nullptr);
  std::vector<std::vector<float>> inputs = {Values(700, 3), Values(700, 4)};
  const std::vector<float> expected = ExactSum(inputs);
  std::vector<Handle> pushes;
  for (size_t w = 0; w < 2; ++w) {
    auto h = cluster->worker(0, w).Push(/*key=*/42, inputs[w]);
    ASSERT_TRUE(h.ok()) << h.status();
    pushes.push_back(*h);
  }
  // Pull may be issued before the Push finishes; it finishes after it.
  std::vector<std::vector<float>> outputs(2, std::vector<float>(700, -1.0f));
  std::vector<Handle> pulls;
  for (size_t w = 0; w < 2; ++w) {
    auto h = cluster->worker(0, w).Pull(42, outputs[w]);
    ASSERT_TRUE(h.ok()) << h.status();
    pulls.push_back(*h);
  }
  ASSERT_TRUE(WaitAll(pulls, absl::Now() + kDeadline).ok());
  EXPECT_TRUE(pushes[0].Poll());
  EXPECT_EQ(outputs[0], expected);
  EXPECT_EQ(outputs[1], expected);
  // The key is free again.
  EXPECT_TRUE(absl::IsNotFound(cluster->worker(0, 0).Pull(42, outputs[0]).status()));
}

TEST(WorkerApiTest, PullAfterThePushFinishedCompletesAtOnce) {
  auto cluster = TwoWorkers();
  ASSERT_NE(cluster, nullptr);
  std::vector<std::vector<float>> inputs = {Values(100, 5), Values(100, 6)};
  std::vector<Handle> pushes;
  for (size_t w = 0; w < 2; ++w) pushes.push_back(*cluster->worker(0, w).Push(7, inputs[w]));
  ASSERT_TRUE(WaitAll(pushes, absl::Now() + kDeadline).ok());
  std::vector<float> out(100);
  auto pull = cluster->worker(0, 0).Pull(7, out);
  ASSERT_TRUE(pull.ok());
  EXPECT_TRUE(pull->Poll());
  EXPECT_EQ(out, ExactSum(inputs));
  EXPECT_TRUE(cluster->worker(0, 1).Discard(7).ok());
  EXPECT_TRUE(absl::IsNotFound(cluster->worker(0, 1).Discard(7)));
}

TEST(WorkerApiTest, KeyErrorsAndSizeErrorsAreReportedWithoutStartingAnything) {
  // Declared before the cluster, so they outlive it: the Push below is still
  // reading `a` until the cluster's destruction cancels it.
  std::vector<float> a(10), b(11), big(100);
  auto cluster = TwoWorkers();
  ASSERT_NE(cluster, nullptr);
  Worker& w = cluster->worker(0, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(w.PushPull(a, b).status()));
  // Overlapping but not identical spans.
  EXPECT_TRUE(absl::IsInvalidArgument(
      w.PushPull(std::span<const float>(big).subspan(0, 50), std::span<float>(big).subspan(10, 50))
          .status()));
  EXPECT_TRUE(absl::IsNotFound(w.Pull(99, a).status()));
  EXPECT_EQ(w.stats().operations_started, 0u);
  // A duplicate key is refused (this Push is never matched by worker 1: it is
  // cancelled when the cluster goes away).
  ASSERT_TRUE(w.Push(1, a).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(w.Push(1, a).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(w.Pull(1, b).status()));
}

TEST(WorkerApiTest, EmptyTensorFinishesAtOnce) {
  auto cluster = TwoWorkers();
  ASSERT_NE(cluster, nullptr);
  std::vector<float> none;
  auto h = cluster->worker(0, 0).PushPull(none, none);
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->Poll());
  EXPECT_TRUE(h->status().ok());
}

TEST(WorkerApiTest, DestroyingTheWorkerCancelsWhatIsStillRunning) {
  auto cluster = TwoWorkers();
  ASSERT_NE(cluster, nullptr);
  std::vector<float> in = Values(1000, 7);
  std::vector<float> out(1000);
  // Only worker 0 contributes: the aggregation cannot complete.
  auto h = cluster->worker(0, 0).PushPull(in, out);
  ASSERT_TRUE(h.ok());
  auto pushed = cluster->worker(0, 0).Push(5, in);
  ASSERT_TRUE(pushed.ok());
  std::vector<float> pulled(1000);
  auto pull = cluster->worker(0, 0).Pull(5, pulled);
  ASSERT_TRUE(pull.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(h->Wait(absl::Milliseconds(20))));
  cluster.reset();
  EXPECT_TRUE(absl::IsCancelled(h->Wait(absl::ZeroDuration())));
  EXPECT_TRUE(absl::IsCancelled(pushed->status()));
  EXPECT_TRUE(absl::IsCancelled(pull->status()));
}

// DestroyTheClusterInsideACallback: worker 0's OnDone destroys the cluster,
// worker 0 included, on worker 0's I/O thread.
void DestroyTheClusterInsideACallback() {
  auto cluster = TwoWorkers();
  std::vector<float> a = Values(100, 1);
  std::vector<float> b = Values(100, 2);
  std::vector<float> out_a(100);
  std::vector<float> out_b(100);
  absl::Notification destroyed;  // never, if the destruction aborts
  auto h = cluster->worker(0, 0).PushPull(a, out_a);
  h->OnDone([&](const absl::Status&) {
    cluster.reset();
    destroyed.Notify();
  });
  auto other = cluster->worker(0, 1).PushPull(b, out_b);  // completes it
  // Wait callers are woken before the callbacks run: wait for the callback.
  destroyed.WaitForNotificationWithTimeout(kDeadline);
}

// Destroying a Worker inside its own OnDone callback would wait for the I/O
// thread the callback runs on: the process stops saying why, never hangs.
TEST(WorkerApiDeathTest, DestroyingTheWorkerInsideItsCallbackAbortsSayingWhy) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(DestroyTheClusterInsideACallback(), "destroyed on one of its own I/O threads");
}

TEST(WorkerApiTest, StatsCountOperationsAndFrames) {
  auto cluster = TwoWorkers();
  ASSERT_NE(cluster, nullptr);
  std::vector<std::vector<float>> inputs = {Values(62 * 100, 8), Values(62 * 100, 9)};
  std::vector<std::vector<float>> outputs(2, std::vector<float>(62 * 100));
  std::vector<Handle> handles;
  for (size_t w = 0; w < 2; ++w) {
    handles.push_back(*cluster->worker(0, w).PushPull(inputs[w], outputs[w]));
  }
  ASSERT_TRUE(WaitAll(handles, absl::Now() + kDeadline).ok());
  const WorkerStats s = cluster->worker(0, 0).stats();
  EXPECT_EQ(s.operations_started, 1u);
  EXPECT_EQ(s.operations_finished, 1u);
  EXPECT_GE(s.fragments_sent, 100u);
  EXPECT_GE(s.frames_sent, s.fragments_sent);
  EXPECT_GE(s.parameter_packets, 100u);
  ASSERT_EQ(s.queues.size(), 2u);
  // 100 fragments, min piece 64: one piece, on one queue.
  EXPECT_EQ(s.queues[0].fragments_assigned + s.queues[1].fragments_assigned, 100u);
  EXPECT_GT(s.window, 0u);
}

}  // namespace
}  // namespace atp
