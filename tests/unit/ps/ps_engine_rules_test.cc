// One test per rule of ATP-SPEC section 6, named after the rule.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "lib/protocol/aggregator_index.h"
#include "lib/ps/ps_engine.h"
#include "lib/wire/control_message.h"
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
using testing::Ramp;
using testing::RecordingSink;
using testing::Worker;

constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();

// PsRuleTest: one engine serving `shape_` plus a recording sink; every test
// ends by checking that each message landed in exactly one outcome counter.
class PsRuleTest : public ::testing::Test {
 protected:
  void Start(JobShape shape, uint32_t slots = 8) {
    shape_ = std::move(shape);
    engine_.emplace(testing::MakeEngine(testing::ConfigFor({shape_}, slots)));
  }
  void Deliver(const wire::AtpMessage& message) { engine_->OnGradient(message, kNow, sink_); }
  const PsCounters& counters() const { return engine_->counters(); }

  // DeliverAllWorkersFp: every worker's fp row, in worker order, value v(rack, worker).
  template <typename ValueOf>
  void DeliverAllWorkersFp(uint32_t seq, ValueOf value_of) {
    for (int r = 0; r < shape_.racks(); ++r) {
      for (int w = 0; w < shape_.workers_in_rack(r); ++w) {
        Deliver(FpWorker(shape_, seq, r, w, FloatFill(value_of(r, w))));
      }
    }
  }

  void TearDown() override {
    if (engine_) {
      EXPECT_EQ(counters().gradients, counters().Outcomes());
    }
  }

  JobShape shape_;
  std::optional<PsEngine> engine_;
  RecordingSink sink_;
};

TEST_F(PsRuleTest, Rule_Level1ContributionCountsRackWorkers) {
  Start(JobShape::Uniform(7, 2, 4));
  Deliver(Level1(shape_, 0, 0, 0b0011, Fill(1)));  // two workers of rack 0, summed by a switch
  Deliver(Level1(shape_, 0, 0, 0b1100, Fill(2)));
  Deliver(Level1(shape_, 0, 1, 0b0111, Fill(3)));
  EXPECT_TRUE(sink_.sent.empty()) << "worker 3 of rack 1 is still missing";
  Deliver(Worker(shape_, 0, 1, 3, Fill(4)));
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(IntAt(sink_.sent[0].payload, 0), 10);
  EXPECT_EQ(counters().contributions, 4u);
  EXPECT_EQ(counters().completed, 1u);
}

TEST_F(PsRuleTest, Rule_Level2ContributionCountsWholeRacks) {
  Start(JobShape{.job = 9, .workers_per_rack = {3, 5, 2}});
  Deliver(Level2(shape_, 0, 0b011, Ramp(10, 1)));  // racks 0 and 1, all 8 workers
  EXPECT_TRUE(sink_.sent.empty());
  Deliver(Worker(shape_, 0, 2, 0, Ramp(1, 0)));
  EXPECT_TRUE(sink_.sent.empty()) << "rack 2 has two workers";
  Deliver(Worker(shape_, 0, 2, 1, Ramp(-5, 2)));
  ASSERT_EQ(sink_.sent.size(), 1u);
  for (size_t i = 0; i < wire::kValuesPerFragment; ++i) {
    EXPECT_EQ(IntAt(sink_.sent[0].payload, i),
              (10 + static_cast<int>(i)) + 1 + (-5 + 2 * static_cast<int>(i)));
  }
}

