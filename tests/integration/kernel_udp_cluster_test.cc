// Workers and a PS as threads over kernel UDP sockets on 127.0.0.1 (no
// switch: the PS does all the aggregation and unicasts the results).
#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "testbed/local_cluster.h"
#include "tests/integration/cluster_test_util.h"

namespace atp::integration {
namespace {

using testbed::LocalCluster;
using testbed::LocalClusterOptions;
using testbed::LocalJob;

TEST(KernelUdpClusterTest, TwoRacksOverLocalhostGiveExactIdenticalResults) {
  LocalClusterOptions options;
  options.transport = TransportKind::kKernelUdp;
  LocalJob job;
  job.job.job_id = 21;
  job.job.layout = RackLayout::Uniform(2, 2);
  job.job.io_threads = 2;
  job.job.slots = 256;
  job.job.initial_window = 64;
  job.job.scheduler.min_piece_fragments = 16;
  job.job.scheduler.max_piece_fragments = 256;
  job.job.initial_retransmission_timeout = absl::Milliseconds(5);
  options.jobs.push_back(job);
  absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Create(options);
  if (!cluster.ok() && (absl::IsUnavailable(cluster.status()) ||
                        absl::IsPermissionDenied(cluster.status()))) {
    GTEST_SKIP() << "kernel UDP sockets unavailable here: " << cluster.status();
  }
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(RunCollective(**cluster, 0,
                            {.sizes = {1, 62, 1000, 62 * 700 + 9, 100'000}, .seed = 21}));
  EXPECT_TRUE(EventuallyPsStats(**cluster, 0, 0, [](const ParameterServerStats& ps) {
    return ps.completed > 0 && ps.decode_errors == 0;
  }));
}

}  // namespace
}  // namespace atp::integration
