// SkipReduce on ATP, contribution variant (SkipVariant::kContributions,
// lib/worker/fragment_skip.h): whole jobs of real WorkerQueueEngines and a
// real PsEngine that aggregates alone (the switches' part is in
// SkipClusterTest), the test passing messages between them by hand with a
// fake clock. For every mode on 2..8 workers and 2-rack jobs: every fragment
// holds exactly the sum of the workers an independently computed reference
// names, on every worker; each worker sent exactly the fragments it
// contributes to; the PS completed every fragment once on the declared
// contributor sets. And liveness: a non-contributor that loses its parameter
// packet gets it back by a kPull; the float path sums the contributors' rows.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "atp/quantize.h"
#include "atp/skip_reduce.h"
#include "gtest/gtest.h"
#include "lib/protocol/job_shape.h"
#include "lib/protocol/message_sink.h"
#include "lib/protocol/skipped_generations.h"
#include "lib/ps/ps_config.h"
#include "lib/ps/ps_engine.h"
#include "lib/wire/control_message.h"
#include "lib/worker/fragment_skip.h"
#include "lib/worker/worker_queue_engine.h"
#include "tests/common/skip_reference.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using atp::testing::ReferenceContributors;
using testing::kJob;
using testing::kT0;

constexpr uint32_t kQueues = 2;
constexpr double kScale = kDefaultScale;

// Input: worker r contributes (r + 1) * 2^-14 plus a small per-element ramp,
// so that a result's value names its contributors.
std::vector<float> Input(size_t values, int rank) {
  std::vector<float> v(values);
  for (size_t i = 0; i < values; ++i) {
    v[i] = static_cast<float>(rank + 1) / 16384.0f + static_cast<float>(i % 7) / 1024.0f;
  }
  return v;
}

class Collect : public protocol::MessageSink {
 public:
  void Send(const wire::AtpMessage& message) override { sent.push_back(message); }
  std::deque<wire::AtpMessage> sent;
};

SkipOptions Contributions(SkipOptions skip) {
  skip.variant = SkipVariant::kContributions;
  return skip;
}

// DropDownlink: whether the parameter packet `m` must not reach worker `rank`.
using DropDownlink = std::function<bool(int rank, const wire::AtpMessage& m)>;

class ContributionJob {
 public:
  // slots: the window slots per queue, the workers' and the PS's alike.
  ContributionJob(std::vector<int> workers_per_rack, bool ps_accepts_declared = true,
                  uint32_t slots = 64, TimeDelta orphan_timeout = TimeDelta::FromSeconds(2))
      : shape_{.job = kJob,
               .workers_per_rack = std::vector<uint8_t>(workers_per_rack.begin(),
                                                        workers_per_rack.end())} {
    for (int rack = 0; rack < shape_.racks(); ++rack) {
      for (int w = 0; w < shape_.workers_in_rack(rack); ++w) {
        std::vector<std::unique_ptr<WorkerQueueEngine>> queues;
        for (uint32_t q = 0; q < kQueues; ++q) {
          WorkerQueueConfig config = testing::SmallConfig(slots, std::min(slots, 16u));
          config.shape = shape_;
          config.rack = rack;
          config.worker_in_rack = w;
          config.queue = q;
          queues.push_back(testing::MakeEngine(config));
        }
        engines_.push_back(std::move(queues));
      }
    }
    ps::PsConfig config;
    config.jobs.push_back(shape_);
    config.slots = slots;
    config.orphan_timeout = orphan_timeout;
    if (ps_accepts_declared) config.contribution_skipping_jobs = {kJob};
    auto ps = ps::PsEngine::Create(config);
    EXPECT_TRUE(ps.ok()) << ps.status();
    ps_ = std::make_unique<ps::PsEngine>(*std::move(ps));
  }

  int workers() const { return static_cast<int>(engines_.size()); }
  WorkerQueueEngine& engine(int rank, uint32_t queue) { return *engines_[rank][queue]; }
  ps::PsEngine& ps() { return *ps_; }

  // Start: one operation of `inputs` on every worker with `skip`, cut into
  // two pieces (one per queue, the second at fragment `split`).
  void Start(std::vector<std::vector<float>> inputs, const SkipOptions& skip, uint64_t split) {
    const size_t values = inputs[0].size();
    const uint64_t fragments = (values + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
    auto plan = SkipPlan::Create(skip, workers());
    ASSERT_TRUE(plan.ok()) << plan.status();
    split = std::min(split, fragments);
    const size_t split_value = std::min<size_t>(values, split * wire::kValuesPerFragment);
    inputs_ = std::move(inputs);
    outputs_.assign(workers(), std::vector<float>(values, -1.0f));
    for (int r = 0; r < workers(); ++r) {
      const std::span<const float> in(inputs_[r]);
      const std::span<float> out(outputs_[r]);
      FragmentSkip first{.plan = *plan, .op_fragments = fragments, .first_fragment = 0};
      FragmentSkip second{.plan = *plan, .op_fragments = fragments, .first_fragment = split};
      ASSERT_TRUE(engines_[r][0]->Enqueue(in.first(split_value), out.first(split_value), first).ok());
      ASSERT_TRUE(
          engines_[r][1]->Enqueue(in.subspan(split_value), out.subspan(split_value), second).ok());
    }
  }

  std::vector<std::vector<float>> Run(size_t values, const SkipOptions& skip, uint64_t split) {
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < workers(); ++r) inputs.push_back(Input(values, r));
    Start(std::move(inputs), skip, split);
    Pump(kT0);
    return outputs_;
  }