TEST_F(PsRuleTest, Rule_DuplicateOverlapDropped) {
  Start(JobShape::Uniform(7, 2, 4));
  Deliver(Level1(shape_, 0, 0, 0b0011, Fill(100)));
  Deliver(Level1(shape_, 0, 0, 0b0110, Fill(1000)));  // overlaps worker 1: dropped whole
  EXPECT_EQ(counters().duplicates, 1u);
  Deliver(Level2(shape_, 0, 0b11, Fill(5000)));  // overlaps rack 0 partially: dropped whole
  EXPECT_EQ(counters().duplicates, 2u);
  Deliver(Level1(shape_, 0, 0, 0b1100, Fill(10)));
  Deliver(Level2(shape_, 0, 0b10, Fill(1)));
  Deliver(Level2(shape_, 0, 0b10, Fill(1)));  // an exact copy: completed seq, not a resend
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(IntAt(sink_.sent[0].payload, 0), 111);
  EXPECT_EQ(counters().duplicates, 3u);
  EXPECT_EQ(counters().contributions, 3u);
}

TEST_F(PsRuleTest, Rule_CompleteWhenEveryRackCovered) {
  Start(JobShape{.job = 9, .workers_per_rack = {3, 5, 2}}, /*slots=*/16);
  const uint32_t seq = wire::MakeSeq(/*queue=*/3, /*position=*/5);
  int expected = 0;
  for (int r = 0; r < shape_.racks(); ++r) {
    for (int w = 0; w < shape_.workers_in_rack(r); ++w) {
      EXPECT_TRUE(sink_.sent.empty());
      Deliver(Worker(shape_, seq, r, w, Fill(r * 10 + w), /*aggregator=*/4242));
      expected += r * 10 + w;
    }
  }
  ASSERT_EQ(sink_.sent.size(), 1u);
  const wire::AtpHeader& h = sink_.sent[0].header;
  EXPECT_EQ(h.job, 9);
  EXPECT_EQ(h.seq, seq);
  EXPECT_TRUE(h.ack);
  EXPECT_TRUE(h.edge);
  EXPECT_FALSE(h.resend);
  EXPECT_FALSE(h.fp);
  EXPECT_FALSE(h.collision);
  EXPECT_FALSE(h.ecn);
  EXPECT_EQ(h.bitmap0, 0b11111u) << "every worker of the largest rack";
  EXPECT_EQ(h.bitmap1, 0b111u) << "every rack";
  EXPECT_EQ(h.fan_in0, 5);
  EXPECT_EQ(h.fan_in1, 3);
  EXPECT_EQ(h.aggregator, 4242);
  for (size_t i = 0; i < wire::kValuesPerFragment; ++i) {
    EXPECT_EQ(IntAt(sink_.sent[0].payload, i), expected);
  }
  EXPECT_EQ(counters().param_sent, 1u);
}

TEST_F(PsRuleTest, Rule_CollisionRehashedInParameterPacket) {
  Start(JobShape::Uniform(7, 1, 3));
  wire::AtpMessage collided = Worker(shape_, 2, 0, 1, Fill(1), /*aggregator=*/500);
  collided.header.collision = true;  // a switch found the aggregator taken...
  collided.header.resend = true;     // ...and marked the packet resend, as section 4 says
  Deliver(Worker(shape_, 2, 0, 0, Fill(1), 500));
  Deliver(collided);
  Deliver(Worker(shape_, 2, 0, 2, Fill(1), 500));
  ASSERT_EQ(sink_.sent.size(), 1u);
  const wire::AtpHeader h = sink_.sent[0].header;  // a copy: sent grows below
  EXPECT_TRUE(h.collision);
  EXPECT_EQ(h.aggregator, 500) << "the old index, so switches clear it";
  EXPECT_EQ(h.NewAggregatorIndex(), protocol::RehashAggregatorIndex(7, 2, 500));
  EXPECT_EQ(h.bitmap1 >> 16, 0u);
  EXPECT_NE(h.NewAggregatorIndex(), 500);
  EXPECT_EQ(IntAt(sink_.sent[0].payload, 0), 3);
  EXPECT_EQ(counters().collisions_rehashed, 1u);

  // The slot's next generation carries no collision of its own: no rehash.
  Deliver(Level2(shape_, 2 + 8, 0b1, Fill(9), h.NewAggregatorIndex()));
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_FALSE(sink_.sent[1].header.collision);
  EXPECT_EQ(sink_.sent[1].header.aggregator, h.NewAggregatorIndex());
  EXPECT_EQ(counters().collisions_rehashed, 1u);
}

