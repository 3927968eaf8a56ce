// tests/unit/runtime/local_job_checks.h: what the runtime tests of a small
// in-process job (testbed::LocalCluster) share: seeded inputs, the exact sum
// computed independently of libatp's datapath, and waiting for the PS's
// published statistics.
#ifndef ATP_TESTS_UNIT_RUNTIME_LOCAL_JOB_CHECKS_H_
#define ATP_TESTS_UNIT_RUNTIME_LOCAL_JOB_CHECKS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "atp/parameter_server.h"
#include "atp/quantize.h"
#include "gtest/gtest.h"
#include "testbed/local_cluster.h"

namespace atp::testing {

// Values: n values uniform in [-1, 1), the same for the same seed.
inline std::vector<float> Values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// ExactSum: dequantize(sum of quantized inputs), computed independently.
inline std::vector<float> ExactSum(const std::vector<std::vector<float>>& inputs,
                                   double scale = kDefaultScale) {
  const size_t n = inputs[0].size();
  std::vector<int64_t> sum(n, 0);
  std::vector<int32_t> q(n);
  for (const auto& in : inputs) {
    Quantize(in, scale, q);
    for (size_t i = 0; i < n; ++i) sum[i] += q[i];
  }
  std::vector<int32_t> s32(n);
  for (size_t i = 0; i < n; ++i) s32[i] = static_cast<int32_t>(sum[i]);
  std::vector<float> out(n);
  Dequantize(s32, scale, out);
  return out;
}

// SmallJob: one rack of `workers` with two queues, 64 slots and short
// retransmission timeouts, so that failures and restarts show within
// milliseconds; the stall time is the caller's.
inline testbed::LocalJob SmallJob(uint8_t job_id, int workers, absl::Duration stall_timeout) {
  testbed::LocalJob job;
  job.job.job_id = job_id;
  job.job.layout = RackLayout::Uniform(1, workers);
  job.job.io_threads = 2;
  job.job.slots = 64;
  job.job.initial_window = 16;
  job.job.scheduler.min_piece_fragments = 4;
  job.job.initial_retransmission_timeout = absl::Milliseconds(5);
  job.job.max_retransmission_timeout = absl::Milliseconds(50);
  job.job.stall_timeout = stall_timeout;
  return job;
}

// StartCluster: an in-process cluster of `job` (null, with a test failure, if
// it cannot be created).
inline std::unique_ptr<testbed::LocalCluster> StartCluster(
    testbed::LocalJob job,
    testbed::FabricAggregation aggregation = testbed::FabricAggregation::kNone) {
  testbed::LocalClusterOptions options;
  options.aggregation = aggregation;
  options.jobs.push_back(std::move(job));
  absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> cluster =
      testbed::LocalCluster::Create(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

// EventuallyStats: polls PS (0, 0)'s published statistics (published by its
// I/O thread, so there is nothing to wait on) until `predicate` holds or
// `deadline` passes from now.
inline bool EventuallyStats(testbed::LocalCluster& cluster, absl::Duration deadline,
                            const std::function<bool(const ParameterServerStats&)>& predicate) {
  const absl::Time end = absl::Now() + deadline;
  while (!predicate(cluster.parameter_server(0, 0).stats())) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace atp::testing

#endif  // ATP_TESTS_UNIT_RUNTIME_LOCAL_JOB_CHECKS_H_
