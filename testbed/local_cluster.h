// testbed/local_cluster.h: whole ATP jobs as threads of one
// process: workers, parameter servers and (over loopback) the switches, for
// integration tests, examples and benchmarks.
//
//   LocalClusterOptions options;
//   options.jobs.push_back(LocalJob{});
//   options.jobs[0].job.job_id = 1;
//   options.jobs[0].job.layout = RackLayout::Uniform(2, 2);
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<LocalCluster> cluster, LocalCluster::Create(options));
//   Worker& w = cluster->worker(/*job=*/0, /*rank=*/3);
//
// Addresses: worker (rack r, index i) of job j is 10.j.r.(i+1); its PS k is
// 10.j.200.(k+1); its multicast group 239.1.0.j. MACs: transport::DefaultMacFor,
// and 01:00:5e:01:00:j for the group.
//
// Transports: kLoopback puts every node on one LoopbackWire with a
// SwitchFabric as its processor (the parameter servers multicast; the fabric
// replicates); kKernelUdp opens one kernel UDP device per node on 127.0.0.1
// with kernel-chosen ports, no switch, and the PS unicasts to each worker.
#ifndef ATP_TESTBED_LOCAL_CLUSTER_H_
#define ATP_TESTBED_LOCAL_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/options.h"
#include "atp/parameter_server.h"
#include "atp/shared_io_threads.h"
#include "atp/transport.h"
#include "atp/transport/loopback.h"
#include "atp/transport_factory.h"
#include "atp/worker.h"
#include "lib/host/polling_thread.h"
#include "switch_emulator/pipeline/pipeline_config.h"
#include "testbed/switch_fabric.h"

namespace atp::testbed {

// LocalJob: one job: its options and how many PS hosts (each with its own
// threads) serve it.
struct LocalJob {
  JobOptions job;
  uint32_t parameter_servers = 1;
  uint32_t ps_threads = 1;
  // The PS's orphan timeout (ParameterServerOptions::orphan_timeout); its
  // waiting_report_interval is a quarter of job.stall_timeout, at most 1 s.
  absl::Duration ps_orphan_timeout = absl::Seconds(2);
  // ps_waiting_report_interval: if set, the PS's waiting_report_interval
  // instead (infinite: no waiting reports, nor the join requests they bring).
  std::optional<absl::Duration> ps_waiting_report_interval;
  // start_parameter_servers: false leaves the PS devices without a PS (their
  // frames go nowhere): the workers' parameter servers are unreachable.
  bool start_parameter_servers = true;
  // adjust_worker: if set, changes the options of the worker of rank `rank`
  // before it is created (tests of mismatched configurations).
  std::function<void(size_t rank, WorkerOptions& options)> adjust_worker;
  // contribution_skipping: the PS accepts SkipReduce's contribution variant
  // (ParameterServerJobOptions::contribution_skipping).
  bool contribution_skipping = false;
};

struct LocalClusterOptions {
  TransportKind transport = TransportKind::kLoopback;
  // Loopback only: which switches aggregate (kernel UDP has none).
  FabricAggregation aggregation = FabricAggregation::kTwoLevel;
  std::vector<LocalJob> jobs;
  // polling: how every thread of the cluster backs off. polling.cpus: with
  // a fabric thread, that thread runs on cpus[0] and the I/O loops' threads
  // on the others (all on cpus[0] when it is the only one), so that the two
  // busy threads of a job on two cores never share one. The I/O threads
  // take those CPUs in turn: the shared threads by their index, endpoints
  // with threads of their own one after another (PS, then workers, job by
  // job).
  PollingOptions polling;
  // shared_threads: 0: every I/O loop (a worker's queue, a PS's thread) on a
  // thread of its own. N (1..64): all of them on N SharedIoThreads
  // (atp/shared_io_threads.h), which back off as `polling` says. Loopback
  // frames between loops of one thread need no wake-up.
  uint32_t shared_threads = 0;
  // fabric_thread (loopback only): false: the fabric (every switch) runs on
  // whichever endpoint thread sends, inside its TxBurst, under the wire's
  // lock. true: on a thread of its own ("atp-fabric-0", backing off as
  // `polling` says; LoopbackWireOptions::stepped_processor), as a switch is
  // a machine of its own: the endpoints' threads only quantize, send and
  // receive, and a second core takes the switches' share of the work. A
  // stopped endpoint's last frames may then still be on their way through
  // the fabric (RestartParameterServer's while_stopped runs before they are).
  bool fabric_thread = false;
  // ps_on_fabric_thread (with fabric_thread): the parameter servers' loops
  // run on the fabric thread too, beside the switches, instead of with the
  // workers'. With kNone the PS sums everything while the switches only
  // copy: on two cores this balances the threads (1.5x fewer instructions
  // on the busiest, bench/RESULTS.md "Bursts through the fabric"); where
  // the switches aggregate, the PS only relays their sums and either place
  // costs about the same.
  bool ps_on_fabric_thread = false;
  // Fabric (loopback only).
  double loss_rate = 0.0;
  uint64_t seed = 1;
  size_t aggregator_count = switch_emulator::kDefaultAggregatorCount;
  uint32_t ecn_threshold = 256;
  TimeDelta orphan_timeout = TimeDelta::FromMilliseconds(10);
  uint64_t wipe_every_frames = 0;  // see SwitchFabricOptions
  // Loopback receive ring per queue, frames (a power of two).
  uint32_t ring_frames = 2048;
};

class LocalCluster {
 public:
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Create(const LocalClusterOptions& options);

  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;
  // Stops the workers, then the parameter servers, then closes the devices.
  ~LocalCluster();