TEST_F(PsRuleTest, Rule_OverflowOnSaturatedContribution) {
  Start(JobShape::Uniform(7, 2, 2));
  Deliver(Worker(shape_, 1, 0, 0, Fill(5), /*aggregator=*/31));
  wire::Payload saturated = Fill(5);
  saturated[17] = static_cast<uint32_t>(kInt32Max);  // a switch saturated this partial
  Deliver(Level1(shape_, 1, 1, 0b11, saturated, 31));
  ASSERT_EQ(sink_.sent.size(), 1u) << "the overflow request goes out at once";
  const wire::AtpHeader request = sink_.sent[0].header;
  EXPECT_TRUE(request.IsOverflowRequest());
  EXPECT_EQ(request.seq, 1u);
  EXPECT_EQ(request.aggregator, 31);
  EXPECT_FALSE(request.collision);
  EXPECT_EQ(counters().overflows, 1u);
  EXPECT_EQ(counters().overflow_requests, 1u);
  EXPECT_EQ(engine_->fp_buffers_in_use(), 1u);
  sink_.TakeAll();

  DeliverAllWorkersFp(1, [](int r, int w) { return 0.25f * static_cast<float>(1 + 2 * r + w); });
  ASSERT_EQ(sink_.sent.size(), 1u);
  const wire::AtpMessage result = sink_.sent[0];
  EXPECT_TRUE(result.header.fp);
  EXPECT_FALSE(result.header.resend);
  EXPECT_EQ(result.header.aggregator, 31);
  EXPECT_EQ(FloatAt(result.payload, 0), 0.25f * (1 + 2 + 3 + 4));
  EXPECT_EQ(counters().fp_completed, 1u);
  EXPECT_EQ(engine_->fp_buffers_in_use(), 0u);

  // INT32_MIN counts as saturated too.
  wire::Payload low = Fill(0);
  low[0] = static_cast<uint32_t>(kInt32Min);
  Deliver(Worker(shape_, 2, 1, 1, low));
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_TRUE(sink_.sent[1].header.IsOverflowRequest());
}

TEST_F(PsRuleTest, Rule_OverflowOnSumOverflow) {
  Start(JobShape::Uniform(7, 1, 2));
  // The sum kInt32Max - 1 still fits the open range...
  Deliver(Worker(shape_, 0, 0, 0, Fill(kInt32Max - 1)));
  Deliver(Worker(shape_, 0, 0, 1, Fill(0)));
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(IntAt(sink_.sent[0].payload, 0), kInt32Max - 1);
  EXPECT_EQ(counters().overflows, 0u);
  // ...and an intermediate excursion beyond int32 is fine when the total fits.
  Deliver(Worker(shape_, 1, 0, 0, Fill(kInt32Max - 1)));
  Deliver(Worker(shape_, 1, 0, 1, Fill(-100)));
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_EQ(IntAt(sink_.sent[1].payload, 0), kInt32Max - 101);
  sink_.TakeAll();

  // A sum reaching the bound (or beyond) takes the float path, detected at completion.
  wire::Payload big = Fill(1);
  big[61] = static_cast<uint32_t>(kInt32Max - 1);
  Deliver(Worker(shape_, 2, 0, 0, big));
  EXPECT_TRUE(sink_.sent.empty());
  Deliver(Worker(shape_, 2, 0, 1, Fill(1)));
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_TRUE(sink_.sent[0].header.IsOverflowRequest());
  // Negative side.
  Deliver(Worker(shape_, 3, 0, 0, Fill(kInt32Min + 1)));
  Deliver(Worker(shape_, 3, 0, 1, Fill(-1)));
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_TRUE(sink_.sent[1].header.IsOverflowRequest());
  EXPECT_EQ(counters().overflows, 2u);
  EXPECT_EQ(engine_->fp_buffers_in_use(), 2u);
}

