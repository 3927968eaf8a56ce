// Tests of RingAllreduce (atp/collectives.h): ranks are threads of this
// process over gloo's TCP transport on 127.0.0.1, meeting through gloo's
// HashStore. Every rank's input identifies it (rank r adds 2^r to each
// element), so a result says exactly whose contributions it holds; the
// expected values come from the literal ring in ring_reference.h, not from
// SkipPlan.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/collectives.h"
#include "atp/skip_reduce.h"
#include "gloo/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "tests/unit/collectives/ring_reference.h"

namespace atp::collectives {
namespace {

// RankGroup: `ranks` connected gloo contexts, one per thread of Run.
class RankGroup {
 public:
  explicit RankGroup(int ranks) : contexts_(static_cast<size_t>(ranks)) {
    std::vector<absl::Status> statuses(contexts_.size());
    Each([&](int r) {
      absl::StatusOr<std::shared_ptr<gloo::Context>> context =
          Connect(store_, ConnectOptions{.rank = r, .ranks = ranks, .timeout = absl::Seconds(20)});
      statuses[r] = context.status();
      if (context.ok()) contexts_[r] = *context;
    });
    for (const absl::Status& status : statuses) EXPECT_TRUE(status.ok()) << status;
  }

  int ranks() const { return static_cast<int>(contexts_.size()); }
  gloo::Context& context(int r) { return *contexts_[r]; }
  std::shared_ptr<gloo::Context> shared_context(int r) { return contexts_[r]; }

  // Each: runs fn(rank) on one thread per rank and joins them.
  template <typename Fn>
  void Each(Fn fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < static_cast<int>(contexts_.size()); ++r) threads.emplace_back(fn, r);
    for (std::thread& t : threads) t.join();
  }

 private:
  gloo::rendezvous::HashStore store_;
  std::vector<std::shared_ptr<gloo::Context>> contexts_;
};

// Input: rank r's element i is 2^r + 256 * (i % 5): sums of distinct ranks
// are exact in float32 and their low byte is the set of contributors.
float Input(int rank, size_t i) { return static_cast<float>((1 << rank) + 256 * (i % 5)); }

std::vector<std::vector<float>> Inputs(int ranks, size_t count) {
  std::vector<std::vector<float>> data(static_cast<size_t>(ranks), std::vector<float>(count));
  for (int r = 0; r < ranks; ++r) {
    for (size_t i = 0; i < count; ++i) data[r][i] = Input(r, i);
  }
  return data;
}

// Expected: what rank `rank` must hold, from the reference outcome.
std::vector<float> Expected(const ring_reference::RingOutcome& outcome, int rank, size_t count,
                            const RingAllreduceOptions& options) {
  const int ranks = static_cast<int>(outcome.contributors.size());
  std::vector<float> expected(count, 0.0f);
  for (int j = 0; j < ranks; ++j) {
    const std::set<int>& held = outcome.contributors[rank][j];
    const ElementRange slice = SliceRange(count, ranks, j);
    for (size_t i = slice.begin; i < slice.begin + slice.size; ++i) {
      float sum = 0.0f;
      for (const int c : held) sum += Input(c, i);
      if (options.op == ReduceOp::kAverage && !held.empty()) {
        const int divisor = options.skip.divisor == SkipDivisor::kContributors
                                ? ranks - options.skip.reduce_scatter_steps
                                : ranks;
        sum *= 1.0f / static_cast<float>(divisor);
      }
      expected[i] = sum;
    }
  }
  return expected;
}

// RunAndCheck: one allreduce on every rank; each rank's result must equal
// the reference exactly (and, without all-gather skipping, all ranks alike).
void RunAndCheck(RankGroup& group, size_t count, const RingAllreduceOptions& options) {
  const int n = group.ranks();
  std::vector<std::vector<float>> data = Inputs(n, count);
  std::vector<absl::Status> statuses(static_cast<size_t>(n));
  group.Each([&](int r) { statuses[r] = RingAllreduce(group.context(r), data[r], options); });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  const int shift = options.skip.mode == SkipMode::kRandom
                        ? RandomShift(options.skip.seed, options.skip.iteration,
                                      options.skip.tensor, n)
                        : 0;
  const ring_reference::RingOutcome outcome = ring_reference::SimulateRing(
      n, options.skip.reduce_scatter_steps, options.skip.all_gather_steps, shift);
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE(::testing::Message() << "ranks=" << n << " rank=" << r << " count=" << count
                                    << " k=" << options.skip.reduce_scatter_steps
                                    << " g=" << options.skip.all_gather_steps
                                    << " shift=" << shift);
    ASSERT_EQ(data[r], Expected(outcome, r, count, options));
    if (options.skip.all_gather_steps == 0) {
      ASSERT_EQ(data[r], data[0]);
    }
  }
}