  // Pump: every worker's sends to the PS (control frames to OnPull, as the
  // PS host dispatches them), the PS's packets to every worker unless `drop`
  // says otherwise, until nobody has anything to send at `now`.
  void Pump(TimePoint now, const DropDownlink& drop = nullptr) {
    std::vector<wire::AtpMessage> burst(256);
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < workers(); ++r) {
        if (r == held_) continue;
        for (auto& engine : engines_[r]) {
          const size_t n = engine->CollectSends(now, burst);
          for (size_t i = 0; i < n; ++i) {
            if (wire::IsControl(burst[i].header)) {
              wire::ControlMessage control;
              ASSERT_EQ(wire::DecodeControl(burst[i], &control), wire::ControlError::kOk);
              ASSERT_EQ(control.type, wire::ControlType::kPull);
              ps_->OnPull(burst[i], now, sink_);
            } else {
              ps_->OnGradient(burst[i], now, sink_);
            }
          }
          moved |= n > 0;
        }
      }
      while (!sink_.sent.empty()) {
        for (int r = 0; r < workers(); ++r) {
          if (drop && drop(r, sink_.sent.front())) continue;
          for (auto& engine : engines_[r]) engine->OnParameterPacket(sink_.sent.front(), now);
        }
        sink_.sent.pop_front();
        moved = true;
      }
    }
    std::vector<OperationId> done(64);
    for (auto& queues : engines_) {
      for (auto& engine : queues) engine->CollectCompletions(done);
    }
  }

  // RunTimersUntilIdle: advances the clock to the next deadline and pumps,
  // until nothing is in flight (at most `rounds` times).
  void RunTimersUntilIdle(TimePoint now, int rounds) {
    for (int i = 0; i < rounds && Totals().in_flight > 0; ++i) {
      TimePoint next = TimePoint::Infinite();
      for (auto& queues : engines_) {
        for (auto& engine : queues) next = Earliest(next, engine->NextDeadline());
      }
      ASSERT_FALSE(next.IsInfinite());
      now = std::max(now, next);
      Pump(now);
    }
  }

  // Expected: for each value, the exact sum of its fragment's contributors'
  // quantized inputs, dequantized.
  // A sum beyond int32 (a fragment the float path carries) is clamped here:
  // the caller replaces those fragments with their float sums.
  std::vector<float> Expected(const std::vector<std::set<int>>& contributors) const {
    const size_t values = inputs_[0].size();
    std::vector<int64_t> sum(values, 0);
    std::vector<int32_t> q(values);
    for (int r = 0; r < workers(); ++r) {
      Quantize(inputs_[r], kScale, q);
      for (size_t i = 0; i < values; ++i) {
        if (contributors[i / wire::kValuesPerFragment].contains(r)) sum[i] += q[i];
      }
    }
    std::vector<int32_t> sum32(values);
    for (size_t i = 0; i < values; ++i) {
      sum32[i] = static_cast<int32_t>(std::clamp<int64_t>(
          sum[i], std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
    }
    std::vector<float> out(values);
    Dequantize(sum32, kScale, out);
    return out;
  }

  // ReportWaiting: what the PS host multicasts as kWaitingForWorkers status
  // frames (PsShard::ReportWaiting): the oldest live fragment of every queue
  // (live for at least `older_than`), handed to every worker's engine of
  // that queue as the worker's I/O loop hands it over.
  void ReportWaiting(TimePoint now, TimeDelta older_than) {
    std::vector<ps::WaitingReport> reports;
    ps_->CollectWaiting(now, older_than, reports);
    for (const ps::WaitingReport& report : reports) {
      for (auto& queues : engines_) queues[report.queue]->OnJobWaitsAt(report.position);
    }
  }

  // Hold: worker `rank` collects no sends (and so reaches no position) until
  // Hold(-1); it still receives.
  void Hold(int rank) { held_ = rank; }

  const std::vector<std::vector<float>>& outputs() const { return outputs_; }
  const std::vector<std::vector<float>>& inputs() const { return inputs_; }

  WorkerQueueStats Totals() const {
    WorkerQueueStats t;
    for (const auto& queues : engines_) {
      for (const auto& e : queues) {
        const WorkerQueueStats s = e->stats();
        t.fragments_sent += s.fragments_sent;
        t.fragments_skipped += s.fragments_skipped;
        t.fragments_not_contributed += s.fragments_not_contributed;
        t.pulls_sent += s.pulls_sent;
        t.keep_alives_sent += s.keep_alives_sent;
        t.resends_loss += s.resends_loss;
        t.resends_timeout += s.resends_timeout;
        t.resends_overflow += s.resends_overflow;
        t.timeouts += s.timeouts;
        t.operations_completed += s.operations_completed;
        t.in_flight += s.in_flight;
      }
    }
    return t;
  }

 private:
  protocol::JobShape shape_;
  std::vector<std::vector<std::unique_ptr<WorkerQueueEngine>>> engines_;  // [rank][queue]
  std::unique_ptr<ps::PsEngine> ps_;
  Collect sink_;
  std::vector<std::vector<float>> inputs_;
  std::vector<std::vector<float>> outputs_;
  int held_ = -1;
};

// Check: runs one operation and compares it with the reference.
void Check(ContributionJob& job, size_t values, const SkipOptions& skip, uint64_t split) {
  const uint64_t fragments = (values + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
  const WorkerQueueStats before = job.Totals();
  const ps::PsCounters ps_before = job.ps().counters();
  const std::vector<std::vector<float>> outputs = job.Run(values, skip, split);
  const std::vector<std::set<int>> contributors =
      ReferenceContributors(fragments, job.workers(), skip);
  ASSERT_EQ(contributors.size(), fragments);
  const std::vector<float> expected = job.Expected(contributors);
  uint64_t contributions = 0;
  for (const std::set<int>& in : contributors) contributions += in.size();
  for (int r = 0; r < job.workers(); ++r) {
    for (size_t i = 0; i < values; ++i) {
      ASSERT_EQ(outputs[r][i], expected[i])
          << "worker " << r << " value " << i << " (fragment " << i / wire::kValuesPerFragment
          << ", " << contributors[i / wire::kValuesPerFragment].size() << " contributors)";
    }
  }
  const WorkerQueueStats after = job.Totals();
  const uint64_t n = static_cast<uint64_t>(job.workers());
  // Each worker sent exactly the fragments it contributes to, once.
  EXPECT_EQ(after.fragments_sent - before.fragments_sent, contributions);
  EXPECT_EQ(after.fragments_not_contributed - before.fragments_not_contributed,
            fragments * n - contributions);
  EXPECT_EQ(after.fragments_skipped, 0u);
  // Nobody waited: no timeout, no resend, no pull, everything acknowledged.
  EXPECT_EQ(after.timeouts, 0u);
  EXPECT_EQ(after.resends_loss + after.resends_timeout + after.pulls_sent, 0u);
  EXPECT_EQ(after.in_flight, 0u);
  EXPECT_EQ(after.operations_completed - before.operations_completed, 2 * n);
  // The PS completed every fragment once, from exactly the contributions
  // (and the keep-alives of zeros, if a worker sat out a slot that long).
  const ps::PsCounters& ps = job.ps().counters();
  EXPECT_EQ(ps.completed - ps_before.completed, fragments);
  EXPECT_EQ(ps.contributions - ps_before.contributions,
            contributions + after.keep_alives_sent - before.keep_alives_sent);
  EXPECT_EQ(ps.stale + ps.ahead + ps.duplicates + ps.shape_mismatch + ps.malformed, 0u);
}

TEST(SkipContributionsTest, StaticOnTwoToEightWorkersInOneRack) {
  for (int n = 2; n <= 8; ++n) {
    ContributionJob job({n});
    for (int k = 0; k < n; ++k) {
      SCOPED_TRACE(::testing::Message() << n << " workers, k = " << k);
      Check(job,
            37 * 62 - 5,
            Contributions({.mode = k == 0 ? SkipMode::kNone : SkipMode::kStatic,
                           .reduce_scatter_steps = k}),
            /*split=*/11);
    }
  }
}

TEST(SkipContributionsTest, RandomMovesWithTheIteration) {
  for (int n = 2; n <= 8; ++n) {
    ContributionJob job({n});
    std::set<int> shifts;
    for (uint64_t iteration = 0; iteration < 8; ++iteration) {
      SCOPED_TRACE(::testing::Message() << n << " workers, iteration " << iteration);
      const SkipOptions skip = Contributions({.mode = SkipMode::kRandom,
                                              .reduce_scatter_steps = std::max(1, n / 2),
                                              .seed = 42,
                                              .iteration = iteration,
                                              .tensor = 3});
      shifts.insert(SkipPlan::Create(skip, n)->shift());
      Check(job, 29 * 62, skip, /*split=*/15);
    }
    EXPECT_GT(shifts.size(), 1u) << n << " workers";
  }
}

TEST(SkipContributionsTest, TwoRackJobsDeclareTheirRacksContributors) {
  // Uniform and uneven racks: whole racks drop out for some slices (fanIn1
  // below the job's racks) and a rack's contributors are renumbered.
  for (const std::vector<int>& racks : std::vector<std::vector<int>>{{3, 3}, {1, 4}, {2, 2}}) {
    ContributionJob job(racks);
    for (int k = 1; k < job.workers(); ++k) {
      SCOPED_TRACE(::testing::Message() << racks[0] << "+" << racks[1] << " workers, k = " << k);
      Check(job, 50 * 62 + 1, Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = k}),
            20);
      Check(job, 50 * 62 + 1,
            Contributions({.mode = SkipMode::kRandom,
                           .reduce_scatter_steps = k,
                           .seed = 9,
                           .iteration = static_cast<uint64_t>(k)}),
            20);
    }
  }
}