TEST_F(PsRuleTest, Rule_OverflowOnFpContribution) {
  Start(JobShape::Uniform(7, 1, 3));
  Deliver(Worker(shape_, 0, 0, 0, Fill(5)));
  Deliver(FpWorker(shape_, 0, 0, 1, FloatFill(std::numeric_limits<float>::infinity())));
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_TRUE(sink_.sent[0].header.IsOverflowRequest());
  Deliver(FpWorker(shape_, 0, 0, 0, FloatFill(1.0f)));
  Deliver(FpWorker(shape_, 0, 0, 2, FloatFill(2.0f)));
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_TRUE(sink_.sent[1].header.fp);
  EXPECT_TRUE(std::isinf(FloatAt(sink_.sent[1].payload, 3)));
}

TEST_F(PsRuleTest, Rule_FpOnlyJobCompletesWithoutOverflowRequest) {
  // One worker that goes float directly: nobody needs to be asked.
  Start(JobShape::Uniform(7, 1, 1));
  Deliver(FpWorker(shape_, 0, 0, 0, FloatFill(1.5f)));
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_TRUE(sink_.sent[0].header.fp);
  EXPECT_EQ(FloatAt(sink_.sent[0].payload, 0), 1.5f);
  EXPECT_EQ(counters().overflow_requests, 0u);
}

TEST_F(PsRuleTest, Rule_FpSumInWorkerOrderIndependentOfArrival) {
  Start(JobShape::Uniform(7, 2, 2));
  // Doubles lose the 1.0f next to 1e30f, so the order of addition matters.
  const std::array<float, 4> values = {1e30f, 1.0f, -1e30f, 3.0f};
  double in_order = 0;
  for (float v : values) in_order += v;
  const float expected = static_cast<float>(in_order);
  ASSERT_NE(expected, static_cast<float>((1e30 + -1e30) + 1.0 + 3.0)) << "order must matter";

  std::array<int, 4> order = {0, 1, 2, 3};
  uint32_t position = 0;
  do {
    const uint32_t seq = position;
    for (int worker : order) {
      Deliver(FpWorker(shape_, seq, worker / 2, worker % 2,
                       FloatFill(values[static_cast<size_t>(worker)])));
    }
    std::vector<wire::AtpMessage> sent = sink_.TakeAll();
    ASSERT_EQ(sent.size(), 2u);  // the overflow request, then the result
    EXPECT_TRUE(sent[0].header.IsOverflowRequest());
    EXPECT_TRUE(sent[1].header.fp);
    for (size_t i = 0; i < wire::kValuesPerFragment; ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(FloatAt(sent[1].payload, i)),
                std::bit_cast<uint32_t>(expected));
    }
    ++position;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(counters().fp_completed, 24u);
}

TEST_F(PsRuleTest, Rule_IntegerAfterFloatPathRepeatsRequest) {
  Start(JobShape::Uniform(7, 1, 3));
  Deliver(FpWorker(shape_, 0, 0, 0, FloatFill(1.0f)));
  ASSERT_EQ(sink_.TakeAll().size(), 1u);
  // Worker 1 missed the request and (re)sends integers: ask again.
  Deliver(Worker(shape_, 0, 0, 1, Fill(3)));
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_TRUE(sink_.sent[0].header.IsOverflowRequest());
  EXPECT_EQ(counters().overflow_requests, 2u);
  // A late integer copy from worker 0, whose fp row is already here: no new request.
  Deliver(Worker(shape_, 0, 0, 0, Fill(3)));
  EXPECT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(counters().integer_on_float_path, 2u);
  EXPECT_EQ(counters().overflow_requests, 2u);
  Deliver(FpWorker(shape_, 0, 0, 1, FloatFill(2.0f)));
  Deliver(FpWorker(shape_, 0, 0, 2, FloatFill(4.0f)));
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_EQ(FloatAt(sink_.sent[1].payload, 0), 7.0f);
}

