// WorkerQueueEngine beyond the single-rule scripts: tensors far larger than a
// window, many outstanding operations, the 20-bit position wrap-around, and a
// small lossy, reordering network with several workers and a scripted PS.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <queue>
#include <random>
#include <set>
#include <vector>

#include "atp/quantize.h"
#include "gtest/gtest.h"
#include "lib/worker/worker_queue_engine.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using namespace atp::worker::testing;  // NOLINT(build/namespaces): test helpers

std::vector<float> RandomValues(size_t n, std::mt19937& rng, float range = 1.0f) {
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(WorkerQueueEngineScaleTest, LargeTensorFarBeyondOneWindow) {
  WorkerQueueConfig config = SmallConfig(/*slots=*/256, /*initial_window=*/200);
  auto engine = MakeEngine(config);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(1);
  std::vector<float> input = RandomValues(1'000'000, rng);
  std::vector<float> output(input.size(), -1.0f);
  auto op = engine->Enqueue(input, output);
  ASSERT_TRUE(op.ok());

  TimePoint now = kT0;
  std::vector<wire::AtpMessage> burst(32);
  uint64_t max_in_flight = 0;
  while (engine->stats().operations_completed == 0) {
    now += Us(1);
    size_t n = engine->CollectSends(now, burst);
    ASSERT_GT(n, 0u);
    max_in_flight = std::max(max_in_flight, engine->stats().in_flight);
    for (size_t i = 0; i < n; ++i) engine->OnParameterPacket(EchoAck(burst[i]), now);
  }
  EXPECT_EQ(output, RoundTrip(input));
  const uint64_t fragments = (input.size() + 61) / 62;
  EXPECT_EQ(engine->stats().fragments_sent, fragments);
  EXPECT_EQ(engine->stats().resends_loss + engine->stats().resends_timeout, 0u);
  EXPECT_LE(max_in_flight, 256u);
  EXPECT_EQ(Completions(*engine), (std::vector<OperationId>{*op}));
}

TEST(WorkerQueueEngineScaleTest, ManyOutstandingOperationsCompleteOnceEach) {
  WorkerQueueConfig config = SmallConfig(/*slots=*/128, /*initial_window=*/64);
  auto engine = MakeEngine(config);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(2);
  constexpr int kOps = 1000;
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> outputs;
  inputs.reserve(kOps);
  outputs.reserve(kOps);
  for (int i = 0; i < kOps; ++i) {
    inputs.push_back(RandomValues(rng() % 400, rng));  // some empty, most 1..7 fragments
    outputs.emplace_back(inputs.back().size(), -1.0f);
    auto id = engine->Enqueue(inputs.back(), outputs.back());
    ASSERT_TRUE(id.ok());
    ASSERT_EQ(*id, static_cast<OperationId>(i + 1));
  }

  // Parameter packets come back in a shuffled order, a random part at a time.
  TimePoint now = kT0;
  std::vector<wire::AtpMessage> pending;
  std::vector<wire::AtpMessage> burst(64);
  std::set<OperationId> completed;
  std::vector<OperationId> done(100);
  for (int round = 0; round < 100000 && completed.size() < kOps; ++round) {
    now += Us(1);
    size_t n = engine->CollectSends(now, burst);
    pending.insert(pending.end(), burst.begin(), burst.begin() + static_cast<ptrdiff_t>(n));
    std::shuffle(pending.begin(), pending.end(), rng);
    size_t deliver = pending.empty() ? 0 : 1 + rng() % pending.size();
    for (size_t i = 0; i < deliver; ++i) engine->OnParameterPacket(EchoAck(pending[i]), now);
    pending.erase(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(deliver));
    size_t k;
    while ((k = engine->CollectCompletions(done)) > 0) {
      for (size_t i = 0; i < k; ++i) {
        EXPECT_TRUE(completed.insert(done[i]).second) << "operation " << done[i] << " twice";
      }
    }
  }
  ASSERT_EQ(completed.size(), static_cast<size_t>(kOps));
  EXPECT_EQ(*completed.begin(), 1u);
  EXPECT_EQ(*completed.rbegin(), static_cast<OperationId>(kOps));
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(outputs[i], RoundTrip(inputs[i])) << "operation " << i;
}

TEST(WorkerQueueEngineScaleTest, Rule_PositionsWrapAt20Bits) {
  // 129 operations of 8192 fragments: 1,056,768 positions, past 2^20.
  WorkerQueueConfig config = SmallConfig(/*slots=*/1024, /*initial_window=*/1024);
  config.congestion_control = WorkerQueueConfig::CongestionControl::kFixedWindow;
  auto engine = MakeEngine(config);
  ASSERT_NE(engine, nullptr);
  std::mt19937 rng(3);
  constexpr size_t kFragmentsPerOp = 8192;
  std::vector<float> input = RandomValues(kFragmentsPerOp * 62, rng);
  const std::vector<float> expected = RoundTrip(input);
  std::vector<float> output(input.size());

  TimePoint now = kT0;
  std::vector<wire::AtpMessage> burst(1024);
  uint64_t wrapped_seen = 0;
  wire::AtpMessage last_before_wrap;
  for (int op = 0; op < 129; ++op) {
    std::fill(output.begin(), output.end(), -1.0f);
    ASSERT_TRUE(engine->Enqueue(input, output).ok());
    while (engine->stats().operations_completed == static_cast<uint64_t>(op)) {
      now += Us(1);
      size_t n = engine->CollectSends(now, burst);
      ASSERT_GT(n, 0u);
      // Acks reversed in groups of three (2, 1, 0, 5, 4, 3, ...): reordered,
      // never three beyond a missing one.
      for (size_t g = 0; g < n; g += 3) {
        size_t end = std::min(n, g + 3);
        for (size_t i = end; i-- > g;) {
          const wire::AtpMessage& m = burst[i];
          if (m.header.position() == wire::kPositionMask) last_before_wrap = m;
          engine->OnParameterPacket(EchoAck(m), now);
        }
      }
      const uint64_t base = engine->stats().next_position - n;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(burst[i].header.position(), (base + i) & wire::kPositionMask);
        if (base + i >= (uint64_t{1} << 20)) ++wrapped_seen;
      }
    }
    ASSERT_EQ(output, expected) << "operation " << op;
    if (op == 127) {
      // A stale duplicate from just before the wrap, delivered after it.
      uint64_t ignored = engine->stats().ignored_unknown_seq;
      engine->OnParameterPacket(EchoAck(last_before_wrap), now);
      EXPECT_EQ(engine->stats().ignored_unknown_seq, ignored + 1);
    }
  }
  EXPECT_EQ(engine->stats().next_position, 129u * kFragmentsPerOp);
  EXPECT_EQ(wrapped_seen, 129u * kFragmentsPerOp - (uint64_t{1} << 20));
  EXPECT_EQ(engine->stats().resends_loss + engine->stats().resends_timeout, 0u);
}

