// sim/experiment.h: one simulated run, end to end: build a network, put
// impairments on its links, run every job's iterations on the real engines,
// and report per job what atp-sim prints.
//
//   ExperimentConfig config;
//   config.topology.worker_racks = 2;
//   config.topology.jobs = {JobPlacement{.job = 1, .workers_per_rack = {2, 2}}};
//   config.impairments.loss = 0.001;
//   ATP_ASSIGN_OR_RETURN(auto experiment, Experiment::Create(config));
//   experiment->At(TimePoint::FromNanoseconds(500'000), [&] { /* wipe a switch */ });
//   ExperimentResult result = experiment->Run();
//   if (!result.exact) ...
//
// Deterministic: the same config (seed included) gives the same result,
// every counter and time equal, on every run.
#ifndef ATP_SIM_EXPERIMENT_H_
#define ATP_SIM_EXPERIMENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "sim/alarm.h"
#include "sim/job_driver.h"
#include "sim/loss_filters.h"
#include "sim/network.h"
#include "sim/packet_filter.h"
#include "sim/task_thread.h"
#include "sim/topology.h"
#include "sim/workload.h"

namespace atp::sim {

// Impairments: filters put on links, each link with its own seeded stream.
struct Impairments {
  double loss = 0.0;  // independent random loss per frame
  TrafficClass loss_class = TrafficClass::kAll;
  std::optional<GilbertElliottConfig> burst_loss;
  double reorder = 0.0;  // fraction of frames held back by up to reorder_delay
  TimeDelta reorder_delay = TimeDelta::FromMicroseconds(20);
  double duplicate = 0.0;
  double corrupt = 0.0;  // fraction of frames with a corrupted IPv4 header byte
  // kinds: the links that get the filters; empty = every link.
  std::vector<LinkKind> kinds;
};

struct ExperimentConfig {
  TopologyConfig topology;
  WorkloadConfig workload;
  Impairments impairments;
  // seed: link filters and the workers' timer jitter (it replaces
  // topology.worker.timer_seed); the workload has its own seed.
  uint64_t seed = 1;
  // time_limit: simulated time after which the run gives up on unfinished jobs.
  TimeDelta time_limit = TimeDelta::FromSeconds(30);
  // settle_time: after the last job finishes, the run goes on this long (idle
  // switches scan for orphans) before aggregators are counted.
  TimeDelta settle_time = TimeDelta::FromMilliseconds(25);
  // sample_interval: if > 0, each job's goodput is sampled this often.
  TimeDelta sample_interval;
  // input_thread: make the workers' inputs and exact sums on a second thread
  // (TaskThread), the first iteration's in Create, each next one while the
  // current one is simulated. The results are the same bits either way;
  // false does it all on the simulation thread, when each input is needed.
  bool input_thread = true;
};

struct JobResult {
  uint8_t job = 0;
  int workers = 0;
  int racks = 0;
  bool completed = false;
  TimeDelta completion_time;     // start to the last worker's last result
  double goodput_gbps = 0.0;     // tensor bits x iterations / completion time (per worker)
  uint64_t frames_into_ps = 0;   // gradient frames that reached the job's PS (not control)
  uint64_t ps_param_sent = 0;    // parameter packets the PS multicast
  uint64_t retransmissions = 0;  // worker resends (loss + timeout + overflow), all workers
  uint64_t timeouts = 0;         // retransmission timeouts, all workers
  uint64_t collisions = 0;       // seqs the PS completed with a new aggregator index
  uint64_t ecn_marks = 0;        // marked parameter packets seen by worker 0
  uint64_t overflows = 0;        // seqs that took the float path at the PS
  uint64_t aggregators_in_use_at_end = 0;  // owned by the job, all switches, after settling
  uint64_t results_checked = 0;  // (worker, iteration) results compared with the exact answer
  bool exact = false;            // every checked result exact and identical on all workers
  std::string first_error;
  std::vector<double> goodput_series_gbps;  // per sample_interval, worker 0
};

struct ExperimentResult {
  std::vector<JobResult> jobs;
  bool completed = false;  // every job finished before the time limit
  bool exact = false;      // completed, and every job exact
  TimeDelta simulated_time;
  uint64_t events = 0;
  uint64_t frame_deliveries = 0;  // frames carried over links
  uint64_t tail_drops = 0;
  uint64_t filter_drops = 0;
  uint64_t filter_actions = 0;    // frames any filter touched
  uint64_t endpoint_decode_errors = 0;
  uint64_t switch_malformed = 0;
  uint64_t aggregators_in_use_at_end = 0;  // all switches, after settling
  // packets_outstanding_at_end: frames still in flight or held, not counting
  // the worker hosts' spare TX frames (allocated for their next sends).
  uint64_t packets_outstanding_at_end = 0;
};

class Experiment {
 public:
  static absl::StatusOr<std::unique_ptr<Experiment>> Create(const ExperimentConfig& config);
  ~Experiment();

  // network: for scenarios that reach in (attach more filters, read switch
  // state, schedule faults with At) before Run.
  Network& network() { return *network_; }

  // At: runs `action` at simulated time `time` during Run (Network::At:
  // with two partitions, between windows; it may touch any node).
  void At(TimePoint time, std::function<void()> action);

  // KillWorker: at `time` (as At), worker `worker` (worker order) of job
  // index `job` stops: it ignores every frame and sends nothing more. That
  // job cannot complete; Run stops waiting for it.
  void KillWorker(size_t job, size_t worker, TimePoint time);

  // Run: runs until every job that can finish has (or the time limit), then
  // settles, and reports. Call once.
  ExperimentResult Run();

 private:
  explicit Experiment(const ExperimentConfig& config);
  void AttachImpairments();
  void OnJobDone();
  bool AllLiveJobsDone() const;
  void Sample(TimePoint now);
  // ScheduleSample: the next Sample at `time` (an Alarm with one partition,
  // a Network::At action between windows with two).
  void ScheduleSample(TimePoint time);

  ExperimentConfig config_;
  std::unique_ptr<Network> network_;
  // Declared before the drivers, which cancel their tasks when destroyed.
  std::unique_ptr<TaskThread> tasks_;
  std::vector<std::unique_ptr<JobDriver>> drivers_;
  std::vector<bool> job_has_dead_worker_;
  std::unique_ptr<Alarm> sampler_;  // one partition only (see ScheduleSample)
  bool sampling_ = false;  // until the run's end (the settle samples nothing)
  std::vector<uint64_t> last_sample_fragments_;
  std::vector<std::vector<double>> samples_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_EXPERIMENT_H_