TEST(SkipContributionsTest, SelectivePolicyProtectsItsTensors) {
  const int n = 4;
  ContributionJob job({n});
  SkipPolicy policy{.mode = SkipMode::kRandom, .rate = 0.5, .seed = 7, .warmup_iterations = 1};
  policy.protected_tensors = {0};
  policy.variant = SkipVariant::kContributions;
  for (uint64_t tensor = 0; tensor < 3; ++tensor) {
    for (uint64_t iteration = 0; iteration < 3; ++iteration) {
      const SkipOptions skip = policy.ForTensor(tensor, iteration, n);
      const bool skips = tensor != 0 && iteration >= 1;
      EXPECT_EQ(skip.reduce_scatter_steps, skips ? 2 : 0);
      EXPECT_EQ(skip.variant, SkipVariant::kContributions);
      const uint64_t sent_before = job.Totals().fragments_sent;
      Check(job, 16 * 62, skip, 8);
      // Half the contributions of a skipped tensor stay home.
      EXPECT_EQ(job.Totals().fragments_sent - sent_before, skips ? 16u * 2 : 16u * 4);
    }
  }
}

TEST(SkipContributionsTest, FewerFragmentsThanWorkers) {
  ContributionJob job({8});
  for (int k = 1; k < 8; ++k) {
    Check(job, 3 * 62, Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = k}), 1);
  }
}

