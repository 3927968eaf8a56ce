// The PS engine's parts: configuration, coverage (the duplicate rule), the
// float buffer pool and the float sum.
#include <bit>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "lib/ps/coverage.h"
#include "lib/ps/fp_buffer_pool.h"
#include "lib/ps/job_layout.h"
#include "lib/ps/ps_config.h"
#include "lib/ps/ps_engine.h"
#include "lib/ps/sums.h"

namespace atp::ps {
namespace {

using protocol::JobShape;

bool MessageHas(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != std::string::npos;
}

TEST(PsConfigTest, ValidateNamesTheField) {
  PsConfig config;
  EXPECT_TRUE(MessageHas(config.Validate(), "PsConfig.jobs"));
  config.jobs = {JobShape::Uniform(3, 1, 1), JobShape::Uniform(3, 2, 2)};
  EXPECT_TRUE(MessageHas(config.Validate(), "PsConfig.jobs[1].job"));
  config.jobs = {JobShape::Uniform(3, 1, 33)};
  EXPECT_TRUE(MessageHas(config.Validate(), "PsConfig.jobs[0]: JobShape.workers_per_rack[0]"));
  config.jobs = {JobShape::Uniform(3, 1, 1)};
  EXPECT_TRUE(config.Validate().ok());
  config.slots = 12;
  EXPECT_TRUE(MessageHas(config.Validate(), "PsConfig.slots"));
  config.slots = 0;
  EXPECT_TRUE(MessageHas(config.Validate(), "PsConfig.slots"));
  config.slots = kMaxSlots * 2;
  EXPECT_TRUE(MessageHas(config.Validate(), "PsConfig.slots"));
  config.slots = kMaxSlots;
  EXPECT_TRUE(config.Validate().ok());
  config.shard_count = 17;
  EXPECT_TRUE(MessageHas(config.Validate(), "PsConfig.shard_count"));
  config.shard_count = 2;
  config.shard_index = 2;
  EXPECT_TRUE(MessageHas(config.Validate(), "PsConfig.shard_index"));
  config.shard_index = 1;
  EXPECT_TRUE(config.Validate().ok());
  EXPECT_EQ(config.ServedQueues(), 8u);
}

TEST(PsConfigTest, CreateRejectsInvalidConfig) {
  PsConfig config;
  config.jobs = {JobShape::Uniform(3, 1, 1)};
  config.slots = 3;
  absl::StatusOr<PsEngine> engine = PsEngine::Create(config);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CoverageTest, DeclaredFanInsFixTheContributorSetPerSeq) {
  // SkipReduce's contribution variant: a job of 2 racks x 3 whose fragment
  // has 2 contributing racks, the first with 2 contributors, the second 1.
  const JobLayout layout(JobShape{.job = 1, .workers_per_rack = {3, 3}}, /*declared_fan_ins=*/true);
  wire::AtpHeader h;
  h.job = 1;
  h.fan_in1 = 2;
  h.bitmap1 = 0b01;
  h.fan_in0 = 2;
  h.bitmap0 = 0b10;
  Contributors who;
  ASSERT_EQ(layout.Parse(h, &who), ParseOutcome::kOk);
  Coverage coverage;
  ASSERT_EQ(coverage.TryAdd(layout, who), AddOutcome::kAdded);
  EXPECT_FALSE(coverage.IsComplete(layout));
  // The same rack declaring another count, or the seq another rack count: mismatch.
  h.bitmap0 = 0b01;
  h.fan_in0 = 3;
  ASSERT_EQ(layout.Parse(h, &who), ParseOutcome::kOk);
  EXPECT_EQ(coverage.TryAdd(layout, who), AddOutcome::kMismatch);
  h.fan_in0 = 2;
  h.fan_in1 = 1;
  ASSERT_EQ(layout.Parse(h, &who), ParseOutcome::kOk);
  EXPECT_EQ(coverage.TryAdd(layout, who), AddOutcome::kMismatch);
  h.fan_in1 = 2;
  ASSERT_EQ(layout.Parse(h, &who), ParseOutcome::kOk);
  ASSERT_EQ(coverage.TryAdd(layout, who), AddOutcome::kAdded);
  EXPECT_FALSE(coverage.IsComplete(layout));
  // The second contributing rack's only contributor completes the seq.
  h.bitmap1 = 0b10;
  h.fan_in0 = 1;
  ASSERT_EQ(layout.Parse(h, &who), ParseOutcome::kOk);
  ASSERT_EQ(coverage.TryAdd(layout, who), AddOutcome::kAdded);
  EXPECT_TRUE(coverage.IsComplete(layout));
  // Beyond the shape: more racks or workers than the job has.
  h.fan_in1 = 3;
  h.bitmap1 = 0b100;
  EXPECT_EQ(layout.Parse(h, &who), ParseOutcome::kShapeMismatch);
  h.fan_in1 = 2;
  h.bitmap1 = 0b01;
  h.fan_in0 = 4;
  EXPECT_EQ(layout.Parse(h, &who), ParseOutcome::kShapeMismatch);
  // A job without declared fan-ins refuses the same header.
  const JobLayout strict(JobShape{.job = 1, .workers_per_rack = {3, 3}});
  h.fan_in0 = 2;
  EXPECT_EQ(strict.Parse(h, &who), ParseOutcome::kShapeMismatch);
}

TEST(PsConfigTest, ContributionSkippingNamesAConfiguredJob) {
  PsConfig config;
  config.jobs.push_back(JobShape::Uniform(3, 1, 2));
  config.contribution_skipping_jobs = {4};
  const absl::Status status = config.Validate();
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("PsConfig.contribution_skipping_jobs[0]"), std::string::npos)
      << status;
  config.contribution_skipping_jobs = {3};
  EXPECT_TRUE(config.Validate().ok());
}

TEST(CoverageTest, OverlapChangesNothing) {
  const JobLayout layout(JobShape{.job = 1, .workers_per_rack = {4, 2}});
  Coverage coverage;
  using Level = Contributors::Level;
  ASSERT_EQ(coverage.TryAdd(layout, {Level::kRackWorkers, 0, 0b0011, 0}), AddOutcome::kAdded);
  EXPECT_EQ(coverage.TryAdd(layout, {Level::kRackWorkers, 0, 0b0110, 0}), AddOutcome::kOverlap);
  EXPECT_EQ(coverage.workers(0), 0b0011u);
  EXPECT_EQ(coverage.TryAdd(layout, {Level::kWholeRacks, 0, 0, 0b11}), AddOutcome::kOverlap);
  EXPECT_EQ(coverage.workers(1), 0u);
  EXPECT_TRUE(coverage.CoversAll({Level::kRackWorkers, 0, 0b0001, 0}));
  EXPECT_FALSE(coverage.CoversAll({Level::kRackWorkers, 0, 0b0101, 0}));
  ASSERT_EQ(coverage.TryAdd(layout, {Level::kWholeRacks, 0, 0, 0b10}), AddOutcome::kAdded);
  EXPECT_FALSE(coverage.IsComplete(layout));
  EXPECT_TRUE(coverage.CoversAll({Level::kWholeRacks, 0, 0, 0b10}));
  ASSERT_EQ(coverage.TryAdd(layout, {Level::kRackWorkers, 0, 0b1100, 0}), AddOutcome::kAdded);
  EXPECT_TRUE(coverage.IsComplete(layout));
  coverage.Clear();
  EXPECT_FALSE(coverage.IsComplete(layout));
  EXPECT_EQ(coverage.workers(0), 0u);
}

TEST(CoverageTest, ClearForgetsEveryRackAnyPathCovered) {
  // Clear writes only the racks it saw covered: whatever covered them (one
  // rack's workers, whole racks, declared fan-ins), none stays covered.
  using Level = Contributors::Level;
  const JobLayout layout(JobShape{.job = 1, .workers_per_rack = {2, 2, 2, 2}});
  const JobLayout declared(JobShape{.job = 1, .workers_per_rack = {2, 2, 2, 2}},
                           /*declared_fan_ins=*/true);
  Coverage coverage;
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(coverage.TryAdd(layout, {Level::kRackWorkers, 1, 0b01, 0}), AddOutcome::kAdded);
    ASSERT_EQ(coverage.TryAdd(layout, {Level::kWholeRacks, 0, 0, 0b1100}), AddOutcome::kAdded);
    coverage.Clear();
    for (int rack = 0; rack < 4; ++rack) EXPECT_EQ(coverage.workers(rack), 0u) << rack;
    EXPECT_EQ(coverage.complete_racks(), 0u);
    // Every worker can contribute again, and only all of them complete it.
    for (int rack = 0; rack < 4; ++rack) {
      EXPECT_FALSE(coverage.IsComplete(layout));
      ASSERT_EQ(coverage.TryAdd(layout, {Level::kRackWorkers, rack, 0b11, 0}), AddOutcome::kAdded)
          << rack;
    }
    EXPECT_TRUE(coverage.IsComplete(layout));
    coverage.Clear();
  }
  Contributors who{Level::kRackWorkers, 2, 0b10, 0};
  who.rack_target = 0b10;
  who.racks_target = 0b0100;
  ASSERT_EQ(coverage.TryAdd(declared, who), AddOutcome::kAdded);
  EXPECT_EQ(coverage.declared_workers(2), 0b10u);
  coverage.Clear();
  EXPECT_EQ(coverage.declared_workers(2), 0u);
  EXPECT_EQ(coverage.workers(2), 0u);
  // A rack declaring another target is no mismatch after the Clear.
  who.rack_target = 0b11;
  who.workers = 0b01;
  EXPECT_EQ(coverage.TryAdd(declared, who), AddOutcome::kAdded);
}