// ExpectEveryRankRefuses: one allreduce where rank r passes counts[r] values;
// every rank must return InvalidArgument containing `message` (no abort, no
// timeout: the refusal is unanimous) and leave its data untouched.
void ExpectEveryRankRefuses(RankGroup& group, const std::vector<size_t>& counts,
                            const std::string& message) {
  const int n = group.ranks();
  ASSERT_EQ(counts.size(), static_cast<size_t>(n));
  std::vector<std::vector<float>> data(counts.size());
  for (int r = 0; r < n; ++r) data[r].assign(counts[r], 1.0f);
  std::vector<absl::Status> statuses(static_cast<size_t>(n));
  RingAllreduceOptions options;
  options.chunk_bytes = 16;             // several messages per slice
  options.timeout = absl::Seconds(10);  // a rank left waiting fails as Unavailable
  group.Each([&](int r) { statuses[r] = RingAllreduce(group.context(r), data[r], options); });
  for (int r = 0; r < n; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << statuses[r];
    EXPECT_NE(statuses[r].message().find(message), absl::string_view::npos) << statuses[r];
    EXPECT_EQ(data[r], std::vector<float>(counts[r], 1.0f));
  }
}

class RingAllreduceTest : public ::testing::TestWithParam<int> {};

TEST_P(RingAllreduceTest, PlainAllreduceMatchesGlooAndTheSum) {
  RankGroup group(GetParam());
  const int n = group.ranks();
  for (const size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    RingAllreduceOptions options;
    options.chunk_bytes = 64;  // many chunks per slice
    RunAndCheck(group, count, options);
  }
  // gloo's own ring on the same contexts gives the same sums.
  std::vector<std::vector<float>> ours = Inputs(n, 4099);
  std::vector<std::vector<float>> theirs = ours;
  std::vector<absl::Status> statuses(static_cast<size_t>(2 * n));
  group.Each([&](int r) {
    statuses[r] = RingAllreduce(group.context(r), ours[r], RingAllreduceOptions{});
    statuses[n + r] = GlooAllreduce(group.shared_context(r), theirs[r]);
  });
  for (const absl::Status& status : statuses) ASSERT_TRUE(status.ok()) << status;
  for (int r = 0; r < n; ++r) EXPECT_EQ(ours[r], theirs[r]);
}

TEST_P(RingAllreduceTest, StaticSkipHoldsExactlyTheReferenceContributions) {
  RankGroup group(GetParam());
  for (int k = 1; k < group.ranks(); ++k) {
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      RingAllreduceOptions options;
      options.op = op;
      options.chunk_bytes = 16;
      options.window_chunks = 3;
      options.skip = SkipOptions{.mode = SkipMode::kStatic, .reduce_scatter_steps = k};
      RunAndCheck(group, 501, options);
    }
  }
}

TEST_P(RingAllreduceTest, RandomSkipFollowsTheIterationsShift) {
  RankGroup group(GetParam());
  const int k = group.ranks() / 2;
  for (uint64_t iteration = 0; iteration < 4; ++iteration) {
    RingAllreduceOptions options;
    options.chunk_bytes = 128;
    options.skip = SkipOptions{.mode = SkipMode::kRandom, .reduce_scatter_steps = k};
    options.skip.seed = 11;
    options.skip.iteration = iteration;
    options.skip.tensor = 2;
    RunAndCheck(group, 333, options);
  }
}

TEST_P(RingAllreduceTest, DropReduceDividesByTheContributors) {
  RankGroup group(GetParam());
  RingAllreduceOptions options;
  options.op = ReduceOp::kAverage;
  options.skip = SkipOptions{.mode = SkipMode::kStatic,
                             .reduce_scatter_steps = group.ranks() - 1,
                             .divisor = SkipDivisor::kContributors};
  RunAndCheck(group, 64, options);
  options.skip.reduce_scatter_steps = (group.ranks() - 1) / 2;
  RunAndCheck(group, 64, options);
}