TEST(SkipContributionsTest, LostParameterPacketToANonContributorIsPulled) {
  // 3 workers, static k = 1: slice j lacks worker j. Worker 0 does not
  // contribute to the first slice's fragments; their parameter packets never
  // reach it the first time.
  ContributionJob job({3});
  const SkipOptions skip = Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1});
  const size_t values = 9 * 62;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < 3; ++r) inputs.push_back(Input(values, r));
  job.Start(std::move(inputs), skip, /*split=*/9);  // one piece on queue 0
  std::set<uint32_t> dropped;
  // A pull before anything arrived at the PS is ignored: the fragment is live.
  {
    ContributionJob fresh({3});
    wire::ControlMessage pull;
    pull.type = wire::ControlType::kPull;
    Collect out;
    fresh.ps().OnPull(wire::MakeWorkerControl(kJob, {.rack = 0, .fan_in0 = 3, .fan_in1 = 1}, 0, 0,
                                              pull),
                      kT0, out);
    EXPECT_TRUE(out.sent.empty());
    EXPECT_EQ(fresh.ps().counters().pulls_ignored, 1u);
  }
  job.Pump(kT0, [&](int rank, const wire::AtpMessage& m) {
    // Slice 0 = fragments 0..2 (positions 0..2 of queue 0): drop each to
    // worker 0 once.
    if (rank != 0 || m.header.queue() != 0 || m.header.position() > 2) return false;
    return dropped.insert(m.header.position()).second;
  });
  ASSERT_EQ(dropped.size(), 3u);
  EXPECT_GT(job.engine(0, 0).stats().in_flight, 0u);  // waits for them
  job.RunTimersUntilIdle(kT0, /*rounds=*/10);
  const WorkerQueueStats s = job.engine(0, 0).stats();
  EXPECT_EQ(s.in_flight, 0u);
  // At least one pull per lost packet (by loss detection or by the timer),
  // never a resend; every pull named a completed fragment.
  EXPECT_GE(s.pulls_sent, 3u);
  EXPECT_EQ(s.resends_loss + s.resends_timeout, 0u);
  EXPECT_EQ(job.Totals().pulls_sent, s.pulls_sent);
  EXPECT_EQ(job.ps().counters().pulls_answered, s.pulls_sent);
  EXPECT_EQ(job.ps().counters().pulls_ignored, 0u);
  EXPECT_EQ(job.ps().counters().param_resent, 0u);
  EXPECT_EQ(job.ps().counters().completed, 9u);
  const std::vector<float> expected = job.Expected(ReferenceContributors(9, 3, skip));
  for (int r = 0; r < 3; ++r) {
    for (size_t i = 0; i < values; ++i) {
      ASSERT_EQ(job.outputs()[r][i], expected[i]) << "worker " << r << " value " << i;
    }
  }
}

TEST(SkipContributionsTest, ResultsBeforeTheWorkerReachedThemAreKept) {
  // Worker 0 is held: the others complete slice 0 (which lacks worker 0)
  // before worker 0 has put any position in flight. Its engine keeps those
  // results and acknowledges them when it gets there: no pull, no timeout.
  ContributionJob job({3});
  const SkipOptions skip = Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1});
  const size_t values = 12 * 62;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < 3; ++r) inputs.push_back(Input(values, r));
  job.Start(std::move(inputs), skip, /*split=*/12);
  job.Hold(0);
  job.Pump(kT0);
  EXPECT_EQ(job.ps().counters().completed, 4u);  // slice 0: fragments 0..3
  EXPECT_EQ(job.engine(0, 0).stats().early_results, 4u);
  job.Hold(-1);
  job.Pump(kT0);
  const WorkerQueueStats s = job.engine(0, 0).stats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.operations_completed, 1u);
  EXPECT_EQ(s.pulls_sent + s.timeouts, 0u);
  const std::vector<float> expected = job.Expected(ReferenceContributors(12, 3, skip));
  for (int r = 0; r < 3; ++r) {
    for (size_t i = 0; i < values; ++i) {
      ASSERT_EQ(job.outputs()[r][i], expected[i]) << "worker " << r << " value " << i;
    }
  }
}

TEST(SkipContributionsTest, FloatPathSumsTheDeclaredContributorsRows) {
  // 2 racks x 2, static k = 1: a value too large for int32 sends its
  // fragment on the float path; the PS sums the contributors' rows in
  // (rack, worker) order and non-contributors ignore the overflow request.
  ContributionJob job({2, 2});
  const SkipOptions skip = Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1});
  const size_t values = 8 * 62;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < 4; ++r) inputs.push_back(Input(values, r));
  // Fragment 0 (slice 0, lacks worker 0) and fragment 2 (slice 1, lacks
  // worker 1): worker 2 saturates one value of each; worker 1 one of fragment 0.
  inputs[2][5] = 3.0e9f;
  inputs[2][2 * 62 + 1] = -7.5e8f;
  inputs[1][3] = 1.0e10f;
  job.Start(inputs, skip, /*split=*/8);
  job.Pump(kT0);
  job.RunTimersUntilIdle(kT0, 10);
  const std::vector<std::set<int>> contributors = ReferenceContributors(8, 4, skip);
  std::vector<float> expected = job.Expected(contributors);
  for (uint64_t f : {0u, 2u}) {
    for (size_t i = f * 62; i < (f + 1) * 62; ++i) {
      double sum = 0.0;
      for (int r : contributors[f]) sum += inputs[r][i];
      expected[i] = static_cast<float>(sum);
    }
  }
  for (int r = 0; r < 4; ++r) {
    for (size_t i = 0; i < values; ++i) {
      ASSERT_EQ(job.outputs()[r][i], expected[i]) << "worker " << r << " value " << i;
    }
  }
  EXPECT_EQ(job.ps().counters().fp_completed, 2u);
  EXPECT_EQ(job.ps().counters().completed, 8u);
  // A float-path fragment completes after later ones, so a non-contributor's
  // loss detection may pull it early: ignored while it is live.
  EXPECT_EQ(job.ps().counters().pulls_answered + job.ps().counters().pulls_ignored,
            job.Totals().pulls_sent);
  EXPECT_EQ(job.ps().counters().shape_mismatch, 0u);
}

// SoleWorkersGradient: queue 0's gradient at `position` from the only worker
// of a one-rack, one-worker job kJob (it completes the fragment at once).
wire::AtpMessage SoleWorkersGradient(uint32_t position) {
  wire::AtpMessage m;
  m.header.job = kJob;
  m.header.seq = wire::MakeSeq(0, position);
  m.header.fan_in0 = 1;
  m.header.fan_in1 = 1;
  m.header.bitmap0 = 1;
  m.header.bitmap1 = 1;
  return m;
}

// OneSlotPsConfig: a PS of one slot (positions are generations) for a job of
// 2 workers in one rack with declared fan-ins.
ps::PsConfig OneSlotPsConfig() {
  ps::PsConfig config;
  config.jobs.push_back(protocol::JobShape::Uniform(kJob, 1, 2));
  config.slots = 1;
  config.contribution_skipping_jobs = {kJob};
  return config;
}

