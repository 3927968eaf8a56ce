// examples/atp_sim/skip_scenarios.cc: see skip_scenarios.h.
#include "examples/atp_sim/skip_scenarios.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "atp/status_macros.h"
#include "sim/collectives/collective_run.h"
#include "sim/collectives/schedule.h"
#include "sim/experiment.h"

namespace atp::sim_tool {
namespace {

using sim::CollectiveRunResult;
using sim::CollectiveSchedule;
using sim::LogicalTopology;

// SkippedSteps: every k for the log-step topologies; for the ring, powers
// of two and N-1 (N-1 rows of a 256-node ring say nothing the line does not).
std::vector<int> SkippedSteps(LogicalTopology topology, int nodes) {
  const int steps = sim::ReduceSteps(topology, nodes);
  std::vector<int> ks = {0};
  if (topology != LogicalTopology::kRing) {
    for (int k = 1; k <= steps; ++k) ks.push_back(k);
    return ks;
  }
  for (int k = 1; k < steps; k *= 2) ks.push_back(k);
  ks.push_back(steps);
  return ks;
}

// AtpTime: one ATP allreduce (PushPull of the same tensor) of `nodes`
// workers in racks of at most 32 on the same host links; the worker racks
// meet at a core switch over links of the same kind.
absl::StatusOr<sim::ExperimentResult> RunAtp(int nodes, uint64_t tensor_bytes,
                                             const sim::LinkConfig& link, uint64_t seed) {
  sim::ExperimentConfig config;
  const int racks = (nodes + 31) / 32;
  config.topology.worker_racks = racks;
  config.topology.host_link = link;
  config.topology.fabric_link = link;
  config.topology.jobs = {sim::JobPlacement{.job = 1,
                                            .workers_per_rack = sim::SpreadEvenly(nodes, racks)}};
  config.workload.values = tensor_bytes / sizeof(float);
  config.workload.seed = seed;
  config.seed = seed;
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<sim::Experiment> experiment,
                       sim::Experiment::Create(config));
  return experiment->Run();
}

}  // namespace

absl::StatusOr<ScenarioTable> SkipTopologies(Scale scale, uint64_t seed) {
  const int nodes = scale == Scale::kFull ? 256 : 16;
  const uint64_t tensor_bytes = scale == Scale::kFull ? (uint64_t{1} << 20) : (uint64_t{256} << 10);
  sim::TopologyConfig defaults;
  const sim::LinkConfig link = defaults.host_link;  // what the ATP experiments use

  ScenarioTable table;
  table.title = absl::StrFormat(
      "allreduce of %d KiB on %d nodes, each on a 100 Gb/s link to one switch, skipping the "
      "first k reduce steps (SkipReduce); ATP on the same links",
      tensor_bytes >> 10, nodes);
  table.paper =
      "SkipReduce on 256 nodes (section 6.1): ring and halving-doubling trade gradient for time "
      "alike (linear, logarithmic); on a tree the two do not match";
  table.notes = {
      "k: reduce steps skipped (ring N-1, halving-doubling and tree log2 N); skipped_pct: "
      "gradient contributions left out",
      "speedup: simulated time of k=0 / time at k; theory: bytes on the busiest path, no "
      "latency; pct_per_speedup_pct: skipped_pct / (speedup - 1) in % (gradient paid per 1% of speedup)",
      "atp: one PushPull of the same tensor through the in-network aggregators (racks of 32 "
      "under a core switch at >32 nodes); vs_ring: the unskipped ring's time / this time"};
  table.columns = {"topology", "k",      "skipped_pct", "time_us", "speedup",
                   "theory",   "pct_per_speedup_pct", "vs_ring"};
  table.precision = 3;
  const auto start = std::chrono::steady_clock::now();
  double ring_time = 0.0;
  double first_step[3][2] = {};  // [topology] {skipped_pct, speedup gain pct} at k = 1
  const LogicalTopology topologies[] = {LogicalTopology::kRing, LogicalTopology::kHalvingDoubling,
                                        LogicalTopology::kTree};
  for (const LogicalTopology topology : topologies) {
    double base = 0.0;
    for (const int k : SkippedSteps(topology, nodes)) {
      ATP_ASSIGN_OR_RETURN(CollectiveSchedule schedule,
                           sim::BuildSchedule(topology, nodes, tensor_bytes, k));
      ATP_ASSIGN_OR_RETURN(CollectiveRunResult run, sim::RunCollective(schedule, link));
      ++table.runs;
      table.frames += run.frame_deliveries;
      table.exact = table.exact && run.completed && run.tail_drops == 0;
      const double us = run.completion_time.ToMicroseconds();
      if (k == 0) base = us;
      if (topology == LogicalTopology::kRing && k == 0) ring_time = us;
      const double speedup = us > 0 ? base / us : 0.0;
      const double gain_pct = (speedup - 1.0) * 100.0;
      const double skipped_pct = schedule.skipped_fraction * 100.0;
      if (k == 1) {
        first_step[static_cast<int>(topology)][0] = skipped_pct;
        first_step[static_cast<int>(topology)][1] = gain_pct;
      }
      table.rows.push_back({std::string(sim::LogicalTopologyName(topology)),
                            static_cast<int64_t>(k), skipped_pct, us, speedup,
                            schedule.theory_speedup,
                            gain_pct > 0 ? skipped_pct / gain_pct : 0.0,
                            ring_time > 0 ? ring_time / us : 1.0});
    }
  }
  ATP_ASSIGN_OR_RETURN(sim::ExperimentResult atp, RunAtp(nodes, tensor_bytes, link, seed));
  ++table.runs;
  table.frames += atp.frame_deliveries;
  table.exact = table.exact && atp.exact;
  const double atp_us = atp.jobs.empty() ? 0.0 : atp.jobs[0].completion_time.ToMicroseconds();
  table.rows.push_back({std::string("atp"), int64_t{0}, 0.0, atp_us, 1.0, 1.0, 0.0,
                        atp_us > 0 ? ring_time / atp_us : 0.0});
  table.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  table.finding = absl::StrFormat(
      "skipping the first step costs %.1f%% of the gradient for %.1f%% speedup on the ring, "
      "%.1f%% for %.1f%% on halving-doubling, %.1f%% for %.1f%% on the tree; ATP takes %.2fx "
      "less time than the unskipped ring",
      first_step[0][0], first_step[0][1], first_step[1][0], first_step[1][1], first_step[2][0],
      first_step[2][1], atp_us > 0 ? ring_time / atp_us : 0.0);
  return table;
}

}  // namespace atp::sim_tool
