// SkipReduce on ATP, whole fragments (lib/worker/fragment_skip.h): whole jobs
// of real WorkerQueueEngines and a real PsEngine, the test passing messages
// between them by hand (no switch, no loss, a fixed clock). For every mode on
// 2..8 workers and a 2-rack job: exactly the fragments an independently
// computed reference drops are zero, every other fragment holds the exact sum
// of every worker, all workers agree, random mode's set moves with the
// iteration, and the PS never sees a dropped fragment and never waits for one
// (no timeout, no resend, every fragment it sees completes).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
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
#include "lib/worker/fragment_skip.h"
#include "lib/worker/worker_queue_engine.h"
#include "tests/common/skip_reference.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using atp::testing::ReferenceDroppedFragments;
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

// Collect: the PS's parameter packets, to be handed to every worker.
class Collect : public protocol::MessageSink {
 public:
  void Send(const wire::AtpMessage& message) override { sent.push_back(message); }
  std::deque<wire::AtpMessage> sent;
};

class SkipFragmentsJob {
 public:
  SkipFragmentsJob(int racks, int workers_per_rack)
      : shape_(protocol::JobShape::Uniform(kJob, racks, workers_per_rack)) {
    for (int rack = 0; rack < racks; ++rack) {
      for (int w = 0; w < workers_per_rack; ++w) {
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
    auto ps = ps::PsEngine::Create(config);
    EXPECT_TRUE(ps.ok()) << ps.status();
    ps_ = std::make_unique<ps::PsEngine>(*std::move(ps));
  }

  int workers() const { return static_cast<int>(engines_.size()); }

  // Run: one operation of `values` on every worker with `skip`, cut into two
  // pieces (one per queue, the second starting at fragment `split`) as the
  // scheduler would. Returns each worker's output.
  std::vector<std::vector<float>> Run(size_t values, const SkipOptions& skip, uint64_t split) {
    const uint64_t fragments = (values + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
    auto plan = SkipPlan::Create(skip, workers());
    EXPECT_TRUE(plan.ok()) << plan.status();
    split = std::min(split, fragments);
    const size_t split_value = std::min<size_t>(values, split * wire::kValuesPerFragment);
    inputs_.clear();
    std::vector<std::vector<float>> outputs(workers(), std::vector<float>(values, -1.0f));
    for (int r = 0; r < workers(); ++r) inputs_.push_back(Input(values, r));
    for (int r = 0; r < workers(); ++r) {
      const std::span<const float> in(inputs_[r]);
      const std::span<float> out(outputs[r]);
      FragmentSkip first{.plan = *plan, .op_fragments = fragments, .first_fragment = 0};
      FragmentSkip second{.plan = *plan, .op_fragments = fragments, .first_fragment = split};
      EXPECT_TRUE(engines_[r][0]->Enqueue(in.first(split_value), out.first(split_value), first).ok());
      EXPECT_TRUE(engines_[r][1]->Enqueue(in.subspan(split_value), out.subspan(split_value), second)
                      .ok());
    }
    Pump();
    return outputs;
  }

  // Expected: the exact result with fragments `dropped` zero.
  std::vector<float> Expected(size_t values, const std::set<uint64_t>& dropped) const {
    std::vector<int32_t> sum(values, 0);
    std::vector<int32_t> q(values);
    for (const std::vector<float>& in : inputs_) {
      Quantize(in, kScale, q);
      for (size_t i = 0; i < values; ++i) sum[i] += q[i];
    }
    for (uint64_t f : dropped) {
      for (size_t i = f * wire::kValuesPerFragment;
           i < std::min<size_t>(values, (f + 1) * wire::kValuesPerFragment); ++i) {
        sum[i] = 0;
      }
    }
    std::vector<float> out(values);
    Dequantize(sum, kScale, out);
    return out;
  }

  WorkerQueueStats Totals() const {
    WorkerQueueStats t;
    for (const auto& queues : engines_) {
      for (const auto& e : queues) {
        const WorkerQueueStats s = e->stats();
        t.fragments_sent += s.fragments_sent;
        t.fragments_skipped += s.fragments_skipped;
        t.resends_loss += s.resends_loss;
        t.resends_timeout += s.resends_timeout;
        t.timeouts += s.timeouts;
        t.operations_completed += s.operations_completed;
        t.in_flight += s.in_flight;
      }
    }
    return t;
  }
  const ps::PsCounters& ps_counters() const { return ps_->counters(); }

 private:
  // Pump: every worker's sends to the PS, the PS's packets to every worker,
  // until nobody has anything to send (the clock never moves: no timer fires).
  void Pump() {
    std::vector<wire::AtpMessage> burst(256);
    for (bool moved = true; moved;) {
      moved = false;
      for (auto& queues : engines_) {
        for (auto& engine : queues) {
          const size_t n = engine->CollectSends(kT0, burst);
          for (size_t i = 0; i < n; ++i) ps_->OnGradient(burst[i], kT0, sink_);
          moved |= n > 0;
        }
      }
      while (!sink_.sent.empty()) {
        for (auto& queues : engines_) {
          for (auto& engine : queues) engine->OnParameterPacket(sink_.sent.front(), kT0);
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

  protocol::JobShape shape_;
  std::vector<std::vector<std::unique_ptr<WorkerQueueEngine>>> engines_;  // [rank][queue]
  std::unique_ptr<ps::PsEngine> ps_;
  Collect sink_;
  std::vector<std::vector<float>> inputs_;
};

// Check: runs one operation and compares it with the reference.
void Check(SkipFragmentsJob& job, size_t values, const SkipOptions& skip, uint64_t split,
           std::set<uint64_t>* dropped_out = nullptr) {
  const uint64_t fragments = (values + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
  const WorkerQueueStats before = job.Totals();
  const uint64_t ps_completed_before = job.ps_counters().completed;
  const std::vector<std::vector<float>> outputs = job.Run(values, skip, split);
  const std::set<uint64_t> dropped = ReferenceDroppedFragments(fragments, job.workers(), skip);
  const std::vector<float> expected = job.Expected(values, dropped);
  for (int r = 0; r < job.workers(); ++r) {
    for (size_t i = 0; i < values; ++i) {
      ASSERT_EQ(outputs[r][i], expected[i])
          << "worker " << r << " value " << i << " (fragment " << i / wire::kValuesPerFragment
          << (dropped.contains(i / wire::kValuesPerFragment) ? ", dropped" : ", kept") << ")";
    }
  }
  const WorkerQueueStats after = job.Totals();
  const uint64_t n = static_cast<uint64_t>(job.workers());
  // Nothing was sent for a dropped fragment; every kept one went once.
  EXPECT_EQ(after.fragments_skipped - before.fragments_skipped, dropped.size() * n);
  EXPECT_EQ(after.fragments_sent - before.fragments_sent, (fragments - dropped.size()) * n);
  // Nobody waited: no timeout, no resend, everything acknowledged.
  EXPECT_EQ(after.timeouts, 0u);
  EXPECT_EQ(after.resends_loss + after.resends_timeout, 0u);
  EXPECT_EQ(after.in_flight, 0u);
  EXPECT_EQ(after.operations_completed - before.operations_completed, 2 * n);
  // The PS completed exactly the kept fragments.
  EXPECT_EQ(job.ps_counters().completed - ps_completed_before, fragments - dropped.size());
  EXPECT_EQ(job.ps_counters().stale + job.ps_counters().ahead + job.ps_counters().duplicates, 0u);
  if (dropped_out != nullptr) *dropped_out = dropped;
}

TEST(SkipFragmentsTest, StaticDropsTheSameSlicesOnTwoToEightWorkers) {
  for (int n = 2; n <= 8; ++n) {
    SkipFragmentsJob job(/*racks=*/1, n);
    for (int k = 0; k < n; ++k) {
      SCOPED_TRACE(::testing::Message() << n << " workers, k = " << k);
      SkipOptions skip{.mode = k == 0 ? SkipMode::kNone : SkipMode::kStatic,
                       .reduce_scatter_steps = k};
      // 37 fragments (not a multiple of n), split unevenly over two queues.
      Check(job, 37 * 62 - 5, skip, /*split=*/11);
    }
  }
}

TEST(SkipFragmentsTest, RandomDropsTheAgreedShiftAndMovesWithTheIteration) {
  for (int n = 2; n <= 8; ++n) {
    SkipFragmentsJob job(/*racks=*/1, n);
    std::set<std::set<uint64_t>> seen;
    for (uint64_t iteration = 0; iteration < 12; ++iteration) {
      SCOPED_TRACE(::testing::Message() << n << " workers, iteration " << iteration);
      SkipOptions skip{.mode = SkipMode::kRandom,
                       .reduce_scatter_steps = std::max(1, n / 2),
                       .seed = 42,
                       .iteration = iteration,
                       .tensor = 3};
      std::set<uint64_t> dropped;
      Check(job, 29 * 62, skip, /*split=*/15, &dropped);
      seen.insert(dropped);
    }
    // 12 iterations over n shifts: more than one distinct set.
    EXPECT_GT(seen.size(), 1u) << n << " workers";
  }
}

TEST(SkipFragmentsTest, TwoRackJobDropsWholeFragmentsAcrossBothRacks) {
  SkipFragmentsJob job(/*racks=*/2, /*workers_per_rack=*/3);
  for (int k = 1; k < 6; ++k) {
    SCOPED_TRACE(::testing::Message() << "k = " << k);
    Check(job, 50 * 62 + 1, {.mode = SkipMode::kStatic, .reduce_scatter_steps = k}, 20);
    Check(job, 50 * 62 + 1,
          {.mode = SkipMode::kRandom, .reduce_scatter_steps = k, .seed = 9, .iteration = 5},
          20);
  }
}

TEST(SkipFragmentsTest, SelectivePolicyProtectsItsTensors) {
  const int n = 4;
  SkipFragmentsJob job(/*racks=*/1, n);
  SkipPolicy policy{.mode = SkipMode::kRandom, .rate = 0.5, .seed = 7, .warmup_iterations = 1};
  policy.protected_tensors = {0};
  for (uint64_t tensor = 0; tensor < 3; ++tensor) {
    for (uint64_t iteration = 0; iteration < 3; ++iteration) {
      const SkipOptions skip = policy.ForTensor(tensor, iteration, n);
      const bool skips = tensor != 0 && iteration >= 1;
      EXPECT_EQ(skip.reduce_scatter_steps, skips ? 2 : 0);
      std::set<uint64_t> dropped;
      Check(job, 16 * 62, skip, 8, &dropped);
      EXPECT_EQ(dropped.size(), skips ? 8u : 0u) << "tensor " << tensor;
    }
  }
}

TEST(SkipFragmentsTest, FewerFragmentsThanWorkersAndAllDroppedComplete) {
  SkipFragmentsJob job(/*racks=*/1, /*workers_per_rack=*/8);
  // 3 fragments over 8 slices: slices 3..7 are empty.
  for (int k = 1; k < 8; ++k) {
    Check(job, 3 * 62, {.mode = SkipMode::kStatic, .reduce_scatter_steps = k}, 1);
  }
  SkipFragmentsJob pair(/*racks=*/1, /*workers_per_rack=*/2);
  // 1 fragment, k = 1: dropped whole; both pieces (one empty) complete at once.
  Check(pair, 10, {.mode = SkipMode::kStatic, .reduce_scatter_steps = 1}, 1);
}

TEST(SkipFragmentsTest, SliceOfInvertsSliceRange) {
  for (size_t count : {0u, 1u, 5u, 7u, 8u, 9u, 63u, 64u, 1000u}) {
    for (int slices = 1; slices <= 9; ++slices) {
      for (int s = 0; s < slices; ++s) {
        const ElementRange range = SliceRange(count, slices, s);
        for (size_t i = range.begin; i < range.begin + range.size; ++i) {
          ASSERT_EQ(SliceOf(count, slices, i), s) << count << " " << slices << " " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace atp::worker
