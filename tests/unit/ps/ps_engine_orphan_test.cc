// The PS's orphan release (ATP-SPEC invariant 5): state of a seq whose
// workers died or gave up is released after PsConfig::orphan_timeout without
// a message, never before, and never while a worker still resends; memory
// (float buffers) and live slots go back to their idle values. Time is a fake
// clock: every call takes `now` explicitly.
#include <cstdint>
#include <optional>
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
using testing::RecordingSink;
using testing::Worker;

constexpr TimeDelta kTimeout = TimeDelta::FromMilliseconds(10);
constexpr TimeDelta kNs = TimeDelta::FromNanoseconds(1);
constexpr TimePoint kT0 = TimePoint::FromNanoseconds(1'000'000'000);

class PsOrphanTest : public ::testing::Test {
 protected:
  // Start: one job of one rack of `workers` workers, slots 8, the orphan
  // timeout kTimeout; `scan_per_message` as PsConfig.
  void Start(int workers = 2, uint32_t scan_per_message = 0, uint32_t fp_pool_buffers = 2) {
    shape_ = JobShape::Uniform(7, 1, workers);
    PsConfig config = testing::ConfigFor({shape_}, /*slots=*/8);
    config.orphan_timeout = kTimeout;
    config.orphan_scan_per_message = scan_per_message;
    config.fp_pool_buffers = fp_pool_buffers;
    engine_.emplace(testing::MakeEngine(config));
  }
  void Deliver(const wire::AtpMessage& message, TimePoint now) {
    engine_->OnGradient(message, now, sink_);
  }
  // ScanAll: a full pass at `now`; how many were released.
  size_t ScanAll(TimePoint now) { return engine_->ScanOrphans(now, engine_->total_slots()); }
  const PsCounters& counters() const { return engine_->counters(); }

  void ExpectIdle() {
    EXPECT_EQ(engine_->live_slots(), 0u);
    EXPECT_EQ(engine_->fp_buffers_in_use(), 0u);
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

TEST_F(PsOrphanTest, AbandonedFloatSeqIsReleasedAfterTheTimeoutNotBefore) {
  Start();
  Deliver(FpWorker(shape_, 0, 0, 0, FloatFill(1.5f)), kT0);  // worker 1 never answers
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_TRUE(sink_.sent[0].header.IsOverflowRequest());
  EXPECT_EQ(engine_->fp_buffers_in_use(), 1u);
  EXPECT_EQ(engine_->live_slots(), 1u);

  EXPECT_EQ(ScanAll(kT0 + kTimeout / 2), 0u);
  EXPECT_EQ(ScanAll(kT0 + kTimeout), 0u) << "exactly the timeout: not yet";
  EXPECT_EQ(engine_->fp_buffers_in_use(), 1u);
  EXPECT_EQ(counters().orphans_released, 0u);

  EXPECT_EQ(ScanAll(kT0 + kTimeout + kNs), 1u);
  EXPECT_EQ(counters().orphans_released, 1u);
  ExpectIdle();
  EXPECT_EQ(ScanAll(kT0 + kTimeout * 100), 0u) << "released once";
  EXPECT_EQ(counters().orphans_released, 1u);
  EXPECT_EQ(sink_.sent.size(), 1u) << "releasing sends nothing";
}

TEST_F(PsOrphanTest, AbandonedIntegerPartialIsReleased) {
  Start(/*workers=*/3);
  Deliver(Worker(shape_, 0, 0, 0, Fill(5)), kT0);
  Deliver(Worker(shape_, 0, 0, 1, Fill(6)), kT0 + kNs);
  EXPECT_EQ(engine_->live_slots(), 1u);
  EXPECT_EQ(ScanAll(kT0 + kTimeout), 0u);  // 1 ns after the last message is within
  EXPECT_EQ(ScanAll(kT0 + kTimeout + kNs * 2), 1u);
  ExpectIdle();
  EXPECT_EQ(counters().orphans_released, 1u);

  // The workers come back (their resends): the released partial is not
  // counted twice, nothing is a duplicate, and the sum is exact.
  const TimePoint later = kT0 + kTimeout * 3;
  Deliver(Worker(shape_, 0, 0, 0, Fill(5)), later);
  Deliver(Worker(shape_, 0, 0, 1, Fill(6)), later);
  Deliver(Worker(shape_, 0, 0, 2, Fill(7)), later);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_EQ(IntAt(sink_.sent[0].payload, 0), 18);
  EXPECT_EQ(counters().duplicates, 0u);
  EXPECT_EQ(counters().contributions, 5u);
  ExpectIdle();
}

TEST_F(PsOrphanTest, ResendsWithinTheTimeoutKeepTheSeq) {
  Start(/*workers=*/3);
  TimePoint t = kT0;
  Deliver(FpWorker(shape_, 0, 0, 0, FloatFill(0.25f)), t);
  // Worker 0 resends (a duplicate) and worker 2's integer packet arrives late
  // (it missed the overflow request), each within the timeout of the last
  // message: the seq is alive for a long time.
  for (int i = 0; i < 10; ++i) {
    t += kTimeout - kNs;
    EXPECT_EQ(ScanAll(t), 0u);
    if (i % 2 == 0) {
      Deliver(FpWorker(shape_, 0, 0, 0, FloatFill(0.25f)), t);
    } else {
      Deliver(Worker(shape_, 0, 0, 2, Fill(1)), t);
    }
    EXPECT_EQ(ScanAll(t + kTimeout), 0u);
  }
  EXPECT_EQ(counters().orphans_released, 0u);
  EXPECT_EQ(counters().duplicates, 5u);
  EXPECT_EQ(counters().integer_on_float_path, 5u);
  EXPECT_EQ(engine_->fp_buffers_in_use(), 1u);

  // The stragglers finally answer: the float sum includes worker 0's first row.
  sink_.TakeAll();
  Deliver(FpWorker(shape_, 0, 0, 1, FloatFill(0.5f)), t + kTimeout);
  Deliver(FpWorker(shape_, 0, 0, 2, FloatFill(1.0f)), t + kTimeout);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_TRUE(sink_.sent[0].header.fp);
  EXPECT_EQ(FloatAt(sink_.sent[0].payload, 0), 1.75f);
  EXPECT_EQ(counters().orphans_released, 0u);
  ExpectIdle();
}

TEST_F(PsOrphanTest, AMessageForAnExpiredSeqStartsItAfreshWithoutAScan) {
  Start(/*workers=*/2, /*scan_per_message=*/0);
  Deliver(FpWorker(shape_, 0, 0, 0, FloatFill(2.0f)), kT0);
  sink_.TakeAll();
  // No scan ran; worker 1's row arrives after the timeout: worker 0's row is
  // an orphan and is dropped first, so the seq does not complete with it.
  Deliver(FpWorker(shape_, 0, 0, 1, FloatFill(3.0f)), kT0 + kTimeout + kNs);
  EXPECT_EQ(counters().orphans_released, 1u);
  ASSERT_EQ(sink_.sent.size(), 1u);
  EXPECT_TRUE(sink_.sent[0].header.IsOverflowRequest()) << "asks worker 0 for its row again";
  EXPECT_EQ(engine_->fp_buffers_in_use(), 1u);
  EXPECT_EQ(engine_->live_slots(), 1u);
  Deliver(FpWorker(shape_, 0, 0, 0, FloatFill(2.0f)), kT0 + kTimeout * 2);
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_TRUE(sink_.sent[1].header.fp);
  EXPECT_EQ(FloatAt(sink_.sent[1].payload, 0), 5.0f);
  ExpectIdle();
}

TEST_F(PsOrphanTest, ManyOrphansAboveThePoolGoBackToTheIdleSize) {
  Start(/*workers=*/2, /*scan_per_message=*/0, /*fp_pool_buffers=*/2);
  const size_t baseline_live = engine_->live_slots();
  const size_t baseline_fp = engine_->fp_buffers_in_use();
  // Every slot of every queue: 16 x 8 = 128 live seqs, half of them on the
  // float path (64 buffers, 62 beyond the pool's idle two).
  size_t started = 0;
  for (uint32_t q = 0; q < 16; ++q) {
    for (uint32_t p = 0; p < 8; ++p) {
      const uint32_t seq = wire::MakeSeq(q, p);
      if (p % 2 == 0) {
        Deliver(FpWorker(shape_, seq, 0, 0, FloatFill(1.0f)), kT0);
      } else {
        Deliver(Worker(shape_, seq, 0, 1, Fill(1)), kT0);
      }
      ++started;
    }
  }
  EXPECT_EQ(engine_->total_slots(), started);
  EXPECT_EQ(engine_->live_slots(), started);
  EXPECT_EQ(engine_->fp_buffers_in_use(), started / 2);

  // A budget of 10 slots per call: a full pass takes 13 calls, no more.
  const TimePoint late = kT0 + kTimeout + kNs;
  size_t released = 0;
  int calls = 0;
  while (engine_->live_slots() > 0 && calls < 100) {
    const size_t n = engine_->ScanOrphans(late, 10);
    EXPECT_LE(n, 10u);
    released += n;
    ++calls;
  }
  EXPECT_EQ(calls, 13);
  EXPECT_EQ(released, started);
  EXPECT_EQ(counters().orphans_released, started);
  EXPECT_EQ(engine_->live_slots(), baseline_live);
  EXPECT_EQ(engine_->fp_buffers_in_use(), baseline_fp);
  EXPECT_EQ(engine_->ScanOrphans(late, 1000), 0u);
}

TEST_F(PsOrphanTest, TheScanStepInsideOnGradientFreesOtherSlots) {
  // scan_per_message = every slot: one message anywhere frees every orphan.
  Start(/*workers=*/2, /*scan_per_message=*/16 * 8);
  Deliver(FpWorker(shape_, wire::MakeSeq(3, 5), 0, 0, FloatFill(1.0f)), kT0);
  Deliver(Worker(shape_, wire::MakeSeq(9, 2), 0, 0, Fill(4)), kT0);
  EXPECT_EQ(engine_->live_slots(), 2u);
  // Traffic of another, live seq after the timeout.
  Deliver(Worker(shape_, wire::MakeSeq(0, 0), 0, 0, Fill(1)), kT0 + kTimeout + kNs);
  EXPECT_EQ(counters().orphans_released, 2u);
  EXPECT_EQ(engine_->live_slots(), 1u);  // only the new seq
  EXPECT_EQ(engine_->fp_buffers_in_use(), 0u);
}

TEST_F(PsOrphanTest, TheLastCompletedPacketSurvivesAReleaseOfTheNextGeneration) {
  Start();
  Deliver(Worker(shape_, 0, 0, 0, Fill(2)), kT0);
  Deliver(Worker(shape_, 0, 0, 1, Fill(3)), kT0);
  ASSERT_EQ(sink_.sent.size(), 1u);
  const wire::AtpMessage result = sink_.sent[0];
  // Slot 0's next generation (position 8) starts and is abandoned.
  Deliver(Worker(shape_, 8, 0, 0, Fill(9)), kT0);
  EXPECT_EQ(ScanAll(kT0 + kTimeout + kNs), 1u);
  ExpectIdle();
  // A worker that lost position 0's parameter packet still gets it.
  wire::AtpMessage resend = Worker(shape_, 0, 0, 1, Fill(3));
  resend.header.resend = true;
  Deliver(resend, kT0 + kTimeout * 5);
  ASSERT_EQ(sink_.sent.size(), 2u);
  EXPECT_EQ(counters().param_resent, 1u);
  EXPECT_EQ(sink_.sent[1].header, result.header);
  EXPECT_EQ(IntAt(sink_.sent[1].payload, 0), 5);
}

TEST_F(PsOrphanTest, CompletedSeqsLeaveNothingToRelease) {
  Start();
  for (uint32_t p = 0; p < 64; ++p) {
    Deliver(FpWorker(shape_, p, 0, 0, FloatFill(1.0f)), kT0);
    Deliver(FpWorker(shape_, p, 0, 1, FloatFill(1.0f)), kT0);
  }
  EXPECT_EQ(counters().fp_completed, 64u);
  ExpectIdle();
  EXPECT_EQ(ScanAll(kT0 + kTimeout * 10), 0u);
  EXPECT_EQ(counters().orphans_released, 0u);
}

TEST(PsOrphanConfigTest, InfiniteTimeoutNeverReleases) {
  const JobShape shape = JobShape::Uniform(7, 1, 2);
  PsConfig config = testing::ConfigFor({shape});
  config.orphan_timeout = TimeDelta::Infinite();
  PsEngine engine = testing::MakeEngine(config);
  RecordingSink sink;
  engine.OnGradient(FpWorker(shape, 0, 0, 0, FloatFill(1.0f)), kT0, sink);
  EXPECT_EQ(engine.ScanOrphans(TimePoint::FromNanoseconds(INT64_MAX / 2), 1000), 0u);
  EXPECT_EQ(engine.live_slots(), 1u);
  EXPECT_EQ(engine.OrphanScanBudget(TimeDelta::FromMilliseconds(1)), 1u);
}

TEST(PsOrphanConfigTest, TimeoutMustBePositive) {
  PsConfig config = testing::ConfigFor({JobShape::Uniform(7, 1, 2)});
  config.orphan_timeout = TimeDelta::Zero();
  const absl::Status status = config.Validate();
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_NE(status.message().find("PsConfig.orphan_timeout"), absl::string_view::npos) << status;
  EXPECT_EQ(PsConfig{}.orphan_timeout, TimeDelta::FromSeconds(2)) << "documented default";
}

TEST(PsOrphanConfigTest, ScanBudgetCoversEverySlotWithinAQuarterOfTheTimeout) {
  PsConfig config = testing::ConfigFor({JobShape::Uniform(7, 1, 2)}, /*slots=*/256);
  config.orphan_timeout = TimeDelta::FromSeconds(2);  // a pass every 500 ms
  PsEngine engine = testing::MakeEngine(config);
  ASSERT_EQ(engine.total_slots(), 16u * 256u);
  // Called every 1 ms: 500 calls per pass.
  const size_t budget = engine.OrphanScanBudget(TimeDelta::FromMilliseconds(1));
  EXPECT_EQ(budget, (4096u + 499u) / 500u);
  EXPECT_GE(budget * 500, engine.total_slots());
  EXPECT_EQ(engine.OrphanScanBudget(TimeDelta::FromSeconds(1)), engine.total_slots());
  EXPECT_EQ(engine.OrphanScanBudget(TimeDelta::Zero()), engine.total_slots());
  EXPECT_EQ(engine.OrphanScanBudget(TimeDelta::FromNanoseconds(1)), 1u);
}

}  // namespace
}  // namespace atp::ps
