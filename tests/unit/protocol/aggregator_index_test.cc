#include "lib/protocol/aggregator_index.h"

#include <set>

#include "gtest/gtest.h"

namespace atp::protocol {
namespace {

TEST(AggregatorIndexTest, HashedIndicesAreDeterministicAndSpread) {
  std::set<uint16_t> seen;
  for (uint32_t slot = 0; slot < 256; ++slot) {
    uint16_t a = InitialAggregatorIndex(IndexPolicy::kHashed, 3, 1, slot, 256);
    EXPECT_EQ(a, InitialAggregatorIndex(IndexPolicy::kHashed, 3, 1, slot, 256));
    seen.insert(a);
  }
  // One run of consecutive indices: no two slots alike.
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_NE(InitialAggregatorIndex(IndexPolicy::kHashed, 3, 1, 0, 256),
            InitialAggregatorIndex(IndexPolicy::kHashed, 4, 1, 0, 256));
}

// A job's own slots never share an aggregator at a switch with one
// aggregator per slot of every queue: they used to, by the birthday bound,
// and each shared pair cost a detour through the PS and a resend in a run
// with no loss (bench/RESULTS.md, "Why a loss-free run retransmitted").
TEST(AggregatorIndexTest, HashedIndicesOfOneJobNeverShareAnAggregator) {
  for (const uint32_t slots : {4u, 256u, 2048u, 4096u}) {
    for (const uint32_t queues : {1u, 4u, 16u}) {
      const uint64_t run = uint64_t{slots} * queues;
      if (run > 65536) continue;
      // Power-of-two and other aggregator counts, down to exactly the run.
      for (const uint64_t aggregators : {run, run + 1, uint64_t{5000}, uint64_t{65536}}) {
        if (aggregators < run) continue;
        for (const uint8_t job : {uint8_t{1}, uint8_t{2}, uint8_t{77}, uint8_t{255}}) {
          std::set<uint64_t> used;
          for (uint32_t q = 0; q < queues; ++q) {
            for (uint32_t slot = 0; slot < slots; ++slot) {
              used.insert(InitialAggregatorIndex(IndexPolicy::kHashed, job, q, slot, slots) %
                          aggregators);
            }
          }
          EXPECT_EQ(used.size(), run) << "job " << int{job} << ", " << queues << " queue(s) x "
                                      << slots << " slots, " << aggregators << " aggregators";
        }
      }
    }
  }
}

// Jobs still start at different places of the array (their runs are spread
// by the hash of the job).
TEST(AggregatorIndexTest, HashedRunsOfDifferentJobsStartApart) {
  std::set<uint16_t> bases;
  for (int job = 1; job <= 255; ++job) {
    bases.insert(InitialAggregatorIndex(IndexPolicy::kHashed, static_cast<uint8_t>(job), 0, 0, 256));
  }
  EXPECT_GT(bases.size(), 250u);
}

TEST(AggregatorIndexTest, SequentialIndicesIgnoreTheJob) {
  EXPECT_EQ(InitialAggregatorIndex(IndexPolicy::kSequential, 3, 2, 5, 64), 2 * 64 + 5);
  EXPECT_EQ(InitialAggregatorIndex(IndexPolicy::kSequential, 9, 2, 5, 64), 2 * 64 + 5);
}

TEST(AggregatorIndexTest, RehashNeverReturnsTheOldIndex) {
  for (uint32_t i = 0; i < 5000; ++i) {
    auto old_index = static_cast<uint16_t>(i * 13);
    EXPECT_NE(RehashAggregatorIndex(5, i, old_index), old_index);
  }
}

}  // namespace
}  // namespace atp::protocol
