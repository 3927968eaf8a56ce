// FragmentScheduler: the same operation sequence gives the same assignment on
// every worker, pieces cover operations exactly at fragment boundaries, and
// load stays balanced for skewed tensor mixes.
#include "lib/scheduler/fragment_scheduler.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "atp/wire.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace atp::scheduler {
namespace {

constexpr size_t kF = wire::kValuesPerFragment;

FragmentScheduler Make(uint32_t queues, uint32_t min_piece = 64, uint32_t max_piece = 1024) {
  FragmentSchedulerConfig config;
  config.queues = queues;
  config.min_piece_fragments = min_piece;
  config.max_piece_fragments = max_piece;
  absl::StatusOr<FragmentScheduler> s = FragmentScheduler::Create(config);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

double Imbalance(std::span<const uint64_t> loads) {
  const auto [lo, hi] = std::minmax_element(loads.begin(), loads.end());
  return static_cast<double>(*hi) / static_cast<double>(std::max<uint64_t>(*lo, 1));
}

// A skewed mix: a few huge tensors among many tiny ones (sizes in floats),
// like a model's layers: embeddings, big matrices, biases and norms.
std::vector<size_t> SkewedMix(uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<size_t> sizes;
  for (int layer = 0; layer < 200; ++layer) {
    const uint64_t r = rng() % 100;
    if (r < 2) {
      sizes.push_back(10'000'000 + rng() % 20'000'000);  // embedding-sized
    } else if (r < 20) {
      sizes.push_back(100'000 + rng() % 3'000'000);      // weight matrices
    } else {
      sizes.push_back(1 + rng() % 4096);                 // biases, norms
    }
  }
  return sizes;
}

TEST(FragmentSchedulerTest, SameOperationSequenceGivesIdenticalAssignmentOnEveryWorker) {
  for (uint32_t queues : {1u, 2u, 3u, 4u, 16u}) {
    FragmentScheduler worker_a = Make(queues);
    FragmentScheduler worker_b = Make(queues);
    std::vector<Piece> a;
    std::vector<Piece> b;
    for (size_t size : SkewedMix(queues)) {
      worker_a.Assign(size, a);
      worker_b.Assign(size, b);
    }
    EXPECT_EQ(a, b) << queues << " queues";
    EXPECT_THAT(worker_a.loads(), ::testing::ElementsAreArray(worker_b.loads()));
  }
}

TEST(FragmentSchedulerTest, AssignmentDependsOnlyOnTheSequenceNotOnTiming) {
  // Two workers that interleave their calls differently with unrelated work
  // (here: a third scheduler) still agree: no hidden shared state.
  FragmentScheduler a = Make(4);
  FragmentScheduler other = Make(4);
  FragmentScheduler b = Make(4);
  std::vector<Piece> pa, pb, scratch;
  const std::vector<size_t> sizes = SkewedMix(7);
  for (size_t s : sizes) a.Assign(s, pa);
  for (size_t s : sizes) {
    other.Assign(s * 3 + 1, scratch);
    b.Assign(s, pb);
  }
  EXPECT_EQ(pa, pb);
}

TEST(FragmentSchedulerTest, PiecesCoverTheOperationExactlyAtFragmentBoundaries) {
  FragmentScheduler s = Make(4, /*min_piece=*/8, /*max_piece=*/100);
  for (size_t values : {size_t{1}, size_t{61}, size_t{62}, size_t{63}, size_t{62 * 8},
                        size_t{62 * 8 * 4 + 5}, size_t{1'000'003}}) {
    std::vector<Piece> pieces;
    s.Assign(values, pieces);
    ASSERT_FALSE(pieces.empty());
    size_t next = 0;
    for (const Piece& p : pieces) {
      EXPECT_EQ(p.first_value, next);
      EXPECT_EQ(p.first_value % kF, 0u);
      EXPECT_GT(p.values, 0u);
      EXPECT_LE(p.fragments, 100u);
      EXPECT_EQ(p.fragments, (p.values + kF - 1) / kF);
      next = p.first_value + p.values;
    }
    EXPECT_EQ(next, values);
  }
}

TEST(FragmentSchedulerTest, EmptyOperationHasNoPieces) {
  FragmentScheduler s = Make(4);
  std::vector<Piece> pieces;
  EXPECT_EQ(s.Assign(0, pieces), 0u);
  EXPECT_TRUE(pieces.empty());
  EXPECT_THAT(s.loads(), ::testing::Each(0u));
}

TEST(FragmentSchedulerTest, OneHugeTensorSpreadsOverEveryQueue) {
  FragmentScheduler s = Make(8);
  std::vector<Piece> pieces;
  s.Assign(64 * 1024 * kF, pieces);
  EXPECT_THAT(s.loads(), ::testing::Each(8 * 1024u));
  EXPECT_EQ(pieces.size(), 64u);
}

TEST(FragmentSchedulerTest, MediumTensorIsCutIntoOnePiecePerQueue) {
  // 512 fragments, min piece 64: 4 pieces of 128 on 4 queues, for parallelism.
  FragmentScheduler s = Make(4);
  std::vector<Piece> pieces;
  s.Assign(512 * kF, pieces);
  ASSERT_EQ(pieces.size(), 4u);
  std::vector<uint32_t> queues;
  for (const Piece& p : pieces) queues.push_back(p.queue);
  EXPECT_THAT(queues, ::testing::UnorderedElementsAre(0u, 1u, 2u, 3u));
}

TEST(FragmentSchedulerTest, SmallTensorsGoWholeToTheLeastLoadedQueue) {
  FragmentScheduler s = Make(4);
  std::vector<Piece> pieces;
  s.Assign(10 * kF, pieces);   // queue 0 (all equal: lowest index)
  s.Assign(5 * kF, pieces);    // queue 1
  s.Assign(20 * kF, pieces);   // queue 2
  s.Assign(1, pieces);         // queue 3
  s.Assign(1, pieces);         // queue 3 again: load 2 is still the least
  ASSERT_EQ(pieces.size(), 5u);
  EXPECT_EQ(pieces[0].queue, 0u);
  EXPECT_EQ(pieces[1].queue, 1u);
  EXPECT_EQ(pieces[2].queue, 2u);
  EXPECT_EQ(pieces[3].queue, 3u);
  EXPECT_EQ(pieces[4].queue, 3u);
}

TEST(FragmentSchedulerTest, SkewedMixesStayBalancedWithinOnePointTwoFive) {
  for (uint32_t queues : {2u, 3u, 4u, 8u, 16u}) {
    for (uint32_t seed : {1u, 2u, 3u}) {
      FragmentScheduler s = Make(queues);
      std::vector<Piece> pieces;
      for (size_t size : SkewedMix(seed)) s.Assign(size, pieces);
      EXPECT_LE(Imbalance(s.loads()), 1.25) << queues << " queues, seed " << seed;
    }
  }
}

TEST(FragmentSchedulerTest, OneHugeAmongManySmallStaysBalanced) {
  // The case that defeats "whole tensor per queue": one 100M-float tensor and
  // a thousand tiny ones, in both orders.
  for (bool huge_first : {true, false}) {
    FragmentScheduler s = Make(4);
    std::vector<Piece> pieces;
    if (huge_first) s.Assign(100'000'000, pieces);
    for (int i = 0; i < 1000; ++i) s.Assign(1 + static_cast<size_t>(i) * 37 % 2000, pieces);
    if (!huge_first) s.Assign(100'000'000, pieces);
    EXPECT_LE(Imbalance(s.loads()), 1.25) << (huge_first ? "huge first" : "huge last");
  }
}

TEST(FragmentSchedulerTest, ManySmallTensorsOnlyStayBalanced) {
  FragmentScheduler s = Make(4);
  std::vector<Piece> pieces;
  std::mt19937 rng(5);
  for (int i = 0; i < 5000; ++i) s.Assign(1 + rng() % (63 * kF), pieces);
  EXPECT_LE(Imbalance(s.loads()), 1.25);
}

TEST(FragmentSchedulerTest, InvalidConfigNamesTheField) {
  FragmentSchedulerConfig config;
  config.queues = 17;
  EXPECT_THAT(std::string(config.Validate().message()), ::testing::HasSubstr("queues"));
  config.queues = 4;
  config.min_piece_fragments = 0;
  EXPECT_THAT(std::string(config.Validate().message()),
              ::testing::HasSubstr("min_piece_fragments"));
  config.min_piece_fragments = 10;
  config.max_piece_fragments = 5;
  EXPECT_THAT(std::string(FragmentScheduler::Create(config).status().message()),
              ::testing::HasSubstr("max_piece_fragments"));
}

}  // namespace
}  // namespace atp::scheduler