TEST(SkipContributionsTest, PullsAreAnsweredFromTheSlotsRecentGenerations) {
  // One slot, so positions 0, 1, 2, ... are its successive generations; only
  // worker 0 of 2 contributes (declared fanIn0 = 1). A non-contributor that
  // fell behind gets the last contribution_history generations back; a PS
  // keeping fewer than the workers' keep-alive bound needs is refused.
  ps::PsConfig config = OneSlotPsConfig();
  config.contribution_history = 4;  // below the workers' keep-alive bound
  {
    auto refused = ps::PsEngine::Create(config);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("PsConfig.contribution_history"), std::string::npos);
  }
  config.contribution_history = protocol::kContributionHistoryNeeded;
  ASSERT_EQ(config.contribution_history, 5u);
  auto ps = ps::PsEngine::Create(config);
  ASSERT_TRUE(ps.ok()) << ps.status();
  Collect out;
  for (uint32_t position = 0; position < 10; ++position) {
    wire::AtpMessage m = SoleWorkersGradient(position);
    m.payload[0] = position + 100;
    ps->OnGradient(m, kT0, out);
  }
  ASSERT_EQ(ps->counters().completed, 10u);
  out.sent.clear();
  wire::ControlMessage pull;
  pull.type = wire::ControlType::kPull;
  const wire::ControlSender sender{.worker_in_rack = 1, .rack = 0, .fan_in0 = 2, .fan_in1 = 1};
  for (uint32_t position : {9u, 2u, 1u, 0u}) {
    ps->OnPull(wire::MakeWorkerControl(kJob, sender, 0, position, pull), kT0, out);
  }
  // It keeps 5 rounded up to a power of two: 8 generations, 2..9.
  ASSERT_EQ(out.sent.size(), 2u);  // 9 (the last) and 2 (7 generations back)
  EXPECT_EQ(out.sent[0].header.position(), 9u);
  EXPECT_EQ(out.sent[0].payload[0], 109u);
  EXPECT_EQ(out.sent[1].header.position(), 2u);
  EXPECT_EQ(out.sent[1].payload[0], 102u);
  EXPECT_EQ(ps->counters().pulls_answered, 2u);
  EXPECT_EQ(ps->counters().pulls_ignored, 2u);
}

TEST(SkipContributionsTest, WaitingReportsNameNoOneUnderDeclaredFanIns) {
  // A fragment declared with two contributors, one of them in: the PS waits
  // for contributor index 1, and which worker that is only the workers' skip
  // plans say. The report gives the position and names no one (before, it
  // named worker 1, taking the contributor index for a worker).
  auto ps = ps::PsEngine::Create(OneSlotPsConfig());
  ASSERT_TRUE(ps.ok()) << ps.status();
  Collect out;
  wire::AtpMessage m = SoleWorkersGradient(0);
  m.header.fan_in0 = 2;
  ps->OnGradient(m, kT0, out);
  ASSERT_EQ(ps->counters().completed, 0u);
  std::vector<ps::WaitingReport> reports;
  ps->CollectWaiting(kT0 + TimeDelta::FromSeconds(2), TimeDelta::FromSeconds(1), reports);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].position, 0u);
  EXPECT_TRUE(reports[0].missing.empty());
}

TEST(SkipContributionsTest, ReplayedResultsJoinTheHistoryWherePullsLookForThem) {
  // After a PS restart a worker replays a result the new PS lacks
  // (PsEngine::OnReplay); with declared fan-ins it joins the slot's history
  // like a completed packet, at the same entry Recent reads (the history is
  // kept rounded up to a power of two, 8 entries for 5): before, a replay
  // went to entry generation % 5, where no pull found it, over another
  // generation's packet. One slot, so positions are generations.
  ps::PsConfig config = OneSlotPsConfig();
  auto ps = ps::PsEngine::Create(config);
  ASSERT_TRUE(ps.ok()) << ps.status();
  Collect out;
  for (uint32_t position = 0; position < 5; ++position) {
    wire::AtpMessage m = SoleWorkersGradient(position);
    m.payload[0] = position + 100;
    ps->OnGradient(m, kT0, out);
  }
  wire::AtpMessage replayed;
  replayed.header.job = kJob;
  replayed.header.seq = wire::MakeSeq(0, 5);
  replayed.header.ack = true;
  replayed.header.edge = true;
  replayed.payload[0] = 105;
  ASSERT_TRUE(ps->OnReplay(replayed, out));
  wire::AtpMessage next = SoleWorkersGradient(6);
  next.payload[0] = 106;
  ps->OnGradient(next, kT0, out);
  ASSERT_EQ(ps->counters().completed, 6u);  // 0..4 and 6; 5 replayed
  out.sent.clear();
  wire::ControlMessage pull;
  pull.type = wire::ControlType::kPull;
  const wire::ControlSender sender{.worker_in_rack = 1, .rack = 0, .fan_in0 = 2, .fan_in1 = 1};
  for (uint32_t position : {5u, 0u}) {
    ps->OnPull(wire::MakeWorkerControl(kJob, sender, 0, position, pull), kT0, out);
  }
  ASSERT_EQ(out.sent.size(), 2u);
  EXPECT_EQ(out.sent[0].header.position(), 5u);
  EXPECT_EQ(out.sent[0].payload[0], 105u);
  EXPECT_EQ(out.sent[1].header.position(), 0u);
  EXPECT_EQ(out.sent[1].payload[0], 100u);
  EXPECT_EQ(ps->counters().pulls_ignored, 0u);
}

