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
  // 256 draws from 65536: a handful of birthday collisions at most.
  EXPECT_GT(seen.size(), 250u);
  EXPECT_NE(InitialAggregatorIndex(IndexPolicy::kHashed, 3, 1, 0, 256),
            InitialAggregatorIndex(IndexPolicy::kHashed, 4, 1, 0, 256));
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
