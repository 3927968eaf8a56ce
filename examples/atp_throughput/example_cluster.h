// examples/atp_throughput/example_cluster.h: what atp-ping and
// atp-throughput share: the flags that choose where a job runs (transport,
// switches, polling) and the in-process cluster built from them, plus help
// output limited to the tool's own flags.
#ifndef ATP_EXAMPLES_ATP_THROUGHPUT_EXAMPLE_CLUSTER_H_
#define ATP_EXAMPLES_ATP_THROUGHPUT_EXAMPLE_CLUSTER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "atp/options.h"
#include "testbed/local_cluster.h"

namespace atp::examples {

// ParseFlagsOrExit: tool::ParseCommandLineOrExit for the tool `program`
// whose own flags are those of files whose path contains `tool_dir`, and the
// shared ones here and in examples/common; bad flags exit with status 2.
void ParseFlagsOrExit(int argc, char** argv, const char* program, const char* tool_dir,
                      const std::string& usage);

// ClusterShape: the job a tool runs, as the flags gave it (MakeCluster
// checks the values, naming --workers, --racks and --io_threads; the window
// and slots come from examples/common/window_flags.h).
struct ClusterShape {
  int workers = 2;
  int racks = 1;
  int io_threads = 1;
  // shared_threads: 0: a thread per I/O loop; N: N threads shared by all of
  // them (testbed::LocalClusterOptions::shared_threads), 1..ClusterLoops.
  // Named --cluster_threads in messages.
  int shared_threads = 0;
  // fabric_thread: loopback only, the switches on a thread of their own
  // (testbed::LocalClusterOptions::fabric_thread). Named --fabric_thread.
  bool fabric_thread = false;
  // ps_on_fabric_thread: with fabric_thread, the PS's loops run on the
  // fabric thread (testbed::LocalClusterOptions::ps_on_fabric_thread). Named
  // --ps_on_fabric_thread.
  bool ps_on_fabric_thread = false;
};

// ClusterLoops: the I/O loops of `shape`'s job: each worker's queues and the PS's.
int ClusterLoops(const ClusterShape& shape);

// MakeCluster: the job `shape` as threads of this process, placed by the
// shared flags (--transport, --switches, --loss, --busy_poll, ...); refuses
// --transport=dpdk (DPDK endpoints run one per process). Workers are
// spread over the racks as evenly as possible.
absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> MakeCluster(const ClusterShape& shape);

// Describe: "4 workers in 2 racks, loopback, switches two_level" for logs.
std::string Describe(const ClusterShape& shape);

// The shared flags' values, for reports (ClusterTransportFlag: --transport,
// "loopback" when not given; SwitchesFlag: "none" off loopback).
std::string ClusterTransportFlag();
std::string SwitchesFlag(int racks);

}  // namespace atp::examples

#endif  // ATP_EXAMPLES_ATP_THROUGHPUT_EXAMPLE_CLUSTER_H_