// A tiny network: 2 racks x 2 workers on one queue, a scripted PS that sums
// integer contributions per seq (no switches: every contribution reaches it),
// random delays (so reordering), and random loss of gradients and of each
// worker's copy of a parameter packet. Invariants 1-3 of ATP-SPEC section 8
// from the worker's side: every operation completes, and every worker gets the
// exact sum.
class LossyNetwork {
 public:
  static constexpr int kRacks = 2;
  static constexpr int kWorkersPerRack = 2;
  static constexpr int kWorkers = kRacks * kWorkersPerRack;

  LossyNetwork(uint32_t seed, int loss_percent) : rng_(seed), loss_percent_(loss_percent) {
    for (int w = 0; w < kWorkers; ++w) {
      WorkerQueueConfig config = SmallConfig(/*slots=*/64, /*initial_window=*/32);
      config.shape = protocol::JobShape::Uniform(kJob, kRacks, kWorkersPerRack);
      config.rack = w / kWorkersPerRack;
      config.worker_in_rack = w % kWorkersPerRack;
      config.rto_floor = Us(200);
      config.initial_rto = Ms(1);
      engines_.push_back(MakeEngine(config));
    }
  }

  WorkerQueueEngine& engine(int w) { return *engines_[static_cast<size_t>(w)]; }

