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
#include <vector>

#include "atp/quantize.h"
#include "atp/skip_reduce.h"
#include "gtest/gtest.h"
#include "lib/protocol/job_shape.h"
#include "lib/protocol/message_sink.h"
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
  ContributionJob(std::vector<int> workers_per_rack, bool ps_accepts_declared = true)
      : shape_{.job = kJob,
               .workers_per_rack = std::vector<uint8_t>(workers_per_rack.begin(),
                                                        workers_per_rack.end())} {
    for (int rack = 0; rack < shape_.racks(); ++rack) {
      for (int w = 0; w < shape_.workers_in_rack(rack); ++w) {
        std::vector<std::unique_ptr<WorkerQueueEngine>> queues;
        for (uint32_t q = 0; q < kQueues; ++q) {
          WorkerQueueConfig config = testing::SmallConfig(/*slots=*/64, /*initial_window=*/16);
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
    config.slots = 64;
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
              ps_->OnPull(burst[i], sink_);
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
  // The PS completed every fragment once, from exactly the contributions.
  const ps::PsCounters& ps = job.ps().counters();
  EXPECT_EQ(ps.completed - ps_before.completed, fragments);
  EXPECT_EQ(ps.contributions - ps_before.contributions, contributions);
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
                      out);
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

TEST(SkipContributionsTest, PullsAreAnsweredFromTheSlotsRecentGenerations) {
  // One slot, so positions 0, 1, 2, ... are its successive generations; only
  // worker 0 of 2 contributes (declared fanIn0 = 1). A non-contributor that
  // fell behind gets the last contribution_history generations back.
  ps::PsConfig config;
  config.jobs.push_back(protocol::JobShape::Uniform(kJob, 1, 2));
  config.slots = 1;
  config.contribution_skipping_jobs = {kJob};
  config.contribution_history = 4;
  auto ps = ps::PsEngine::Create(config);
  ASSERT_TRUE(ps.ok()) << ps.status();
  Collect out;
  for (uint32_t position = 0; position < 6; ++position) {
    wire::AtpMessage m;
    m.header.job = kJob;
    m.header.seq = wire::MakeSeq(0, position);
    m.header.fan_in0 = 1;
    m.header.fan_in1 = 1;
    m.header.bitmap0 = 1;
    m.header.bitmap1 = 1;
    m.payload[0] = position + 100;
    ps->OnGradient(m, kT0, out);
  }
  ASSERT_EQ(ps->counters().completed, 6u);
  out.sent.clear();
  wire::ControlMessage pull;
  pull.type = wire::ControlType::kPull;
  const wire::ControlSender sender{.worker_in_rack = 1, .rack = 0, .fan_in0 = 2, .fan_in1 = 1};
  for (uint32_t position : {5u, 2u, 1u, 0u}) {
    ps->OnPull(wire::MakeWorkerControl(kJob, sender, 0, position, pull), out);
  }
  ASSERT_EQ(out.sent.size(), 2u);  // 5 (the last) and 2 (3 generations back)
  EXPECT_EQ(out.sent[0].header.position(), 5u);
  EXPECT_EQ(out.sent[0].payload[0], 105u);
  EXPECT_EQ(out.sent[1].header.position(), 2u);
  EXPECT_EQ(out.sent[1].payload[0], 102u);
  EXPECT_EQ(ps->counters().pulls_answered, 2u);
  EXPECT_EQ(ps->counters().pulls_ignored, 2u);
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