TEST(JobLayoutTest, WorkerOrderIsRackMajor) {
  const JobLayout layout(JobShape{.job = 1, .workers_per_rack = {3, 5, 2}});
  EXPECT_EQ(layout.total_workers(), 10);
  EXPECT_EQ(layout.max_rack_workers(), 5);
  EXPECT_EQ(layout.worker_index(0, 2), 2);
  EXPECT_EQ(layout.worker_index(1, 0), 3);
  EXPECT_EQ(layout.worker_index(2, 1), 9);
}

TEST(FpBufferPoolTest, ShrinksBackToItsIdleSize) {
  FpBufferPool pool(/*floats_per_buffer=*/62, /*idle_buffers=*/1);
  FpBufferPool::Buffer a = pool.Acquire();
  float* reused = a.get();
  FpBufferPool::Buffer b = pool.Acquire();  // beyond the idle one: allocated
  EXPECT_EQ(pool.in_use(), 2u);
  pool.Release(std::move(a));
  pool.Release(std::move(b));  // freed: the pool keeps one
  EXPECT_EQ(pool.in_use(), 0u);
  FpBufferPool::Buffer c = pool.Acquire();
  EXPECT_EQ(c.get(), reused);
  pool.Release(std::move(c));
}

TEST(SumsTest, BoundsAndOpenRange) {
  wire::Payload p{};
  EXPECT_FALSE(HasInt32Bound(p));
  p[61] = 0x80000000u;
  EXPECT_TRUE(HasInt32Bound(p));
  p[61] = 0x7FFFFFFFu;
  EXPECT_TRUE(HasInt32Bound(p));
  // Their neighbours are no bounds; a bound counts at every position.
  for (uint32_t near : {0x7FFFFFFEu, 0x80000001u, 0xFFFFFFFFu, 0u, 1u}) {
    p.fill(near);
    EXPECT_FALSE(HasInt32Bound(p)) << near;
  }
  for (size_t i = 0; i < p.size(); ++i) {
    p.fill(0x80000001u);
    p[i] = i % 2 == 0 ? 0x7FFFFFFFu : 0x80000000u;
    EXPECT_TRUE(HasInt32Bound(p)) << i;
  }
  IntSums sums{};
  sums[3] = std::numeric_limits<int32_t>::max() - 1;
  sums[4] = std::numeric_limits<int32_t>::min() + 1;
  EXPECT_TRUE(SumsFitOpenInt32(sums));
  sums[4] -= 1;
  EXPECT_FALSE(SumsFitOpenInt32(sums));
}

TEST(SumsTest, FloatSumOfNegativeZeroStaysNegative) {
  float rows[2 * wire::kValuesPerFragment];
  for (float& v : rows) v = -0.0f;
  wire::Payload out{};
  SumFloatRowsInOrder(rows, 2, out);
  EXPECT_EQ(out[0], std::bit_cast<uint32_t>(-0.0f));
}

}  // namespace
}  // namespace atp::ps