  size_t num_jobs() const { return jobs_.size(); }
  // Workers of job `job` in rack-major order (rank = RackLayout::RankOf).
  size_t num_workers(size_t job) const { return jobs_[job].workers.size(); }
  Worker& worker(size_t job, size_t rank) { return *jobs_[job].workers[rank]; }
  ParameterServer& parameter_server(size_t job, size_t index) {
    return *jobs_[job].servers[index];
  }
  // parameter_server_device: the device of PS `index` of job `job` (with
  // start_parameter_servers false, for a PS the caller runs itself).
  transport::Device& parameter_server_device(size_t job, size_t index) {
    return *jobs_[job].ps_devices[index];
  }
  // shared_threads: the threads every endpoint's loops run on; null with
  // LocalClusterOptions::shared_threads 0.
  SharedIoThreads* shared_threads() { return shared_threads_.get(); }
  // fabric_thread: the fabric's one thread (with the parameter servers'
  // loops under ps_on_fabric_thread); null without
  // LocalClusterOptions::fabric_thread.
  SharedIoThreads* fabric_thread() { return fabric_thread_.get(); }
  // fabric / wire: null with kKernelUdp.
  SwitchFabric* fabric() { return fabric_.get(); }
  transport::LoopbackWire* wire() { return wire_.get(); }

  // RestartParameterServer: stops PS `index` of job `job` (its state is lost,
  // as if its process died) and starts a new one with the same options on the
  // same device. Operations in flight go on (docs/protocol.md "Failures,
  // runs and restarts"). `while_stopped`, if set, runs after the old one
  // stopped (no frame of it is in flight any more) and before the new one
  // starts (tests change the fabric's faults there).
  absl::Status RestartParameterServer(size_t job, size_t index,
                                      const std::function<void()>& while_stopped = nullptr);
  // RecreateWorkers: destroys every Worker of job `job` (their operations
  // finish cancelled) and creates new ones with the same options, or as
  // `adjust` changes them (kept for later recreations): a new run.
  absl::Status RecreateWorkers(
      size_t job, const std::function<void(size_t rank, WorkerOptions& options)>& adjust = nullptr);

  // Addresses (see the header comment).
  static wire::Ipv4Address WorkerIp(uint8_t job, int rack, int index);
  static wire::Ipv4Address PsIp(uint8_t job, uint32_t index);
  static transport::DeviceAddress GroupAddress(uint8_t job);

 private:
  struct Job {
    std::vector<std::unique_ptr<transport::Device>> worker_devices;
    std::vector<std::unique_ptr<transport::Device>> ps_devices;
    std::vector<std::unique_ptr<ParameterServer>> servers;
    std::vector<std::unique_ptr<Worker>> workers;
    std::vector<ParameterServerOptions> server_options;
    std::vector<WorkerOptions> worker_options;
  };

  LocalCluster() = default;
  absl::StatusOr<std::unique_ptr<transport::Device>> OpenDevice(const LocalClusterOptions& options,
                                                                wire::Ipv4Address ip,
                                                                uint32_t queues, uint16_t base_port);

  std::unique_ptr<SwitchFabric> fabric_;
  std::shared_ptr<transport::LoopbackWire> wire_;
  // fabric_thread_ (LocalClusterOptions::fabric_thread): a group of one
  // thread, whose steps are wire_'s processor (fabric_step_) and, with
  // ps_on_fabric_thread, the parameter servers' loops (their options name
  // the group, so it stops with the last of them).
  std::shared_ptr<SharedIoThreads> fabric_thread_;
  host::PollingThread::StepId fabric_step_ = 0;
  // The endpoints hold it too (their options name it): it stops with the last.
  std::shared_ptr<SharedIoThreads> shared_threads_;
  std::vector<Job> jobs_;
};

}  // namespace atp::testbed

#endif  // ATP_TESTBED_LOCAL_CLUSTER_H_
