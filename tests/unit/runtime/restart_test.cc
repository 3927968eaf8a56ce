// Runs, restarts and mismatches on a small in-process job over loopback
// (docs/protocol.md "Failures, runs and restarts"): a PS restarted while
// operations are in flight rebuilds its window from the workers' joins and
// the job finishes exactly; a second run of new Workers against a PS that
// served a first one is exact; a worker whose configuration disagrees with
// the job's makes every worker fail naming it and the field.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "atp/failure.h"
#include "atp/parameter_server.h"
#include "atp/quantize.h"
#include "atp/worker.h"
#include "gtest/gtest.h"
#include "testbed/local_cluster.h"
#include "tests/unit/runtime/local_job_checks.h"

namespace atp {
namespace {

using testbed::FabricAggregation;
using testbed::LocalCluster;
using testbed::LocalJob;
using testing::EventuallyStats;
using testing::ExactSum;
using testing::Values;

constexpr absl::Duration kDeadline = absl::Seconds(30);

LocalJob Job(int workers) { return testing::SmallJob(/*job_id=*/4, workers, absl::Seconds(5)); }

// Round: `ops` operations of `size` values on every worker, all submitted
// before any is waited for; `between` runs after submission, before the
// waits. Expects every result exact.
void ExpectExactRound(LocalCluster& cluster, size_t ops, size_t size, uint32_t seed,
                      const std::function<void()>& between = nullptr) {
  const size_t workers = cluster.num_workers(0);
  std::vector<std::vector<std::vector<float>>> inputs(ops);
  std::vector<std::vector<std::vector<float>>> outputs(ops);
  std::vector<Handle> handles;
  for (size_t op = 0; op < ops; ++op) {
    for (size_t w = 0; w < workers; ++w) {
      inputs[op].push_back(Values(size, seed + static_cast<uint32_t>(op * 16 + w)));
      outputs[op].emplace_back(size);
    }
    for (size_t w = 0; w < workers; ++w) {
      absl::StatusOr<Handle> h = cluster.worker(0, w).PushPull(inputs[op][w], outputs[op][w]);
      ASSERT_TRUE(h.ok()) << h.status();
      handles.push_back(*h);
    }
  }
  if (between) between();
  for (Handle& h : handles) ASSERT_TRUE(h.Wait(kDeadline).ok()) << h.status();
  for (size_t op = 0; op < ops; ++op) {
    const std::vector<float> expected = ExactSum(inputs[op]);
    for (size_t w = 0; w < workers; ++w) {
      EXPECT_EQ(outputs[op][w], expected) << "operation " << op << " worker " << w;
    }
  }
}

TEST(RestartTest, APsRestartedMidJobRebuildsFromTheJoinsAndTheJobIsExact) {
  auto cluster = testing::StartCluster(Job(3));
  ASSERT_NE(cluster, nullptr);
  ExpectExactRound(*cluster, /*ops=*/8, /*size=*/40000, /*seed=*/1, [&] {
    // Mid-job: once the PS has completed some fragments, kill and restart it.
    ASSERT_TRUE(EventuallyStats(*cluster, kDeadline,
                                [](const ParameterServerStats& s) { return s.completed > 300; }));
    ASSERT_TRUE(cluster->RestartParameterServer(0, 0).ok());
  });
  // The restarted PS asked the workers to join and rebuilt its window from
  // their joins (its statistics are published after the step that did it).
  EXPECT_TRUE(EventuallyStats(*cluster, kDeadline, [](const ParameterServerStats& s) {
    return s.join_requests > 0 && s.rebuilds > 0;
  }));
  EXPECT_EQ(cluster->parameter_server(0, 0).stats().mismatches, 0u);
}

TEST(RestartTest, ASecondRunOfNewWorkersAgainstTheSamePsIsExact) {
  auto cluster = testing::StartCluster(Job(2), FabricAggregation::kSingleSwitch);
  ASSERT_NE(cluster, nullptr);
  ExpectExactRound(*cluster, /*ops=*/3, /*size=*/30000, /*seed=*/10);
  ASSERT_TRUE(cluster->RecreateWorkers(0).ok());
  ExpectExactRound(*cluster, /*ops=*/3, /*size=*/30000, /*seed=*/20);
  ASSERT_TRUE(cluster->RecreateWorkers(0).ok());
  ExpectExactRound(*cluster, /*ops=*/1, /*size=*/1000, /*seed=*/30);
  EXPECT_EQ(cluster->parameter_server(0, 0).stats().mismatches, 0u);
}

// ExpectNamedMismatch: every worker's PushPull fails (at the call, or its
// handle) with kMismatch naming worker 1 and `field`; no worker returns values.
void ExpectNamedMismatch(LocalCluster& cluster, const char* field,
                         std::vector<std::vector<int>> named = {{1}}) {
  const size_t workers = cluster.num_workers(0);
  std::vector<std::vector<float>> in(workers, Values(3000, 5));
  std::vector<std::vector<float>> out(workers, std::vector<float>(3000));
  std::vector<absl::StatusOr<Handle>> handles;
  for (size_t w = 0; w < workers; ++w)
    handles.push_back(cluster.worker(0, w).PushPull(in[w], out[w]));
  for (size_t w = 0; w < workers; ++w) {
    absl::StatusOr<Handle>& h = handles[w];
    const absl::Status status = h.ok() ? h->Wait(kDeadline) : h.status();
    ASSERT_FALSE(status.ok()) << "worker " << w;
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    const std::optional<Failure> failure = FailureOf(status);
    ASSERT_TRUE(failure.has_value()) << status;
    EXPECT_EQ(failure->kind, FailureKind::kMismatch) << status;
    EXPECT_NE(std::find(named.begin(), named.end(), failure->workers), named.end()) << status;
    EXPECT_EQ(failure->detail, field) << status;
  }
}

TEST(MismatchTest, DifferentIoThreadsAreNamed) {
  LocalJob job = Job(3);
  job.adjust_worker = [](size_t rank, WorkerOptions& o) {
    if (rank == 1) o.job.io_threads = 1;
  };
  auto cluster = testing::StartCluster(std::move(job));
  ASSERT_NE(cluster, nullptr);
  // The PS compares io_threads with the first worker that joined: worker 1
  // is named, or, if it joined first, whichever of the others joined next.
  ExpectNamedMismatch(*cluster, "io_threads", {{0}, {1}, {2}});
}

TEST(MismatchTest, DifferentSlotsAreNamed) {
  LocalJob job = Job(2);
  job.adjust_worker = [](size_t rank, WorkerOptions& o) {
    if (rank == 1) o.job.slots = 32;
  };
  auto cluster = testing::StartCluster(std::move(job));
  ASSERT_NE(cluster, nullptr);
  ExpectNamedMismatch(*cluster, "slots");
}

TEST(MismatchTest, ADifferentLayoutIsNamed) {
  LocalJob job = Job(2);
  job.adjust_worker = [](size_t rank, WorkerOptions& o) {
    if (rank == 1) o.job.layout = RackLayout::Uniform(1, 3);
  };
  auto cluster = testing::StartCluster(std::move(job));
  ASSERT_NE(cluster, nullptr);
  ExpectNamedMismatch(*cluster, "layout");
}

TEST(MismatchTest, DifferentOperationSizesAreNamedAndNoResultIsDelivered) {
  auto cluster = testing::StartCluster(Job(2));
  ASSERT_NE(cluster, nullptr);
  // The same collective step, but worker 1 has half the tensor.
  std::vector<std::vector<float>> in = {Values(6000, 1), Values(3000, 2)};
  std::vector<std::vector<float>> out = {std::vector<float>(6000), std::vector<float>(3000)};
  std::vector<absl::StatusOr<Handle>> handles;
  for (size_t w = 0; w < 2; ++w) handles.push_back(cluster->worker(0, w).PushPull(in[w], out[w]));
  for (size_t w = 0; w < 2; ++w) {
    absl::StatusOr<Handle>& h = handles[w];
    const absl::Status status = h.ok() ? h->Wait(kDeadline) : h.status();
    ASSERT_FALSE(status.ok()) << "worker " << w << " must not get a result";
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
    const std::optional<Failure> failure = FailureOf(status);
    ASSERT_TRUE(failure.has_value()) << status;
    EXPECT_EQ(failure->kind, FailureKind::kMismatch) << status;
    EXPECT_EQ(failure->workers.size(), 1u) << status;
    EXPECT_EQ(failure->detail, "operation_size") << status;
  }
  EXPECT_TRUE(EventuallyStats(*cluster, kDeadline,
                              [](const ParameterServerStats& s) { return s.mismatches > 0; }));
}

TEST(MismatchTest, EveryOperationIsConfirmedOncePerPiece) {
  auto cluster = testing::StartCluster(Job(2));
  ASSERT_NE(cluster, nullptr);
  ExpectExactRound(*cluster, /*ops=*/4, /*size=*/5000, /*seed=*/3);
  EXPECT_TRUE(EventuallyStats(*cluster, kDeadline, [](const ParameterServerStats& s) {
    return s.operations_confirmed >= 4;  // at least one piece per operation
  }));
}

}  // namespace
}  // namespace atp
