// Runs, restarts and mismatches on a small in-process job over loopback
// (docs/protocol.md "Failures, runs and restarts"): a PS restarted while
// operations are in flight rebuilds its window from the workers' joins and
// the job finishes exactly, also when the dead PS's last results reached
// some workers only (they are replayed; the faults are the fabric's
// delivery filter, so the state at the restart is exact); a second run of new Workers against a PS that
// served a first one is exact; a worker whose configuration disagrees with
// the job's makes every worker fail naming it and the field.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <mutex>
#include <random>
#include <set>
#include <vector>

#include "absl/time/clock.h"
#include "atp/failure.h"
#include "atp/parameter_server.h"
#include "atp/quantize.h"
#include "atp/wire.h"
#include "atp/worker.h"
#include "gtest/gtest.h"
#include "lib/wire/control_message.h"
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
                      const std::function<void()>& between = nullptr,
                      double scale = kDefaultScale) {
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
    const std::vector<float> expected = ExactSum(inputs[op], scale);
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

// Eventually: polls `predicate` (state other threads change, with nothing to
// wait on) until it holds or `deadline` passes.
bool Eventually(absl::Duration deadline, const std::function<bool()>& predicate) {
  const absl::Time end = absl::Now() + deadline;
  while (!predicate()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// ResultFaults: a delivery filter on the fabric for the job's results
// (parameter packets that complete a fragment): it records which results
// reached which worker and drops the copies `drop` names. Everything else
// (control frames, overflow requests) passes.
class ResultFaults {
 public:
  using DropRule = std::function<bool(int worker, uint32_t queue, uint32_t position)>;

  ResultFaults(LocalCluster& cluster, uint8_t job_id) : workers_(cluster.num_workers(0)) {
    for (size_t w = 0; w < workers_; ++w) {
      ips_.push_back(LocalCluster::WorkerIp(job_id, 0, static_cast<int>(w)).value);
    }
    delivered_.resize(workers_);
    cluster.fabric()->SetDeliveryFilter([this](wire::Ipv4Address to, const wire::AtpHeader& h) {
      if (!h.ack || wire::IsControl(h) || h.IsOverflowRequest()) return true;
      const auto at = std::find(ips_.begin(), ips_.end(), to.value);
      if (at == ips_.end()) return true;
      const int worker = static_cast<int>(at - ips_.begin());
      std::lock_guard<std::mutex> lock(mu_);
      if (drop_ && drop_(worker, h.queue(), h.position())) return false;
      delivered_[static_cast<size_t>(worker)].insert(h.seq);
      const uint32_t q = h.queue();
      if (q < newest_.size()) newest_[q] = std::max(newest_[q], static_cast<int64_t>(h.position()));
      return true;
    });
  }

  // Drop: from now on, drops the copies `rule` names (built under the lock,
  // so it may read the positions delivered so far through `this`).
  void Drop(std::function<DropRule(ResultFaults&)> make_rule) {
    std::lock_guard<std::mutex> lock(mu_);
    drop_ = make_rule(*this);
  }
  void DeliverAll() {
    std::lock_guard<std::mutex> lock(mu_);
    drop_ = nullptr;
  }
  // Got: whether `worker` received the result of (queue, position).
  bool Got(int worker, uint32_t queue, uint32_t position) {
    std::lock_guard<std::mutex> lock(mu_);
    return GotLocked(worker, queue, position);
  }
  // SomeoneAheadOf: some worker received a result of `queue` that `lagging`
  // never did.
  bool SomeoneAheadOf(int lagging, uint32_t queue) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t w = 0; w < workers_; ++w) {
      for (uint32_t seq : delivered_[w]) {
        if (wire::QueueOfSeq(seq) == queue && !delivered_[static_cast<size_t>(lagging)].count(seq)) {
          return true;
        }
      }
    }
    return false;
  }
  // Newest (under the lock, from a DropRule's maker): the highest position of
  // `queue` delivered to anyone so far, or -1.
  int64_t NewestLocked(uint32_t queue) const { return newest_[queue]; }

 private:
  bool GotLocked(int worker, uint32_t queue, uint32_t position) const {
    return delivered_[static_cast<size_t>(worker)].count(wire::MakeSeq(queue, position)) > 0;
  }

  const size_t workers_;
  std::vector<uint32_t> ips_;
  std::mutex mu_;
  DropRule drop_;                            // under mu_
  std::vector<std::set<uint32_t>> delivered_;  // under mu_: per worker, seqs received
  std::array<int64_t, wire::kMaxQueues> newest_ = MinusOnes();  // under mu_

  static std::array<int64_t, wire::kMaxQueues> MinusOnes() {
    std::array<int64_t, wire::kMaxQueues> a;
    a.fill(-1);
    return a;
  }
};

TEST(RestartTest, AResultOnlySomeWorkersGotIsReplayedByOneThatGotIt) {
  // The PS dies right after its parameter packets reached workers 0 and 1
  // but not worker 2: 0 and 1 are past positions that 2 still waits for,
  // and they will never resend them. The restarted PS learns it from the
  // joins and asks one of them to replay the packets it received.
  auto cluster = testing::StartCluster(Job(3));
  ASSERT_NE(cluster, nullptr);
  ResultFaults faults(*cluster, /*job_id=*/4);
  ExpectExactRound(*cluster, /*ops=*/8, /*size=*/40000, /*seed=*/41, [&] {
    ASSERT_TRUE(EventuallyStats(*cluster, kDeadline,
                                [](const ParameterServerStats& s) { return s.completed > 100; }));
    // Worker 2 loses every result from now on (the PS's resends of them too).
    faults.Drop([](ResultFaults&) {
      return [](int worker, uint32_t, uint32_t) { return worker == 2; };
    });
    // (On either queue: one may have no fragment in flight at worker 2 then.)
    ASSERT_TRUE(Eventually(kDeadline, [&] {
      return faults.SomeoneAheadOf(2, /*queue=*/0) || faults.SomeoneAheadOf(2, /*queue=*/1);
    }));
    ASSERT_TRUE(cluster->RestartParameterServer(0, 0, [&] { faults.DeliverAll(); }).ok());
  });
  EXPECT_TRUE(EventuallyStats(*cluster, kDeadline, [](const ParameterServerStats& s) {
    return s.rebuilds > 0 && s.replay_requests > 0 && s.replays > 0;
  }));
  EXPECT_GT(cluster->fabric()->stats().filtered, 0u);
  EXPECT_EQ(cluster->parameter_server(0, 0).stats().mismatches, 0u);
}

TEST(RestartTest, ARestartWithinTheFirstWindowAsksForJoinsAndReplays) {
  // A fresh job's first operation, smaller than a window: every position in
  // flight lies in the first `slots` (64) of each queue, so the restarted PS
  // receives no gradient outside its window. It asks for joins because no
  // worker joined the queue since it started. Worker 2 loses every result
  // of the dead PS; the others got them, and only a replay completes worker 2.
  // No waiting reports: their join requests would rescue the queue too, a
  // second later.
  LocalJob job = Job(3);
  job.ps_waiting_report_interval = absl::InfiniteDuration();
  auto cluster = testing::StartCluster(job);
  ASSERT_NE(cluster, nullptr);
  ResultFaults faults(*cluster, /*job_id=*/4);
  faults.Drop([](ResultFaults&) {
    return [](int worker, uint32_t, uint32_t) { return worker == 2; };
  });
  // 60 fragments over the two queues.
  ExpectExactRound(*cluster, /*ops=*/1, /*size=*/62 * 60, /*seed=*/71, [&] {
    ASSERT_TRUE(Eventually(kDeadline, [&] {
      return faults.SomeoneAheadOf(2, /*queue=*/0) || faults.SomeoneAheadOf(2, /*queue=*/1);
    }));
    ASSERT_TRUE(cluster->RestartParameterServer(0, 0, [&] { faults.DeliverAll(); }).ok());
  });
  EXPECT_TRUE(EventuallyStats(*cluster, kDeadline, [](const ParameterServerStats& s) {
    return s.join_requests > 0 && s.rebuilds > 0 && s.replays > 0 && s.stale + s.ahead == 0;
  }));
  EXPECT_EQ(cluster->parameter_server(0, 0).stats().mismatches, 0u);
}

TEST(RestartTest, AConfirmationOnlySomeWorkersGotIsGivenAgain) {
  // The dead PS confirmed the operation's pieces (kOpBegin) to workers 0 and
  // 1 only. They never declare them again by themselves; worker 2 does, once
  // per retransmission timeout, and delivers nothing until confirmed. Asked
  // to join, every worker declares its recent pieces again, and the
  // restarted PS confirms them to everyone.
  auto cluster = testing::StartCluster(Job(3));
  ASSERT_NE(cluster, nullptr);
  std::vector<uint32_t> ips;
  for (int w = 0; w < 3; ++w) ips.push_back(LocalCluster::WorkerIp(4, 0, w).value);
  std::mutex mu;
  bool drop = true;                   // under mu
  std::array<int, 3> controls = {};  // under mu: PS control frames delivered, per worker
  cluster->fabric()->SetDeliveryFilter([&](wire::Ipv4Address to, const wire::AtpHeader& h) {
    const auto at = std::find(ips.begin(), ips.end(), to.value);
    if (!wire::IsControl(h) || at == ips.end()) return true;
    const auto worker = static_cast<size_t>(at - ips.begin());
    std::lock_guard<std::mutex> lock(mu);
    if (drop && worker == 2) return false;
    ++controls[worker];
    return true;
  });
  ExpectExactRound(*cluster, /*ops=*/1, /*size=*/62 * 60, /*seed=*/83, [&] {
    // Both queues' confirmations reached workers 0 and 1.
    ASSERT_TRUE(Eventually(kDeadline, [&] {
      std::lock_guard<std::mutex> lock(mu);
      return controls[0] >= 2 && controls[1] >= 2;
    }));
    ASSERT_TRUE(cluster->RestartParameterServer(0, 0, [&] {
      std::lock_guard<std::mutex> lock(mu);
      drop = false;
    }).ok());
  });
  EXPECT_TRUE(EventuallyStats(*cluster, kDeadline, [](const ParameterServerStats& s) {
    return s.join_requests > 0 && s.operations_confirmed > 0;
  }));
  EXPECT_EQ(cluster->parameter_server(0, 0).stats().mismatches, 0u);
  cluster->fabric()->SetDeliveryFilter(nullptr);  // before mu and ips go
}

TEST(RestartTest, AResultAcknowledgedAfterAnUnacknowledgedOneIsRecovered) {
  // On queue 0, position p's result reaches nobody and p + 1's reaches
  // workers 0 and 1 only; later ones reach everyone. Every worker's lowest
  // unacknowledged position is then p, so only the results each join lists
  // beyond it tell the restarted PS that p + 1 must be replayed (by 0 or 1)
  // and that p + 2, ... need nothing.
  auto cluster = testing::StartCluster(Job(3));
  ASSERT_NE(cluster, nullptr);
  ResultFaults faults(*cluster, /*job_id=*/4);
  std::atomic<int64_t> chosen{-1};  // p
  ExpectExactRound(*cluster, /*ops=*/8, /*size=*/40000, /*seed=*/57, [&] {
    ASSERT_TRUE(EventuallyStats(*cluster, kDeadline,
                                [](const ParameterServerStats& s) { return s.completed > 100; }));
    faults.Drop([&](ResultFaults& f) {
      // p: the first position of queue 0 past every result delivered so far
      // (so no worker has it yet), fixed when its first copy goes by.
      const int64_t newest = f.NewestLocked(0);
      return [&chosen, newest](int worker, uint32_t queue, uint32_t position) {
        if (queue != 0) return false;
        int64_t p = chosen.load();
        if (p < 0 && static_cast<int64_t>(position) > newest) {
          p = position;
          chosen.store(p);
        }
        if (p < 0) return false;
        return static_cast<int64_t>(position) == p ||
               (static_cast<int64_t>(position) == p + 1 && worker == 2);
      };
    });
    ASSERT_TRUE(Eventually(kDeadline, [&] {
      const int64_t p = chosen.load();
      if (p < 0) return false;
      const auto next = static_cast<uint32_t>(p + 1);
      const auto after = static_cast<uint32_t>(p + 2);
      return faults.Got(0, 0, next) && faults.Got(1, 0, next) && faults.Got(0, 0, after) &&
             faults.Got(1, 0, after) && faults.Got(2, 0, after);
    }));
    ASSERT_TRUE(cluster->RestartParameterServer(0, 0, [&] { faults.DeliverAll(); }).ok());
  });
  EXPECT_TRUE(EventuallyStats(*cluster, kDeadline, [](const ParameterServerStats& s) {
    return s.rebuilds > 0 && s.replay_requests > 0 && s.replays > 0;
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

TEST(RestartTest, ASecondRunWithinTheFirstRunsWindowIsExact) {
  // Each run is shorter than the PS's window (2 x 1000 values: 17 positions
  // per queue, of 64 slots): the PS still holds, in the slot of each
  // position the next run starts at, the previous run's packet of that very
  // position. Other inputs each run, so that a packet kept would be wrong.
  auto cluster = testing::StartCluster(Job(2), FabricAggregation::kSingleSwitch);
  ASSERT_NE(cluster, nullptr);
  ExpectExactRound(*cluster, /*ops=*/2, /*size=*/1000, /*seed=*/10);
  ASSERT_TRUE(cluster->RecreateWorkers(0).ok());
  ExpectExactRound(*cluster, /*ops=*/2, /*size=*/1500, /*seed=*/20);
  ASSERT_TRUE(cluster->RecreateWorkers(0).ok());
  ExpectExactRound(*cluster, /*ops=*/1, /*size=*/700, /*seed=*/30);
  const ParameterServerStats ps = cluster->parameter_server(0, 0).stats();
  EXPECT_EQ(ps.mismatches, 0u);
  EXPECT_GE(ps.rebuilds, 4u);  // two new runs, two queues each
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

TEST(MismatchTest, ANewRunMayChangeTheScaleButItsWorkersMustAgree) {
  // docs/protocol.md: "A new run resets that reference". The PS is not
  // restarted between the runs.
  auto cluster = testing::StartCluster(Job(2), FabricAggregation::kSingleSwitch);
  ASSERT_NE(cluster, nullptr);
  ExpectExactRound(*cluster, /*ops=*/1, /*size=*/2000, /*seed=*/10);
  const auto scale_of_all = [](double scale) {
    return [scale](size_t, WorkerOptions& o) { o.job.scale = scale; };
  };
  ASSERT_TRUE(cluster->RecreateWorkers(0, scale_of_all(1e7)).ok());
  ExpectExactRound(*cluster, /*ops=*/1, /*size=*/2000, /*seed=*/20, nullptr, /*scale=*/1e7);
  ASSERT_TRUE(cluster->RecreateWorkers(0, scale_of_all(kDefaultScale)).ok());
  ExpectExactRound(*cluster, /*ops=*/1, /*size=*/2000, /*seed=*/30);
  // Within one run the workers still must agree: worker 1 is named.
  ASSERT_TRUE(cluster->RecreateWorkers(0, [](size_t rank, WorkerOptions& o) {
                if (rank == 1) o.job.scale = 1e6;
              }).ok());
  ExpectNamedMismatch(*cluster, "scale", {{1}, {0}});
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