// KeepAlivesOf: an independent model of the liveness rule
// (lib/protocol/skipped_generations.h): position p's contributors are
// `contributors[p]`; walking each slot's generations, a worker left out of
// kMaxSkippedGenerations consecutive ones sends the next as a keep-alive.
// Returns the keep-alives per worker.
std::vector<uint64_t> KeepAlivesOf(const std::vector<std::set<int>>& contributors, int workers,
                                   uint32_t slots) {
  std::vector<uint64_t> keep_alives(static_cast<size_t>(workers), 0);
  for (uint32_t slot = 0; slot < slots; ++slot) {
    for (int w = 0; w < workers; ++w) {
      uint32_t left_out = 0;
      for (size_t p = slot; p < contributors.size(); p += slots) {
        if (contributors[p].contains(w)) {
          left_out = 0;
        } else if (left_out == protocol::kMaxSkippedGenerations) {
          ++keep_alives[static_cast<size_t>(w)];
          left_out = 0;
        } else {
          ++left_out;
        }
      }
    }
  }
  return keep_alives;
}

// ExpectExact: every worker's output equals the reference of `skip` (the
// whole operation of `fragments` on queue 0).
void ExpectExact(const ContributionJob& job, uint64_t fragments, const SkipOptions& skip) {
  const std::vector<float> expected =
      job.Expected(ReferenceContributors(fragments, job.workers(), skip));
  for (int r = 0; r < job.workers(); ++r) {
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(job.outputs()[r][i], expected[i]) << "worker " << r << " value " << i;
    }
  }
}

TEST(SkipContributionsTest, NonContributorFarBehindCatchesUp) {
  // The stall of the PS-alone benchmark, made deterministic: 2 workers, 4
  // slots, static k = 1, one operation of 80 fragments on queue 0: slice 0
  // (positions 0..39, ten generations of every slot) lacks worker 0, slice 1
  // (40..79) lacks worker 1. Worker 0 is held while worker 1 runs, and
  // either gets the parameter packets meanwhile (it holds them aside) or
  // loses them all (as if it had not started the operation yet: it must pull
  // them). Without a bound, worker 1 completes all of slice 0 alone and the
  // PS keeps only the last generations: pulls are ignored and the operation
  // never completes. With the keep-alives, worker 1 stops at generation 4
  // (positions 16..19), which needs worker 0's zeros, so everything worker 0
  // still needs is held by it or kept by the PS.
  constexpr uint32_t kSlots = 4;
  constexpr uint64_t kFragments = 80;
  for (const bool lose_while_held : {false, true}) {
    SCOPED_TRACE(lose_while_held ? "parameter packets lost while held" : "held aside");
    ContributionJob job({2}, /*ps_accepts_declared=*/true, kSlots);
    const SkipOptions skip =
        Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1});
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < 2; ++r) inputs.push_back(Input(kFragments * 62, r));
    job.Start(std::move(inputs), skip, /*split=*/kFragments);
    job.Hold(0);
    job.Pump(kT0, [&](int rank, const wire::AtpMessage&) { return lose_while_held && rank == 0; });
    EXPECT_EQ(job.ps().counters().completed, 16u);  // generations 0..3 of each slot
    EXPECT_EQ(job.engine(0, 0).stats().early_results, lose_while_held ? 0u : 16u);
    job.Hold(-1);
    job.Pump(kT0);
    job.RunTimersUntilIdle(kT0, /*rounds=*/100);
    EXPECT_EQ(job.Totals().in_flight, 0u);
    EXPECT_EQ(job.Totals().operations_completed, 4u);  // 2 workers x 2 pieces
    EXPECT_EQ(job.ps().counters().completed, kFragments);
    EXPECT_EQ(job.ps().counters().pulls_ignored, 0u);
    // Lost: positions 0..15, from the PS's last 5 generations of each slot.
    EXPECT_EQ(job.ps().counters().pulls_answered, lose_while_held ? 16u : 0u);
    // Keep-alives exactly where the rule puts them: generations 4 and 9 of
    // every slot for worker 0 (slice 0), 14 and 19 for worker 1 (slice 1).
    const std::vector<std::set<int>> contributors = ReferenceContributors(kFragments, 2, skip);
    const std::vector<uint64_t> keep_alives = KeepAlivesOf(contributors, 2, kSlots);
    EXPECT_EQ(keep_alives, (std::vector<uint64_t>{8, 8}));
    EXPECT_EQ(job.engine(0, 0).stats().keep_alives_sent, keep_alives[0]);
    EXPECT_EQ(job.engine(1, 0).stats().keep_alives_sent, keep_alives[1]);
    EXPECT_EQ(job.engine(0, 0).stats().fragments_sent, 40u);  // its real contributions
    ExpectExact(job, kFragments, skip);  // the zeros changed no sum
  }
}

TEST(SkipContributionsTest, WorkerBehindTheJobPullsAtOnceWhereThePsReportsTheJobWaits) {
  // The PS-alone benchmark's remaining stall (bench/RESULTS.md, session 18),
  // made deterministic: 2 workers, 16 slots, static k = 1, 160 fragments:
  // slice 0 (positions 0..79) lacks worker 0. Worker 0 is held and loses
  // every parameter packet meanwhile (its receive ring overflowed while its
  // thread did not run); worker 1 completes generations 0..3 of every slot
  // (positions 0..63) alone and waits at 64..79 for worker 0's keep-alives.
  // Worker 0 has seen no result, so nothing tells it that 0..63 are done: it
  // reaches them a window at a time and pulls each window only when its
  // retransmission timer fires, while the job stands still and the PS
  // releases worker 1's partial sums at 65..79 as orphans (worker 1 resends
  // only its lowest position after a timeout). In the benchmark, with 1,024
  // slots and thousands of positions to catch up, that crawl outlasted the
  // stall timeout. With the PS's report of where the job waits (position
  // 64), worker 0 pulls everything below it at once: no timeout, no orphan.
  constexpr uint32_t kSlots = 16;
  constexpr uint64_t kFragments = 160;
  // Shorter than the crawl, longer than worker 1's resend interval.
  const TimeDelta orphan_timeout = TimeDelta::FromMilliseconds(30);
  for (const bool reported : {false, true}) {
    SCOPED_TRACE(reported ? "the PS reports where the job waits" : "no report");
    ContributionJob job({2}, /*ps_accepts_declared=*/true, kSlots, orphan_timeout);
    const SkipOptions skip =
        Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1});
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < 2; ++r) inputs.push_back(Input(kFragments * 62, r));
    job.Start(std::move(inputs), skip, /*split=*/kFragments);
    job.Hold(0);
    job.Pump(kT0, [](int rank, const wire::AtpMessage&) { return rank == 0; });
    ASSERT_EQ(job.ps().counters().completed, 64u);  // generations 0..3: worker 1 alone
    job.Hold(-1);
    job.Pump(kT0);  // worker 0 reaches its first window of positions; nothing to pull yet
    EXPECT_EQ(job.engine(0, 0).stats().pulls_sent, 0u);
    if (reported) {
      job.ReportWaiting(kT0, TimeDelta::Zero());
      job.Pump(kT0);
      // Caught up and done without any timer.
      EXPECT_EQ(job.Totals().in_flight, 0u);
    }
    job.RunTimersUntilIdle(kT0, /*rounds=*/1000);
    EXPECT_EQ(job.Totals().in_flight, 0u);
    EXPECT_EQ(job.ps().counters().completed, kFragments);
    EXPECT_EQ(job.ps().counters().pulls_answered, 64u);  // positions 0..63, each once
    EXPECT_EQ(job.ps().counters().pulls_ignored, 0u);
    if (reported) {
      EXPECT_EQ(job.Totals().timeouts, 0u);
      EXPECT_EQ(job.ps().counters().orphans_released, 0u);
    } else {
      // The crawl: worker 0 times out again and again, worker 1 waits.
      EXPECT_GE(job.engine(0, 0).stats().timeouts, 4u);
      EXPECT_GT(job.ps().counters().orphans_released, 0u);
    }
    ExpectExact(job, kFragments, skip);
  }
}