TEST_F(PsRuleTest, Rule_ResendOfCompletedSeqResendsStoredPacket) {
  Start(JobShape::Uniform(7, 1, 2), /*slots=*/4);
  wire::AtpMessage first = Worker(shape_, 1, 0, 0, Fill(20), 900);
  first.header.collision = true;
  first.header.resend = true;
  first.header.ecn = true;
  Deliver(first);
  Deliver(Worker(shape_, 1, 0, 1, Fill(22), 900));
  ASSERT_EQ(sink_.sent.size(), 1u);
  const wire::AtpMessage original = sink_.sent[0];

  // Worker 1 lost it and resends: the same packet again, collision and new index included.
  wire::AtpMessage resend = Worker(shape_, 1, 0, 1, Fill(22), 900);
  resend.header.resend = true;
  Deliver(resend);
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_EQ(sink_.sent[1].header, original.header);
  EXPECT_EQ(sink_.sent[1].payload, original.payload);
  EXPECT_FALSE(sink_.sent[1].header.resend);
  EXPECT_TRUE(sink_.sent[1].header.collision);
  EXPECT_EQ(counters().param_resent, 1u);
  // A copy without resend is a late duplicate: nothing is sent.
  Deliver(Worker(shape_, 1, 0, 1, Fill(22), 900));
  EXPECT_EQ(sink_.sent.size(), 2u);
  EXPECT_EQ(counters().duplicates, 1u);

  // A float result is kept the same way, and replaced when the next generation completes.
  Deliver(FpWorker(shape_, 5, 0, 0, FloatFill(0.5f)));
  Deliver(FpWorker(shape_, 5, 0, 1, FloatFill(0.25f)));
  ASSERT_EQ(sink_.sent.size(), 4u);
  resend = FpWorker(shape_, 5, 0, 0, FloatFill(0.5f));
  resend.header.resend = true;
  Deliver(resend);
  ASSERT_EQ(sink_.sent.size(), 5u);
  EXPECT_EQ(sink_.sent[4].header, sink_.sent[3].header);
  EXPECT_TRUE(sink_.sent[4].header.fp);
  EXPECT_EQ(FloatAt(sink_.sent[4].payload, 0), 0.75f);
  // Position 1's packet is gone: its resend is now stale.
  resend = Worker(shape_, 1, 0, 1, Fill(22), 900);
  resend.header.resend = true;
  Deliver(resend);
  EXPECT_EQ(sink_.sent.size(), 5u);
  EXPECT_EQ(counters().stale, 1u);
}

TEST_F(PsRuleTest, Rule_StaleAndFutureSeqsDropped) {
  Start(JobShape::Uniform(7, 1, 1), /*slots=*/4);
  // Slot 2 starts with position 2 live; 6 is the generation after it: too far ahead.
  Deliver(Worker(shape_, 6, 0, 0, Fill(1)));
  EXPECT_EQ(counters().ahead, 1u);
  // A resend of the virtual generation before position 0 (2^20 - 2) is stale.
  wire::AtpMessage before_start = Worker(shape_, wire::kPositionMask - 1, 0, 0, Fill(1));
  before_start.header.resend = true;
  Deliver(before_start);
  EXPECT_EQ(counters().stale, 1u);
  EXPECT_TRUE(sink_.sent.empty());

  Deliver(Worker(shape_, 2, 0, 0, Fill(1)));
  Deliver(Worker(shape_, 6, 0, 0, Fill(1)));
  ASSERT_EQ(sink_.sent.size(), 2u);
  wire::AtpMessage old_resend = Worker(shape_, 2, 0, 0, Fill(1));
  old_resend.header.resend = true;
  Deliver(old_resend);                         // two generations back
  Deliver(Worker(shape_, 14, 0, 0, Fill(1)));  // two generations ahead
  // 2^19 - 4 behind position 6 (serial-number arithmetic), though numerically larger.
  Deliver(Worker(shape_, (6 + (1u << 19) + 4) & wire::kPositionMask, 0, 0, Fill(1)));
  EXPECT_EQ(sink_.sent.size(), 2u);
  EXPECT_EQ(counters().stale, 3u);
  EXPECT_EQ(counters().ahead, 2u);
  EXPECT_EQ(counters().completed, 2u);
}