  // Run: until every engine has completed `ops` operations, or the simulated
  // time passes `limit`. Returns whether all completed.
  bool Run(uint64_t ops, TimeDelta limit) {
    const TimePoint end = now_ + limit;
    std::vector<wire::AtpMessage> burst(16);
    while (now_ < end) {
      while (!events_.empty() && events_.top().at <= now_) {
        Event e = events_.top();
        events_.pop();
        if (e.to < 0) {
          OnGradient(e.message);
        } else {
          engine(e.to).OnParameterPacket(e.message, now_);
        }
      }
      bool all_done = true;
      TimePoint next = TimePoint::Infinite();
      for (int w = 0; w < kWorkers; ++w) {
        size_t n;
        while ((n = engine(w).CollectSends(now_, burst)) > 0) {
          for (size_t i = 0; i < n; ++i) Schedule(-1, burst[i]);
        }
        all_done = all_done && engine(w).stats().operations_completed == ops;
        next = Earliest(next, engine(w).NextDeadline());
      }
      if (all_done) return true;
      if (!events_.empty()) next = Earliest(next, events_.top().at);
      if (next.IsInfinite()) return false;  // nothing left to happen: stuck
      now_ = std::max(next, now_ + TimeDelta::FromNanoseconds(1));
    }
    return false;
  }

  TimeDelta elapsed() const { return now_ - kT0; }
  uint64_t gradients_lost() const { return gradients_lost_; }
  uint64_t acks_lost() const { return acks_lost_; }

 private:
  struct Event {
    TimePoint at;
    uint64_t order;
    int to;  // -1: the PS; else a worker
    wire::AtpMessage message;
    bool operator>(const Event& o) const {
      return at != o.at ? at > o.at : order > o.order;
    }
  };
  struct SeqState {
    uint32_t contributors = 0;  // bit r * kWorkersPerRack + w
    int64_t sum[wire::kValuesPerFragment] = {};
    bool done = false;
    wire::AtpMessage ack;
  };

  bool Lose() { return static_cast<int>(rng_() % 100) < loss_percent_; }

  void Schedule(int to, const wire::AtpMessage& m) {
    if (Lose()) {
      (to < 0 ? gradients_lost_ : acks_lost_)++;
      return;
    }
    TimePoint at = now_ + Us(5 + static_cast<int64_t>(rng_() % 50));
    events_.push(Event{at, order_++, to, m});
  }

  void Multicast(const wire::AtpMessage& ack) {
    for (int w = 0; w < kWorkers; ++w) Schedule(w, ack);
  }

  void OnGradient(const wire::AtpMessage& m) {
    ASSERT_FALSE(m.header.fp);  // the test's values never need the float path
    SeqState& s = pool_[m.header.seq];
    if (s.done) {
      // A resend for a completed seq: its worker lost the parameter packet.
      if (m.header.resend) Multicast(s.ack);
      return;
    }
    const int rack = std::countr_zero(m.header.bitmap1);
    const int worker = std::countr_zero(m.header.bitmap0);
    const uint32_t bit = 1u << (rack * kWorkersPerRack + worker);
    if (s.contributors & bit) return;  // duplicate
    s.contributors |= bit;
    for (size_t i = 0; i < wire::kValuesPerFragment; ++i) {
      s.sum[i] += static_cast<int32_t>(m.payload[i]);
    }
    if (s.contributors != (1u << kWorkers) - 1) return;
    s.done = true;
    s.ack.header.job = m.header.job;
    s.ack.header.seq = m.header.seq;
    s.ack.header.bitmap0 = 0x3;
    s.ack.header.bitmap1 = 0x3;
    s.ack.header.fan_in0 = kWorkersPerRack;
    s.ack.header.fan_in1 = kRacks;
    s.ack.header.edge = true;
    s.ack.header.ack = true;
    s.ack.header.ecn = rng_() % 100 < 2;
    for (size_t i = 0; i < wire::kValuesPerFragment; ++i) {
      s.ack.payload[i] = static_cast<uint32_t>(static_cast<int32_t>(s.sum[i]));
    }
    Multicast(s.ack);
  }