TEST(SkipContributionsTest, PositionTheOthersPullIsReportedWhereNothingIsLive) {
  // The same catch-up where the job waits at a position only the behind
  // worker contributes to: 2 workers, 16 slots, static k = 1, 96 fragments:
  // positions 0..47 (three generations: no keep-alive) are worker 1's
  // alone, 48..95 worker 0's alone. Worker 0 is held and loses every
  // parameter packet; worker 1 completes 0..47 and waits at 48..63, which
  // it sits out: nothing is live at the PS, and its timer only pulls 48.
  // That pull marks 48 as waited for, so the PS reports it and worker 0,
  // once back, catches up at once (no report before: it crawled).
  constexpr uint32_t kSlots = 16;
  constexpr uint64_t kFragments = 96;
  ContributionJob job({2}, /*ps_accepts_declared=*/true, kSlots);
  const SkipOptions skip = Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1});
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < 2; ++r) inputs.push_back(Input(kFragments * 62, r));
  job.Start(std::move(inputs), skip, /*split=*/kFragments);
  job.Hold(0);
  job.Pump(kT0, [](int rank, const wire::AtpMessage&) { return rank == 0; });
  ASSERT_EQ(job.ps().counters().completed, 48u);
  EXPECT_EQ(job.ps().live_slots(), 0u);
  std::vector<ps::WaitingReport> reports;
  job.ps().CollectWaiting(kT0, TimeDelta::Zero(), reports);
  EXPECT_TRUE(reports.empty());
  // Worker 1's retransmission timer: it pulls its lowest position, 48.
  const TimePoint later = job.engine(1, 0).NextDeadline();
  ASSERT_FALSE(later.IsInfinite());
  job.Pump(later);
  EXPECT_EQ(job.engine(1, 0).stats().pulls_sent, 1u);
  job.ps().CollectWaiting(later, TimeDelta::Zero(), reports);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].queue, 0u);
  EXPECT_EQ(reports[0].position, 48u);
  job.Hold(-1);
  job.Pump(later);  // worker 0 reaches its first window; nothing to pull yet
  job.ReportWaiting(later, TimeDelta::Zero());
  job.Pump(later);
  EXPECT_EQ(job.Totals().in_flight, 0u);
  EXPECT_EQ(job.engine(0, 0).stats().timeouts, 0u);
  EXPECT_EQ(job.ps().counters().completed, kFragments);
  EXPECT_EQ(job.ps().counters().pulls_answered, 48u);  // worker 0's 0..47
  reports.clear();
  job.ps().CollectWaiting(later, TimeDelta::Zero(), reports);
  EXPECT_TRUE(reports.empty()) << "48 completed: no longer waited for";
  ExpectExact(job, kFragments, skip);
}

TEST(SkipContributionsTest, KeepAlivesFollowTheSlotsAcrossOperations) {
  // Runs of left-out generations continue across operations (a worker may
  // sit out the end of one and the start of the next): random mode, 4
  // workers, k = 3 (each worker in one slice of four), 8 slots, many small
  // operations on one queue. Every worker's keep-alives equal the model's,
  // over the positions of all operations, and every result is exact.
  constexpr uint32_t kSlots = 8;
  ContributionJob job({4}, /*ps_accepts_declared=*/true, kSlots);
  std::vector<std::set<int>> positions;  // every position's plan contributors, in order
  for (uint64_t iteration = 0; iteration < 12; ++iteration) {
    const uint64_t fragments = 13 + iteration % 5;
    const SkipOptions skip = Contributions({.mode = SkipMode::kRandom,
                                            .reduce_scatter_steps = 3,
                                            .seed = 5,
                                            .iteration = iteration});
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < 4; ++r) inputs.push_back(Input(fragments * 62, r));
    job.Start(std::move(inputs), skip, /*split=*/fragments);
    job.Pump(kT0);
    ASSERT_EQ(job.Totals().in_flight, 0u) << "iteration " << iteration;
    ExpectExact(job, fragments, skip);
    for (const std::set<int>& in : ReferenceContributors(fragments, 4, skip)) {
      positions.push_back(in);
    }
  }
  const std::vector<uint64_t> keep_alives = KeepAlivesOf(positions, 4, kSlots);
  uint64_t total = 0;
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(job.engine(r, 0).stats().keep_alives_sent, keep_alives[static_cast<size_t>(r)])
        << "worker " << r;
    total += keep_alives[static_cast<size_t>(r)];
  }
  EXPECT_GT(total, 0u);
  EXPECT_EQ(job.ps().counters().shape_mismatch, 0u);
}