TEST_P(RingAllreduceTest, SkippedAllGatherStepsLeaveZerosThatDifferByRank) {
  RankGroup group(GetParam());
  for (int g = 1; g < group.ranks(); ++g) {
    RingAllreduceOptions options;
    options.chunk_bytes = 32;
    options.skip = SkipOptions{.mode = SkipMode::kRandom, .reduce_scatter_steps = 0,
                               .all_gather_steps = g};
    options.skip.iteration = static_cast<uint64_t>(g);
    RunAndCheck(group, 200, options);
  }
}

// Selective SkipReduce: a policy over three buckets, bucket 0 protected and
// bucket 2 at its own rate; each bucket holds what its own options say, and
// the protected one is the full sum.
TEST_P(RingAllreduceTest, SelectivePolicySkipsOnlyUnprotectedBuckets) {
  RankGroup group(GetParam());
  const int n = group.ranks();
  SkipPolicy policy;
  policy.mode = SkipMode::kRandom;
  policy.rate = 0.5;
  policy.seed = 5;
  policy.protected_tensors = {0};
  policy.tensor_rates = {{2, 0.25}};
  for (uint64_t bucket = 0; bucket < 3; ++bucket) {
    RingAllreduceOptions options;
    options.op = ReduceOp::kAverage;
    options.chunk_bytes = 64;
    options.skip = policy.ForTensor(bucket, /*iteration=*/7, n);
    if (bucket == 0) {
      EXPECT_EQ(options.skip.mode, SkipMode::kNone);
    } else {
      EXPECT_EQ(options.skip.reduce_scatter_steps,
                SkipStepsForRate(bucket == 2 ? 0.25 : 0.5, n));
    }
    RunAndCheck(group, 97 + 13 * bucket, options);
  }
}

// The last rank passes one value fewer (the case whose smaller receive made
// gloo abort the process): all ranks refuse, including those far from it in
// the ring, and the same contexts then run an exact allreduce.
TEST_P(RingAllreduceTest, EveryRankRefusesWhenOneRankHasAnotherCount) {
  RankGroup group(GetParam());
  const int n = group.ranks();
  std::vector<size_t> counts(static_cast<size_t>(n), 64);
  counts.back() = 63;
  ExpectEveryRankRefuses(group, counts,
                         absl::StrCat("rank ", n - 1, " has 63 values, rank 0 has 64"));
  RunAndCheck(group, 64, RingAllreduceOptions{});
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingAllreduceTest, ::testing::Range(2, 9),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return std::to_string(param_info.param) + "Ranks";
                         });