TEST_F(PsRuleTest, Rule_UnknownJobDropped) {
  Start(JobShape::Uniform(7, 1, 1));
  JobShape other = JobShape::Uniform(8, 1, 1);
  Deliver(Worker(other, 0, 0, 0, Fill(1)));
  EXPECT_TRUE(sink_.sent.empty());
  EXPECT_EQ(counters().unknown_job, 1u);
  EXPECT_EQ(counters().contributions, 0u);
}

TEST_F(PsRuleTest, Rule_MalformedDropped) {
  Start(JobShape::Uniform(7, 2, 4));
  std::vector<wire::AtpMessage> bad;
  bad.push_back(Worker(shape_, 0, 0, 0, Fill(1)));
  bad.back().header.job = 0;
  bad.push_back(Worker(shape_, 0, 0, 0, Fill(1)));
  bad.back().header.seq = 1u << 24;
  bad.push_back(Worker(shape_, 0, 0, 0, Fill(1)));
  bad.back().header.fan_in0 = 0;
  bad.push_back(Worker(shape_, 0, 0, 0, Fill(1)));
  bad.back().header.bitmap0 = 1u << 4;  // beyond fanIn0
  bad.push_back(Worker(shape_, 0, 0, 0, Fill(1)));
  bad.back().header.bitmap0 = 0;
  bad.push_back(Worker(shape_, 0, 0, 0, Fill(1)));
  bad.back().header.bitmap1 = 0b11;  // level 1 naming two racks
  bad.push_back(Level1(shape_, 0, 0, 0b11, FloatFill(1.0f)));
  bad.back().header.fp = true;  // fp from two workers: switches never aggregate fp
  bad.push_back(Level2(shape_, 0, 0b11, FloatFill(1.0f)));
  bad.back().header.fp = true;  // fp at level 2
  for (const wire::AtpMessage& m : bad) Deliver(m);
  EXPECT_EQ(counters().malformed, bad.size());
  EXPECT_TRUE(sink_.sent.empty());
  // None of them touched the pool: the real contributions complete as usual.
  Deliver(Level2(shape_, 0, 0b11, Fill(6)));
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(IntAt(sink_.sent[0].payload, 0), 6);
}

TEST_F(PsRuleTest, Rule_ShapeMismatchDropped) {
  Start(JobShape{.job = 9, .workers_per_rack = {3, 5}});
  wire::AtpMessage m = Worker(shape_, 0, 0, 0, Fill(1));
  m.header.fan_in1 = 3;  // the job has two racks
  Deliver(m);
  m = Worker(shape_, 0, 0, 0, Fill(1));
  m.header.fan_in0 = 5;  // rack 0 has three workers
  Deliver(m);
  m = Worker(shape_, 0, 0, 0, Fill(1));
  m.header.fan_in0 = 5;
  m.header.bitmap0 = 1u << 4;  // worker 4 of rack 0 does not exist
  Deliver(m);
  EXPECT_EQ(counters().shape_mismatch, 3u);
  EXPECT_EQ(counters().contributions, 0u);
}

TEST_F(PsRuleTest, Rule_AckAtPsDropped) {
  Start(JobShape::Uniform(7, 1, 2));
  wire::AtpMessage ack = Level2(shape_, 0, 0b1, Fill(1));
  ack.header.ack = true;
  Deliver(ack);
  EXPECT_EQ(counters().unexpected_ack, 1u);
  EXPECT_TRUE(sink_.sent.empty());
}