TEST(SkipContributionsTest, ContributorsLostResultIsResentAfterTheJobMovedOn) {
  // 2 workers, 4 slots, static k = 1, 8 fragments: worker 1 contributes to
  // positions 0..3 and not to 4..7 (the same slots' next generation). Its
  // parameter packets for 0..3 are lost; worker 0 goes on and the PS
  // completes 4..7 without worker 1. Worker 1's resends of 0..3 are a
  // generation behind the slots (stale): the PS answers them from the
  // job's history, and worker 1 pulls 4..7.
  constexpr uint32_t kSlots = 4;
  ContributionJob job({2}, /*ps_accepts_declared=*/true, kSlots);
  const SkipOptions skip = Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1});
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < 2; ++r) inputs.push_back(Input(8 * 62, r));
  job.Start(std::move(inputs), skip, /*split=*/8);
  std::set<uint32_t> dropped;
  job.Pump(kT0, [&](int rank, const wire::AtpMessage& m) {
    if (rank != 1 || m.header.queue() != 0 || m.header.position() > 3) return false;
    return dropped.insert(m.header.position()).second;
  });
  ASSERT_EQ(dropped.size(), 4u);
  EXPECT_EQ(job.ps().counters().completed, 8u);
  job.RunTimersUntilIdle(kT0, /*rounds=*/20);
  EXPECT_EQ(job.Totals().in_flight, 0u);
  EXPECT_GE(job.ps().counters().param_resent, 4u);
  EXPECT_EQ(job.ps().counters().stale, 0u);
  EXPECT_EQ(job.ps().counters().pulls_ignored, 0u);
  ExpectExact(job, 8, skip);
}

TEST(SkipContributionsTest, PullsAreAnsweredAcrossThePositionWrap) {
  // Positions are 20 bits: with one slot, generation = position, and the
  // generations before the wrap stay answerable after positions 0 and 1 of
  // the next lap completed (the PS keeps a power of two, 8 for a history of
  // 5, so generation 2^20 - 1 and generation 0 do not share an entry).
  ps::PsConfig config = OneSlotPsConfig();
  auto ps = ps::PsEngine::Create(config);
  ASSERT_TRUE(ps.ok()) << ps.status();
  ASSERT_EQ(ps->RebuildQueue(kJob, 0, wire::kPositionMask - 3, ps::RebuildMode::kNewRun), 1u);
  Collect out;
  std::vector<uint32_t> completed;
  for (uint32_t lap_position = wire::kPositionMask - 3; completed.size() < 6; ++lap_position) {
    const uint32_t position = lap_position & wire::kPositionMask;
    ps->OnGradient(SoleWorkersGradient(position), kT0, out);
    completed.push_back(position);
  }
  ASSERT_EQ(ps->counters().completed, 6u);  // 2^20 - 4 .. 2^20 - 1, 0, 1
  out.sent.clear();
  wire::ControlMessage pull;
  pull.type = wire::ControlType::kPull;
  const wire::ControlSender sender{.worker_in_rack = 1, .rack = 0, .fan_in0 = 2, .fan_in1 = 1};
  for (uint32_t position : completed) {
    ps->OnPull(wire::MakeWorkerControl(kJob, sender, 0, position, pull), kT0, out);
  }
  // All six: a history of 5 (generation % 5) would have lost 2^20 - 1 to 0.
  ASSERT_EQ(out.sent.size(), 6u);
  for (size_t i = 0; i < completed.size(); ++i) {
    EXPECT_EQ(out.sent[i].header.position(), completed[i]);
  }
  EXPECT_EQ(ps->counters().pulls_ignored, 0u);
}

TEST(SkipContributionsTest, PsWithoutDeclaredFanInsRefusesThePackets) {
  ContributionJob job({3}, /*ps_accepts_declared=*/false);
  const SkipOptions skip = Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 1});
  job.Run(6 * 62, skip, 6);
  EXPECT_EQ(job.ps().counters().completed, 0u);
  EXPECT_EQ(job.ps().counters().shape_mismatch, 12u);  // 6 fragments x 2 contributors
  EXPECT_EQ(job.Totals().in_flight, 6u * 3);
}

TEST(SkipContributionsTest, RolesDeclareTheContributorSet) {
  // 2 racks of 2, static k = 2: slice 0 lacks workers 0, 1 (all of rack 0).
  auto plan = SkipPlan::Create(
      Contributions({.mode = SkipMode::kStatic, .reduce_scatter_steps = 2}), 4);
  ASSERT_TRUE(plan.ok());
  const protocol::JobShape shape{.job = kJob, .workers_per_rack = {2, 2}};
  const FragmentSkip skip{.plan = *plan, .op_fragments = 4, .first_fragment = 0};
  EXPECT_FALSE(skip.Dropped(0));
  const std::vector<SliceRole> w0 = skip.Roles(shape, 0, 0);
  const std::vector<SliceRole> w3 = skip.Roles(shape, 1, 1);
  EXPECT_FALSE(w0[0].contributes);
  // Slice 0: only rack 1 contributes: it is rack 0 of 1 in the header.
  EXPECT_TRUE(w3[0].contributes);
  EXPECT_EQ(w3[0].fan_in1, 1);
  EXPECT_EQ(w3[0].bitmap1, 1u);
  EXPECT_EQ(w3[0].fan_in0, 2);
  EXPECT_EQ(w3[0].bitmap0, 2u);
  // Slice 1 lacks workers 1 and 2: worker 3 is the only one of rack 1.
  EXPECT_EQ(w3[1].fan_in1, 2);
  EXPECT_EQ(w3[1].bitmap1, 2u);
  EXPECT_EQ(w3[1].fan_in0, 1);
  EXPECT_EQ(w3[1].bitmap0, 1u);
}

}  // namespace
}  // namespace atp::worker