TEST(RingAllreduceOptionsTest, RefusesBadOptions) {
  RingAllreduceOptions options;
  options.chunk_bytes = 6;
  EXPECT_EQ(options.Validate(4).code(), absl::StatusCode::kInvalidArgument);
  options.chunk_bytes = 64;
  options.window_chunks = 0;
  EXPECT_EQ(options.Validate(4).code(), absl::StatusCode::kInvalidArgument);
  options.window_chunks = 2;
  options.tag = 1u << 24;
  EXPECT_EQ(options.Validate(4).code(), absl::StatusCode::kInvalidArgument);
  options.tag = 7;
  options.skip = SkipOptions{.mode = SkipMode::kStatic, .reduce_scatter_steps = 4};
  const absl::Status status = options.Validate(4);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("RingAllreduceOptions.skip.reduce_scatter_steps"),
            std::string_view::npos)
      << status;
  EXPECT_EQ((ConnectOptions{.rank = 4, .ranks = 4}).Validate().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RingAllreduceTest, OneRankIsTheIdentityOrItsAverage) {
  RankGroup group(1);
  std::vector<float> data = {1.0f, 2.0f, 3.0f};
  RingAllreduceOptions options;
  options.op = ReduceOp::kAverage;
  ASSERT_TRUE(RingAllreduce(group.context(0), data, options).ok());
  EXPECT_EQ(data, (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

// Counts that differ between ranks (each once aborted the process in gloo's
// device thread, or let one rank return OK alone): every rank refuses, and a
// following call with matching counts on the same contexts is exact.
TEST(RingAllreduceCountTest, TenNineTenOnThreeRanksIsRefusedEverywhere) {
  RankGroup group(3);
  ExpectEveryRankRefuses(group, {10, 9, 10}, "rank 1 has 9 values, rank 0 has 10");
  RunAndCheck(group, 10, RingAllreduceOptions{});
}

TEST(RingAllreduceCountTest, ZeroBesideNonZeroIsRefusedEverywhere) {
  RankGroup group(3);
  ExpectEveryRankRefuses(group, {0, 3, 3}, "rank 1 has 3 values, rank 0 has 0");
  RunAndCheck(group, 3, RingAllreduceOptions{});
  RunAndCheck(group, 0, RingAllreduceOptions{});
}

TEST(RingAllreduceCountTest, TwoRanksThatDifferBothRefuse) {
  RankGroup group(2);
  ExpectEveryRankRefuses(group, {1000, 7}, "rank 1 has 7 values, rank 0 has 1000");
  ExpectEveryRankRefuses(group, {7, 1000}, "rank 1 has 1000 values, rank 0 has 7");
  RunAndCheck(group, 1000, RingAllreduceOptions{.chunk_bytes = 64});
}

// Options that change the messages (chunk_bytes: their sizes; skip: which
// slices travel) differing between ranks: refused everywhere likewise.
TEST(RingAllreduceCountTest, OptionsThatDifferAreRefusedEverywhere) {
  RankGroup group(3);
  const std::vector<RingAllreduceOptions> cases = {
      RingAllreduceOptions{.chunk_bytes = 16},
      RingAllreduceOptions{.skip = {.mode = SkipMode::kStatic, .reduce_scatter_steps = 1}},
      RingAllreduceOptions{.op = ReduceOp::kAverage},
  };
  for (const RingAllreduceOptions& odd : cases) {
    std::vector<std::vector<float>> data(3, std::vector<float>(1000, 1.0f));
    std::vector<absl::Status> statuses(3);
    group.Each([&](int r) {
      RingAllreduceOptions options = r == 1 ? odd : RingAllreduceOptions{};
      options.timeout = absl::Seconds(10);
      statuses[r] = RingAllreduce(group.context(r), data[r], options);
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << statuses[r];
      EXPECT_NE(statuses[r].message().find("rank 1's options differ from rank 0's"),
                absl::string_view::npos)
          << statuses[r];
      EXPECT_EQ(data[r], std::vector<float>(1000, 1.0f));
    }
  }
  RunAndCheck(group, 1000, RingAllreduceOptions{});
}

// One rank's options invalid (a chunk size no float fits, a skip of more
// steps than there are): it returns why, and the others return
// InvalidArgument naming it at once (they waited for its count until their
// timeout before); the contexts stay usable.
TEST(RingAllreduceCountTest, ARankWithInvalidOptionsFailsEveryRankAtOnce) {
  RankGroup group(3);
  const std::vector<RingAllreduceOptions> cases = {
      RingAllreduceOptions{.chunk_bytes = 3},
      RingAllreduceOptions{.skip = {.mode = SkipMode::kStatic, .reduce_scatter_steps = 9}},
      RingAllreduceOptions{.timeout = absl::ZeroDuration()},
  };
  for (const RingAllreduceOptions& invalid : cases) {
    std::vector<std::vector<float>> data(3, std::vector<float>(100, 1.0f));
    std::vector<absl::Status> statuses(3);
    group.Each([&](int r) {
      RingAllreduceOptions options;
      // Without the invalid rank's message the others would return
      // Unavailable after this long instead.
      options.timeout = absl::Seconds(60);
      if (r == 2) options = invalid;
      statuses[r] = RingAllreduce(group.context(r), data[r], options);
    });
    EXPECT_EQ(statuses[2].code(), absl::StatusCode::kInvalidArgument) << statuses[2];
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(statuses[r].code(), absl::StatusCode::kInvalidArgument) << statuses[r];
      EXPECT_NE(statuses[r].message().find("rank 2's options are invalid"), absl::string_view::npos)
          << statuses[r];
    }
    for (int r = 0; r < 3; ++r) EXPECT_EQ(data[r], std::vector<float>(100, 1.0f)) << r;
  }
  RunAndCheck(group, 100, RingAllreduceOptions{});
}

// The invalid rank's message needs the others in a call: when they never
// come, its wait ends at its timeout with that failure's code (the context
// is then closed, which InvalidArgument would deny), and why it was invalid
// still in the message.
TEST(RingAllreduceCountTest, AnInvalidRankAloneReturnsItsWaitsFailureSayingWhy) {
  RankGroup group(2);
  std::vector<float> data(100, 1.0f);
  const absl::Status status = RingAllreduce(
      group.context(1), data,
      RingAllreduceOptions{.chunk_bytes = 3, .timeout = absl::Milliseconds(300)});
  EXPECT_NE(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("chunk_bytes"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("telling the other ranks failed"), absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace atp::collectives
