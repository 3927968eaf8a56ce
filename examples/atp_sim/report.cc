#include "examples/atp_sim/report.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace atp::sim_tool {
namespace {

const char* LevelsName(sim::AggregationMode mode) {
  switch (mode) {
    case sim::AggregationMode::kTwoLevel: return "two";
    case sim::AggregationMode::kRackOnly: return "rack";
    case sim::AggregationMode::kNone: return "none";
  }
  return "?";
}

double Ms(TimeDelta d) { return d.ToSeconds() * 1e3; }

}  // namespace

std::string FormatTable(const sim::ExperimentConfig& config, const sim::ExperimentResult& result,
                        const Performance& performance) {
  const auto& topo = config.topology;
  std::string out = absl::StrFormat(
      "atp-sim: %d job(s) x %d workers, %d rack(s), %s aggregation, %s allocation, %zu "
      "aggregators/switch, loss %g, tensor %zu values x %d iteration(s), seed %u\n\n",
      static_cast<int>(result.jobs.size()),
      result.jobs.empty() ? 0 : result.jobs.front().workers, topo.worker_racks,
      LevelsName(topo.aggregation),
      topo.switches.partition == switch_emulator::PartitionMode::kStatic ? "static" : "dynamic",
      topo.switches.aggregators, config.impairments.loss, config.workload.values,
      config.workload.iterations, config.seed);
  if (topo.ps_model.link_bps > 0 || topo.ps_model.packet_service > TimeDelta::Zero()) {
    // Said only when set, so the default header stays what scripts parse.
    out.insert(out.size() - 1,
               absl::StrFormat("ps: link %g Gb/s, %lld ns per received frame\n",
                               (topo.ps_model.link_bps > 0 ? topo.ps_model.link_bps
                                                           : topo.host_link.bandwidth_bps) / 1e9,
                               static_cast<long long>(topo.ps_model.packet_service.ToNanoseconds())));
  }
  absl::StrAppendFormat(&out, "%4s %7s %5s %12s %13s %12s %9s %10s %12s %6s\n", "job", "workers",
                        "racks", "time_ms", "goodput_Gbps", "frames_to_ps", "retrans",
                        "collisions", "aggr_in_use", "exact");
  for (const sim::JobResult& job : result.jobs) {
    absl::StrAppendFormat(&out, "%4d %7d %5d %12s %13.2f %12u %9u %10u %12u %6s\n", job.job,
                          job.workers, job.racks,
                          job.completed ? absl::StrFormat("%.3f", Ms(job.completion_time))
                                        : std::string("unfinished"),
                          job.goodput_gbps, job.frames_into_ps, job.retransmissions,
                          job.collisions, job.aggregators_in_use_at_end,
                          job.exact ? "yes" : "NO");
    if (!job.first_error.empty()) absl::StrAppend(&out, "     error: ", job.first_error, "\n");
  }
  absl::StrAppendFormat(
      &out,
      "\nsimulated %.3f ms: %u frames over links, %u events, %u tail drops, %u frames lost to "
      "filters, %u rejected by receivers, %u malformed at switches\n",
      Ms(result.simulated_time), result.frame_deliveries, result.events, result.tail_drops,
      result.filter_drops, result.endpoint_decode_errors, result.switch_malformed);
  absl::StrAppendFormat(&out,
                        "speed: %.2f million frames/s of wall time (%.3f s), %.2f million/s of "
                        "CPU time (%.3f s, all threads); %d partition(s)%s\n",
                        performance.frames_per_wall_second / 1e6, performance.wall_seconds,
                        performance.frames_per_cpu_second / 1e6, performance.cpu_seconds,
                        topo.partitions, config.input_thread ? ", inputs on their own thread" : "");
  size_t checked = 0;
  for (const sim::JobResult& job : result.jobs) checked += job.results_checked;
  absl::StrAppendFormat(&out, "%s: %zu results checked against the exact sum%s\n",
                        result.exact ? "EXACT" : "NOT EXACT", checked,
                        result.completed ? "" : " (some jobs did not finish)");
  return out;
}

std::string FormatJson(const sim::ExperimentConfig& config, const sim::ExperimentResult& result,
                       const Performance& performance) {
  using nlohmann::json;
  const auto& topo = config.topology;
  json j;
  j["config"] = {
      {"jobs", result.jobs.size()},
      {"workers", result.jobs.empty() ? 0 : result.jobs.front().workers},
      {"racks", topo.worker_racks},
      {"levels", LevelsName(topo.aggregation)},
      {"allocation",
       topo.switches.partition == switch_emulator::PartitionMode::kStatic ? "static" : "dynamic"},
      {"aggregators", topo.switches.aggregators},
      {"loss", config.impairments.loss},
      {"tensor_values", config.workload.values},
      {"iterations", config.workload.iterations},
      {"queues", topo.queues},
      {"cc",
       topo.worker.congestion_control == worker::CongestionController::Mode::kAimd ? "on" : "off"},
      {"seed", config.seed},
      {"partitions", topo.partitions},
      {"input_thread", config.input_thread},
      {"ps_link_gbps",
       (topo.ps_model.link_bps > 0 ? topo.ps_model.link_bps : topo.host_link.bandwidth_bps) / 1e9},
      {"ps_packet_ns", topo.ps_model.packet_service.ToNanoseconds()},
  };
  json jobs = json::array();
  for (const sim::JobResult& job : result.jobs) {
    jobs.push_back({
        {"job", job.job},
        {"workers", job.workers},
        {"racks", job.racks},
        {"completed", job.completed},
        {"completion_time_ms", job.completed ? json(Ms(job.completion_time)) : json(nullptr)},
        {"goodput_gbps", job.goodput_gbps},
        {"frames_into_ps", job.frames_into_ps},
        {"retransmissions", job.retransmissions},
        {"timeouts", job.timeouts},
        {"collisions", job.collisions},
        {"ecn_marks", job.ecn_marks},
        {"overflows", job.overflows},
        {"aggregators_in_use_at_end", job.aggregators_in_use_at_end},
        {"results_checked", job.results_checked},
        {"exact", job.exact},
        {"error", job.first_error},
    });
    if (!job.goodput_series_gbps.empty()) jobs.back()["goodput_series_gbps"] = job.goodput_series_gbps;
  }
  j["jobs"] = jobs;
  j["exact"] = result.exact;
  j["completed"] = result.completed;
  j["simulator"] = {
      {"simulated_ms", Ms(result.simulated_time)},
      {"events", result.events},
      {"frames_delivered", result.frame_deliveries},
      {"tail_drops", result.tail_drops},
      {"filter_drops", result.filter_drops},
      {"receiver_rejects", result.endpoint_decode_errors},
      {"switch_malformed", result.switch_malformed},
      {"aggregators_in_use_at_end", result.aggregators_in_use_at_end},
  };
  j["performance"] = {
      {"wall_seconds", performance.wall_seconds},
      {"cpu_seconds", performance.cpu_seconds},
      {"frames_per_wall_second", performance.frames_per_wall_second},
      {"frames_per_cpu_second", performance.frames_per_cpu_second},
  };
  return j.dump(2) + "\n";
}

}  // namespace atp::sim_tool
