#include "tests/integration/cluster_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <thread>

#include "atp/wire.h"
#include "testbed/oracle.h"
#include "tests/common/skip_reference.h"

namespace atp::integration {

std::vector<float> Values(size_t n, uint64_t seed, float range) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> ExpectedAggregate(const std::vector<std::vector<float>>& inputs, double scale,
                                     Reduction reduction) {
  std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
  return testbed::ExpectedAggregate(spans, scale, reduction);
}

testbed::LocalJob TestJob(uint8_t id, int racks, int workers_per_rack, uint32_t io_threads) {
  testbed::LocalJob job;
  job.job.job_id = id;
  job.job.layout = RackLayout::Uniform(racks, workers_per_rack);
  job.job.io_threads = io_threads;
  job.job.slots = 256;
  job.job.initial_window = 64;
  job.job.scheduler.min_piece_fragments = 16;
  job.job.scheduler.max_piece_fragments = 256;
  job.job.initial_retransmission_timeout = absl::Milliseconds(5);
  job.job.max_retransmission_timeout = absl::Milliseconds(50);
  return job;
}

std::unique_ptr<testbed::LocalCluster> MakeCluster(testbed::LocalClusterOptions options) {
  absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> cluster =
      testbed::LocalCluster::Create(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

namespace {

bool BitIdentical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ExpectedSkipped: the exact sum with the dropped fragments zero, then (for
// an average) divided as the Worker does, in float32.
std::vector<float> ExpectedSkipped(const std::vector<std::vector<float>>& inputs, double scale,
                                   Reduction reduction, const SkipOptions& skip) {
  std::vector<float> sum = ExpectedAggregate(inputs, scale, Reduction::kSum);
  const int n = static_cast<int>(inputs.size());
  const uint64_t fragments = (sum.size() + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
  if (skip.mode != SkipMode::kNone && skip.variant == SkipVariant::kContributions) {
    // Each fragment sums only its contributors: the aggregate of their
    // inputs over the fragment's values.
    const std::vector<std::set<int>> contributors =
        atp::testing::ReferenceContributors(fragments, n, skip);
    for (uint64_t f = 0; f < fragments; ++f) {
      const size_t begin = f * wire::kValuesPerFragment;
      const size_t end = std::min<size_t>(sum.size(), begin + wire::kValuesPerFragment);
      std::vector<std::vector<float>> in;
      for (int r : contributors[f]) {
        in.emplace_back(inputs[static_cast<size_t>(r)].begin() + static_cast<std::ptrdiff_t>(begin),
                        inputs[static_cast<size_t>(r)].begin() + static_cast<std::ptrdiff_t>(end));
      }
      const std::vector<float> part = ExpectedAggregate(in, scale, Reduction::kSum);
      std::copy(part.begin(), part.end(), sum.begin() + static_cast<std::ptrdiff_t>(begin));
    }
  }
  for (uint64_t f : atp::testing::ReferenceDroppedFragments(fragments, n, skip)) {
    const size_t end = std::min<size_t>(sum.size(), (f + 1) * wire::kValuesPerFragment);
    for (size_t i = f * wire::kValuesPerFragment; i < end; ++i) sum[i] = 0.0f;
  }
  if (reduction == Reduction::kAverage) {
    const bool drop = skip.mode != SkipMode::kNone && skip.divisor == SkipDivisor::kContributors;
    const float divisor = static_cast<float>(drop ? n - skip.reduce_scatter_steps : n);
    for (float& v : sum) v /= divisor;
  }
  return sum;
}

}  // namespace

::testing::AssertionResult RunCollective(testbed::LocalCluster& cluster, size_t job,
                                         const CollectiveOptions& options) {
  const size_t workers = cluster.num_workers(job);
  const double scale = cluster.worker(job, 0).options().job.scale;
  // inputs[op][rank], outputs[op][rank]
  std::vector<std::vector<std::vector<float>>> inputs(options.sizes.size());
  std::vector<std::vector<std::vector<float>>> outputs(options.sizes.size());
  std::vector<Handle> handles;
  for (size_t op = 0; op < options.sizes.size(); ++op) {
    for (size_t w = 0; w < workers; ++w) {
      inputs[op].push_back(options.make_input
                               ? options.make_input(op, w, options.sizes[op])
                               : Values(options.sizes[op], options.seed * 1000003 + op * 131 + w,
                                        options.range));
      outputs[op].emplace_back(options.sizes[op], std::numeric_limits<float>::quiet_NaN());
    }
  }
  for (size_t op = 0; op < options.sizes.size(); ++op) {
    for (size_t w = 0; w < workers; ++w) {
      OpOptions op_options{.reduction = options.reduction};
      if (options.skip) op_options.skip = options.skip(op);
      absl::StatusOr<Handle> h =
          cluster.worker(job, w).PushPull(inputs[op][w], outputs[op][w], op_options);
      if (!h.ok()) {
        return ::testing::AssertionFailure() << "PushPull op " << op << " worker " << w << ": "
                                             << h.status();
      }
      handles.push_back(*h);
    }
  }
  const absl::Status waited = WaitAll(handles, absl::Now() + options.deadline);
  if (!waited.ok()) return ::testing::AssertionFailure() << "WaitAll: " << waited;
  for (size_t op = 0; op < options.sizes.size(); ++op) {
    const std::vector<float> expected =
        options.skip ? ExpectedSkipped(inputs[op], scale, options.reduction, options.skip(op))
                     : ExpectedAggregate(inputs[op], scale, options.reduction);
    for (size_t w = 0; w < workers; ++w) {
      if (!BitIdentical(outputs[op][w], outputs[op][0])) {
        return ::testing::AssertionFailure()
               << "op " << op << ": worker " << w << " differs from worker 0";
      }
      if (!BitIdentical(outputs[op][w], expected)) {
        size_t i = 0;
        while (i < expected.size() &&
               std::memcmp(&outputs[op][w][i], &expected[i], sizeof(float)) == 0) {
          ++i;
        }
        return ::testing::AssertionFailure()
               << "op " << op << " (" << options.sizes[op] << " values), worker " << w
               << ": value " << i << " is " << outputs[op][w][i] << ", expected " << expected[i];
      }
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult EventuallyPsStats(
    testbed::LocalCluster& cluster, size_t job, size_t index,
    const std::function<bool(const ParameterServerStats&)>& predicate) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  ParameterServerStats s;
  do {
    s = cluster.parameter_server(job, index).stats();
    if (predicate(s)) return ::testing::AssertionSuccess();
    std::this_thread::yield();
  } while (absl::Now() < deadline);
  return ::testing::AssertionFailure()
         << "PS stats never matched: completed " << s.completed << ", fp_completed "
         << s.fp_completed << ", contributions " << s.contributions << ", wrong_shard "
         << s.wrong_shard << ", decode_errors " << s.decode_errors;
}

}  // namespace atp::integration