  std::mt19937 rng_;
  int loss_percent_;
  std::vector<std::unique_ptr<WorkerQueueEngine>> engines_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::map<uint32_t, SeqState> pool_;
  TimePoint now_ = kT0;
  uint64_t order_ = 0;
  uint64_t gradients_lost_ = 0;
  uint64_t acks_lost_ = 0;
};

void RunLossy(uint32_t seed, int loss_percent) {
  LossyNetwork net(seed, loss_percent);
  std::mt19937 rng(seed);
  constexpr int kOps = 12;
  std::vector<size_t> sizes;
  for (int i = 0; i < kOps; ++i) sizes.push_back(rng() % 3000);
  // Each worker's inputs, and the exact expected result: the int32 sum of the
  // quantized inputs, dequantized.
  std::vector<std::vector<std::vector<float>>> inputs(LossyNetwork::kWorkers);
  std::vector<std::vector<std::vector<float>>> outputs(LossyNetwork::kWorkers);
  for (int w = 0; w < LossyNetwork::kWorkers; ++w) {
    for (int i = 0; i < kOps; ++i) {
      inputs[w].push_back(RandomValues(sizes[i], rng, 2.0f));
      outputs[w].emplace_back(sizes[i], -100.0f);
    }
  }
  for (int w = 0; w < LossyNetwork::kWorkers; ++w) {
    for (int i = 0; i < kOps; ++i) {
      ASSERT_TRUE(net.engine(w).Enqueue(inputs[w][i], outputs[w][i]).ok());
    }
  }
  ASSERT_TRUE(net.Run(kOps, TimeDelta::FromSeconds(3600)))
      << "not every operation completed; worker 0 in flight "
      << net.engine(0).stats().in_flight;
  for (int i = 0; i < kOps; ++i) {
    std::vector<int32_t> sum(sizes[i], 0);
    std::vector<int32_t> q(sizes[i]);
    for (int w = 0; w < LossyNetwork::kWorkers; ++w) {
      Quantize(inputs[w][i], kDefaultScale, q);
      for (size_t k = 0; k < sizes[i]; ++k) sum[k] += q[k];
    }
    std::vector<float> expected(sizes[i]);
    Dequantize(sum, kDefaultScale, expected);
    for (int w = 0; w < LossyNetwork::kWorkers; ++w) {
      ASSERT_EQ(outputs[w][i], expected) << "worker " << w << " operation " << i;
    }
  }
  if (loss_percent > 0) {
    EXPECT_GT(net.gradients_lost() + net.acks_lost(), 0u);
    uint64_t resends = 0;
    for (int w = 0; w < LossyNetwork::kWorkers; ++w) {
      WorkerQueueStats s = net.engine(w).stats();
      resends += s.resends_loss + s.resends_timeout;
    }
    EXPECT_GT(resends, 0u);
  }
}

TEST(WorkerQueueEngineScaleTest, NoLossEveryWorkerGetsTheExactSum) { RunLossy(10, 0); }

TEST(WorkerQueueEngineScaleTest, LossyNetworkEveryOperationCompletesWithTheExactSum) {
  for (uint32_t seed : {21u, 22u, 23u}) {
    SCOPED_TRACE(seed);
    RunLossy(seed, 10);
  }
}

TEST(WorkerQueueEngineScaleTest, HeavyLossStillCompletes) { RunLossy(31, 40); }

}  // namespace
}  // namespace atp::worker
