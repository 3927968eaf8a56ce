// tests/integration/cluster_test_util.h: running collective operations on a
// LocalCluster and checking them against an independent oracle.
#ifndef ATP_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_
#define ATP_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "atp/worker.h"
#include "gtest/gtest.h"
#include "testbed/local_cluster.h"

namespace atp::integration {

// TestJob: a job of `racks` x `workers_per_rack` workers shaped for tests:
// small pieces (so tensors of a few thousand values already spread over the
// queues) and short retransmission timeouts (frames dropped at a full
// receive ring are recovered by timeouts; a test never waits a whole second).
testbed::LocalJob TestJob(uint8_t id, int racks, int workers_per_rack, uint32_t io_threads = 2);

// MakeCluster: LocalCluster::Create, failing the test (and returning null)
// on an error.
std::unique_ptr<testbed::LocalCluster> MakeCluster(testbed::LocalClusterOptions options);

// Values: n floats uniform in [-range, range], deterministic in `seed`.
std::vector<float> Values(size_t n, uint64_t seed, float range = 1.0f);

// ExpectedAggregate: testbed::ExpectedAggregate (the independent oracle of
// ATP-SPEC section 8) over `inputs` in rank order.
std::vector<float> ExpectedAggregate(const std::vector<std::vector<float>>& inputs, double scale,
                                     Reduction reduction = Reduction::kSum);

// Collective: one round of operations of the given sizes on every worker of
// job `job`, all submitted before any is waited for (many outstanding).
struct CollectiveOptions {
  std::vector<size_t> sizes;
  uint64_t seed = 1;
  float range = 1.0f;
  Reduction reduction = Reduction::kSum;
  absl::Duration deadline = absl::Seconds(60);
  // make_input: if set, the input of (op, rank) instead of Values(...).
  std::function<std::vector<float>(size_t op, size_t rank, size_t size)> make_input;
  // skip: if set, OpOptions::skip of operation `op` (SkipReduce); the
  // expected result then has the fragments tests/common/skip_reference.h
  // drops zero, and an average divides by N or, with DropReduce, N - k.
  std::function<SkipOptions(size_t op)> skip;
};

// RunCollective: submits, waits, and checks every result against
// ExpectedAggregate (with options.skip applied) and across workers
// (bit-identical).
::testing::AssertionResult RunCollective(testbed::LocalCluster& cluster, size_t job,
                                         const CollectiveOptions& options);

// EventuallyPsStats: polls PS `index` of job `job` until `predicate` holds on
// its stats (they are published after each burst the PS handles, so they may
// trail the results the workers already have), or a 10 s deadline passes.
::testing::AssertionResult EventuallyPsStats(
    testbed::LocalCluster& cluster, size_t job, size_t index,
    const std::function<bool(const ParameterServerStats&)>& predicate);

}  // namespace atp::integration

#endif  // ATP_TESTS_INTEGRATION_CLUSTER_TEST_UTIL_H_