TEST_F(PsRuleTest, Rule_ControlFrameIgnoredByTheEngine) {
  // Control frames belong to the host (lib/wire/control_message.h); one that
  // reaches the engine is counted and changes nothing.
  Start(JobShape::Uniform(7, 1, 2));
  wire::ControlMessage pull;
  pull.type = wire::ControlType::kPull;
  const wire::ControlSender sender{.worker_in_rack = 0, .rack = 0, .fan_in0 = 2, .fan_in1 = 1};
  Deliver(wire::MakeWorkerControl(7, sender, /*queue=*/0, /*position=*/0, pull));
  EXPECT_EQ(counters().control, 1u);
  EXPECT_EQ(counters().contributions, 0u);
  EXPECT_EQ(counters().Outcomes(), counters().gradients);
  EXPECT_TRUE(sink_.sent.empty());
}

TEST_F(PsRuleTest, Rule_EcnIsOrOfContributions) {
  Start(JobShape::Uniform(7, 1, 3));
  // No contribution marked: no ecn.
  for (int w = 0; w < 3; ++w) Deliver(Worker(shape_, 0, 0, w, Fill(1)));
  // One marked: ecn, whatever its place.
  for (int w = 0; w < 3; ++w) {
    wire::AtpMessage m = Worker(shape_, 1, 0, w, Fill(1));
    m.header.ecn = (w == 1);
    Deliver(m);
  }
  // A marked duplicate is dropped whole: it marks nothing.
  Deliver(Worker(shape_, 2, 0, 0, Fill(1)));
  wire::AtpMessage dup = Worker(shape_, 2, 0, 0, Fill(1));
  dup.header.ecn = true;
  Deliver(dup);
  Deliver(Level1(shape_, 2, 0, 0b110, Fill(2)));
  ASSERT_EQ(sink_.sent.size(), 3u);
  EXPECT_FALSE(sink_.sent[0].header.ecn);
  EXPECT_TRUE(sink_.sent[1].header.ecn);
  EXPECT_FALSE(sink_.sent[2].header.ecn);
  // The next generation of slot 1 starts clean.
  for (int w = 0; w < 3; ++w) Deliver(Worker(shape_, 9, 0, w, Fill(1)));
  ASSERT_EQ(sink_.sent.size(), 4u);
  EXPECT_FALSE(sink_.sent[3].header.ecn);
}

TEST_F(PsRuleTest, Rule_FpBuffersFreedAfterCompletion) {
  PsConfig config = testing::ConfigFor({JobShape::Uniform(7, 2, 2)}, /*slots=*/8);
  config.fp_pool_buffers = 1;  // the third and fourth float seqs allocate beyond the pool
  shape_ = config.jobs[0];
  engine_.emplace(testing::MakeEngine(config));
  for (uint32_t seq = 0; seq < 4; ++seq) Deliver(FpWorker(shape_, seq, 0, 0, FloatFill(1.0f)));
  EXPECT_EQ(engine_->fp_buffers_in_use(), 4u);
  for (uint32_t seq = 0; seq < 4; ++seq) {
    Deliver(FpWorker(shape_, seq, 0, 1, FloatFill(1.0f)));
    Deliver(FpWorker(shape_, seq, 1, 0, FloatFill(1.0f)));
    Deliver(FpWorker(shape_, seq, 1, 1, FloatFill(1.0f)));
    EXPECT_EQ(engine_->fp_buffers_in_use(), 3u - seq);
  }
  EXPECT_EQ(counters().fp_completed, 4u);
  // A saturated seq and a summed-overflow seq free theirs too.
  Deliver(Level2(shape_, 4, 0b11, Fill(kInt32Max)));
  EXPECT_EQ(engine_->fp_buffers_in_use(), 1u);
  DeliverAllWorkersFp(4, [](int, int) { return 2.0f; });
  EXPECT_EQ(engine_->fp_buffers_in_use(), 0u);
  EXPECT_EQ(FloatAt(sink_.sent.back().payload, 0), 8.0f);
}

}  // namespace
}  // namespace atp::ps
