// PsEngine beyond single rules: job isolation, the largest job shape, all 16
// queues and sharding, position wrap-around, and randomized arrival orders.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "lib/ps/ps_engine.h"
#include "tests/unit/ps/ps_test_util.h"

namespace atp::ps {
namespace {

using protocol::JobShape;
using testing::Fill;
using testing::FloatAt;
using testing::FloatFill;
using testing::FpWorker;
using testing::IntAt;
using testing::kNow;
using testing::Level1;
using testing::Level2;
using testing::RecordingSink;
using testing::Worker;

// CountingSink: keeps only the count and the last message (for long runs).
class CountingSink : public protocol::MessageSink {
 public:
  void Send(const wire::AtpMessage& message) override {
    ++count;
    last = message;
  }
  uint64_t count = 0;
  wire::AtpMessage last;
};

void ExpectBalanced(const PsEngine& engine) {
  EXPECT_EQ(engine.counters().gradients, engine.counters().Outcomes());
}

TEST(PsEngineTest, JobsAreIsolated) {
  const JobShape a = JobShape::Uniform(3, 2, 2);
  const JobShape b = JobShape::Uniform(4, 1, 3);
  PsEngine shared = testing::MakeEngine(testing::ConfigFor({a, b}));
  PsEngine alone = testing::MakeEngine(testing::ConfigFor({b}));
  RecordingSink shared_sink;
  RecordingSink alone_sink;

  for (uint32_t seq = 0; seq < 20; ++seq) {
    // Job A, same seqs: duplicates, a collision, an overflow, a malformed packet.
    wire::AtpMessage collided = Worker(a, seq, 0, 0, Fill(1), 12);
    collided.header.collision = true;
    shared.OnGradient(collided, kNow, shared_sink);
    shared.OnGradient(collided, kNow, shared_sink);
    wire::AtpMessage malformed = Worker(a, seq, 0, 1, Fill(1));
    malformed.header.bitmap0 = 0;
    shared.OnGradient(malformed, kNow, shared_sink);
    shared.OnGradient(Level2(a, seq, 0b10, Fill(seq % 3 == 0 ? INT32_MAX : 7)), kNow, shared_sink);
    // Job B, one worker at a time, to both engines.
    for (int w = 0; w < 3; ++w) {
      wire::AtpMessage m = Worker(b, seq, 0, w, testing::Ramp(static_cast<int32_t>(seq), w), 40);
      m.header.ecn = (seq % 4 == 1 && w == 2);
      shared.OnGradient(m, kNow, shared_sink);
      alone.OnGradient(m, kNow, alone_sink);
    }
  }
  std::vector<wire::AtpMessage> shared_b;
  for (const wire::AtpMessage& m : shared_sink.sent) {
    if (m.header.job == b.job) shared_b.push_back(m);
  }
  ASSERT_EQ(shared_b.size(), alone_sink.sent.size());
  ASSERT_EQ(alone_sink.sent.size(), 20u);
  for (size_t i = 0; i < shared_b.size(); ++i) {
    EXPECT_EQ(shared_b[i].header, alone_sink.sent[i].header);
    EXPECT_EQ(shared_b[i].payload, alone_sink.sent[i].payload);
  }
  ExpectBalanced(shared);
  ExpectBalanced(alone);
}

TEST(PsEngineTest, ThirtyTwoRacksOfThirtyTwoWorkers) {
  const JobShape shape = JobShape::Uniform(5, 32, 32);
  PsEngine engine = testing::MakeEngine(testing::ConfigFor({shape}));
  RecordingSink sink;
  // Seq 0: every worker alone, value = its worker index.
  for (int r = 0; r < 32; ++r) {
    for (int w = 0; w < 32; ++w) {
      EXPECT_TRUE(sink.sent.empty());
      engine.OnGradient(Worker(shape, 0, r, w, Fill(r * 32 + w)), kNow, sink);
    }
  }
  ASSERT_EQ(sink.sent.size(), 1u);
  EXPECT_EQ(IntAt(sink.sent[0].payload, 0), 1024 * 1023 / 2);
  EXPECT_EQ(sink.sent[0].header.bitmap0, 0xFFFFFFFFu);
  EXPECT_EQ(sink.sent[0].header.bitmap1, 0xFFFFFFFFu);
  EXPECT_EQ(sink.sent[0].header.fan_in0, 32);
  EXPECT_EQ(sink.sent[0].header.fan_in1, 32);

  // Seq 1: half the racks through a level-2 switch, the rest through level-1 switches.
  engine.OnGradient(Level2(shape, 1, 0x0000FFFFu, Fill(-16)), kNow, sink);
  for (int r = 16; r < 32; ++r)
    engine.OnGradient(Level1(shape, 1, r, 0xFFFFFFFFu, Fill(3)), kNow, sink);
  ASSERT_EQ(sink.sent.size(), 2u);
  EXPECT_EQ(IntAt(sink.sent[1].payload, 61), -16 + 16 * 3);

  // Seq 2: a saturated level-2 partial sends all 1,024 workers down the float path.
  engine.OnGradient(Level2(shape, 2, 0xFFFFFFFFu, Fill(INT32_MIN)), kNow, sink);
  ASSERT_EQ(sink.sent.size(), 3u);
  EXPECT_TRUE(sink.sent[2].header.IsOverflowRequest());
  double expected = 0;
  for (int r = 31; r >= 0; --r) {  // arrival order: reverse worker order
    for (int w = 31; w >= 0; --w) {
      engine.OnGradient(FpWorker(shape, 2, r, w, FloatFill(0.1f * static_cast<float>(w - r))), kNow,
                        sink);
    }
  }
  for (int r = 0; r < 32; ++r) {
    for (int w = 0; w < 32; ++w) expected += static_cast<double>(0.1f * static_cast<float>(w - r));
  }
  ASSERT_EQ(sink.sent.size(), 4u);
  EXPECT_TRUE(sink.sent[3].header.fp);
  EXPECT_EQ(FloatAt(sink.sent[3].payload, 0), static_cast<float>(expected));
  EXPECT_EQ(engine.fp_buffers_in_use(), 0u);
  ExpectBalanced(engine);
}

TEST(PsEngineTest, SixteenQueuesAreIndependent) {
  const JobShape shape = JobShape::Uniform(6, 1, 2);
  PsEngine engine = testing::MakeEngine(testing::ConfigFor({shape}, /*slots=*/4));
  RecordingSink sink;
  // The same position on every queue: 16 distinct seqs.
  for (uint32_t q = 0; q < 16; ++q) {
    engine.OnGradient(Worker(shape, wire::MakeSeq(q, 3), 0, 0, Fill(static_cast<int32_t>(q))), kNow,
                      sink);
  }
  EXPECT_TRUE(sink.sent.empty());
  for (uint32_t q = 16; q-- > 0;) {
    engine.OnGradient(Worker(shape, wire::MakeSeq(q, 3), 0, 1, Fill(100)), kNow, sink);
  }
  ASSERT_EQ(sink.sent.size(), 16u);
  for (uint32_t i = 0; i < 16; ++i) {
    uint32_t q = 15 - i;
    EXPECT_EQ(sink.sent[i].header.seq, wire::MakeSeq(q, 3));
    EXPECT_EQ(IntAt(sink.sent[i].payload, 0), static_cast<int32_t>(q) + 100);
  }
  ExpectBalanced(engine);
}

TEST(PsEngineTest, ShardServesOnlyItsQueues) {
  const JobShape shape = JobShape::Uniform(6, 1, 1);
  PsConfig config = testing::ConfigFor({shape}, /*slots=*/4);
  config.shard_count = 4;
  config.shard_index = 1;
  ASSERT_EQ(config.ServedQueues(), 4u);  // queues 1, 5, 9, 13
  PsEngine engine = testing::MakeEngine(config);
  RecordingSink sink;
  for (uint32_t q = 0; q < 16; ++q) {
    engine.OnGradient(Worker(shape, wire::MakeSeq(q, 2), 0, 0, Fill(static_cast<int32_t>(q))), kNow,
                      sink);
  }
  ASSERT_EQ(sink.sent.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(sink.sent[i].header.queue(), 1 + 4 * i);
    EXPECT_EQ(IntAt(sink.sent[i].payload, 0), static_cast<int32_t>(1 + 4 * i));
  }
  EXPECT_EQ(engine.counters().wrong_shard, 12u);
  ExpectBalanced(engine);
}

TEST(PsEngineTest, PositionWrapsAroundAt2To20) {
  const JobShape shape = JobShape::Uniform(6, 1, 1);
  PsEngine engine = testing::MakeEngine(testing::ConfigFor({shape}, /*slots=*/2));
  CountingSink sink;
  constexpr uint32_t kPositions = (1u << 20) + 6;
  for (uint32_t n = 0; n < kPositions; ++n) {
    const uint32_t seq = wire::MakeSeq(9, n);  // MakeSeq keeps the low 20 bits
    engine.OnGradient(Worker(shape, seq, 0, 0, Fill(static_cast<int32_t>(n & 0xFFFF))), kNow, sink);
    ASSERT_EQ(sink.count, n + 1) << "position " << n;
    ASSERT_EQ(sink.last.header.seq, seq);
  }
  EXPECT_EQ(sink.last.header.position(), 5u);
  EXPECT_EQ(IntAt(sink.last.payload, 0), static_cast<int32_t>((kPositions - 1) & 0xFFFF));
  // After the wrap: position 4 resends its packet, position 2 (two generations back) is stale.
  wire::AtpMessage resend = Worker(shape, wire::MakeSeq(9, 4), 0, 0, Fill(0));
  resend.header.resend = true;
  engine.OnGradient(resend, kNow, sink);
  EXPECT_EQ(sink.last.header.position(), 4u);
  EXPECT_EQ(engine.counters().param_resent, 1u);
  resend.header.seq = wire::MakeSeq(9, 2);
  engine.OnGradient(resend, kNow, sink);
  EXPECT_EQ(engine.counters().stale, 1u);
  EXPECT_EQ(engine.counters().completed, kPositions);
  ExpectBalanced(engine);
}

// Randomized: switches deliver random partial aggregates (level-1 groups and
// level-2 groups of whole racks) in random order, with exact copies and
// overlapping single-worker resends; afterwards every worker resends. The PS
// must complete each seq exactly once with the exact int32 sum.
TEST(PsEngineTest, RandomArrivalOfPartialsGivesTheExactSum) {
  std::mt19937 rng(20240607);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  constexpr uint32_t kTrials = 300;

  for (uint32_t trial = 0; trial < kTrials; ++trial) {
    JobShape shape;
    shape.job = 11;
    shape.workers_per_rack.resize(static_cast<size_t>(uniform(1, 5)));
    for (uint8_t& w : shape.workers_per_rack) w = static_cast<uint8_t>(uniform(1, 8));
    PsEngine engine = testing::MakeEngine(testing::ConfigFor({shape}, /*slots=*/4));
    RecordingSink sink;
    const uint32_t seq = wire::MakeSeq(static_cast<uint32_t>(uniform(0, 15)), trial % 4);

    // Inputs, and partial sums of any group of workers.
    std::vector<std::vector<wire::Payload>> input(static_cast<size_t>(shape.racks()));
    wire::Payload total{};
    for (int r = 0; r < shape.racks(); ++r) {
      for (int w = 0; w < shape.workers_in_rack(r); ++w) {
        wire::Payload p;
        for (uint32_t& v : p) v = static_cast<uint32_t>(uniform(-1000000, 1000000));
        input[static_cast<size_t>(r)].push_back(p);
        for (size_t i = 0; i < p.size(); ++i) total[i] += p[i];
      }
    }
    auto rack_sum = [&](int r, uint32_t workers) {
      wire::Payload sum{};
      for (int w = 0; w < 32; ++w) {
        if ((workers >> w & 1u) == 0) continue;
        const wire::Payload& p = input[static_cast<size_t>(r)][static_cast<size_t>(w)];
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += p[i];
      }
      return sum;
    };

    std::vector<wire::AtpMessage> packets;
    std::vector<int> whole_racks;
    for (int r = 0; r < shape.racks(); ++r) {
      if (uniform(0, 2) == 0) {
        whole_racks.push_back(r);
        continue;
      }
      // Split the rack's workers into random level-1 groups.
      std::vector<uint32_t> groups(static_cast<size_t>(uniform(1, shape.workers_in_rack(r))), 0);
      for (int w = 0; w < shape.workers_in_rack(r); ++w) {
        groups[static_cast<size_t>(uniform(0, static_cast<int>(groups.size()) - 1))] |= 1u << w;
      }
      for (uint32_t g : groups) {
        if (g != 0) packets.push_back(Level1(shape, seq, r, g, rack_sum(r, g)));
      }
    }
    // Group the whole racks into random level-2 packets.
    std::shuffle(whole_racks.begin(), whole_racks.end(), rng);
    for (size_t i = 0; i < whole_racks.size();) {
      size_t n = static_cast<size_t>(uniform(1, static_cast<int>(whole_racks.size() - i)));
      uint32_t racks = 0;
      wire::Payload sum{};
      for (size_t k = i; k < i + n; ++k) {
        int r = whole_racks[k];
        racks |= 1u << r;
        wire::Payload part = rack_sum(r, shape.RackBitmap(r));
        for (size_t v = 0; v < sum.size(); ++v) sum[v] += part[v];
      }
      packets.push_back(Level2(shape, seq, racks, sum));
      i += n;
    }
    // Exact copies, and single workers resending on their own (overlapping a partial).
    const size_t originals = packets.size();
    for (size_t k = 0; k < originals; ++k) {
      if (uniform(0, 3) == 0) packets.push_back(packets[k]);
    }
    for (int k = uniform(0, 3); k > 0; --k) {
      int r = uniform(0, shape.racks() - 1);
      int w = uniform(0, shape.workers_in_rack(r) - 1);
      packets.push_back(
          Worker(shape, seq, r, w, input[static_cast<size_t>(r)][static_cast<size_t>(w)]));
      packets.back().header.resend = true;
    }
    std::shuffle(packets.begin(), packets.end(), rng);
    for (const wire::AtpMessage& m : packets) engine.OnGradient(m, kNow, sink);
    // Recovery: every worker resends its own fragment (overlaps are dropped).
    for (int r = 0; r < shape.racks(); ++r) {
      for (int w = 0; w < shape.workers_in_rack(r); ++w) {
        wire::AtpMessage m =
            Worker(shape, seq, r, w, input[static_cast<size_t>(r)][static_cast<size_t>(w)]);
        m.header.resend = true;
        engine.OnGradient(m, kNow, sink);
      }
    }

    ASSERT_EQ(engine.counters().completed, 1u) << "trial " << trial;
    ASSERT_FALSE(sink.sent.empty());
    for (const wire::AtpMessage& m : sink.sent) {  // the completion, then identical resends
      EXPECT_EQ(m.header, sink.sent[0].header);
      EXPECT_EQ(m.payload, total) << "trial " << trial;
    }
    EXPECT_EQ(sink.sent.size(), 1 + engine.counters().param_resent);
    ExpectBalanced(engine);
  }
}

}  // namespace
}  // namespace atp::ps
