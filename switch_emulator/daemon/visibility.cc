#include "switch_emulator/daemon/visibility.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/metrics/metric_builder.h"

namespace atp::switchd {
namespace {

using switch_emulator::PipelineCounters;

// Delta: now - before, field by field (all of them monotonic).
PipelineCounters Delta(const PipelineCounters& now, const PipelineCounters* before) {
  if (before == nullptr) return now;
  PipelineCounters d = now;
  d.packets -= before->packets;
  d.not_atp -= before->not_atp;
  d.malformed -= before->malformed;
  d.not_aggregated -= before->not_aggregated;
  d.acks -= before->acks;
  d.forwarded_fp -= before->forwarded_fp;
  d.forwarded_control -= before->forwarded_control;
  d.resend_to_ps -= before->resend_to_ps;
  d.collisions -= before->collisions;
  d.aggregated -= before->aggregated;
  d.duplicates -= before->duplicates;
  d.completed -= before->completed;
  d.flushed -= before->flushed;
  d.orphaned -= before->orphaned;
  return d;
}

// JobDelta: now - before for one job's counters (before: zeros when null).
switch_emulator::PipelineJobCounters JobDelta(const switch_emulator::PipelineJobCounters& now,
                                              const switch_emulator::PipelineJobCounters* before) {
  if (before == nullptr) return now;
  switch_emulator::PipelineJobCounters d = now;
  d.completed -= before->completed;
  d.collisions -= before->collisions;
  d.resend_to_ps -= before->resend_to_ps;
  d.flushed -= before->flushed;
  d.forwarded_fp -= before->forwarded_fp;
  d.forwarded_control -= before->forwarded_control;
  d.not_aggregated -= before->not_aggregated;
  d.orphaned -= before->orphaned;
  return d;
}

double Percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

}  // namespace

std::vector<Metric> SwitchdMetrics(const SwitchdStats& s) {
  metrics::MetricBuilder b("atp_switch_");
  for (const PortStats& p : s.ports) {
    const auto port = [&](MetricLabels more = {}) {
      MetricLabels l = {{"port", p.name}};
      for (auto& kv : more) l.push_back(std::move(kv));
      return l;
    };
    b.Counter("frames_total", "Frames received and sent by port (sent: multicast copies included).",
              p.counters.rx_frames, port({{"direction", "rx"}}));
    b.Counter("frames_total", "", p.counters.tx_frames, port({{"direction", "tx"}}));
    b.Counter("rx_malformed_total", "Received ATP frames the pipeline refused as malformed.",
              p.counters.rx_malformed, port());
    b.Counter("rx_refused_total",
              "Frames of a restricted job refused at this ingress port, by reason (docs/security.md).",
              p.counters.rx_refused_parameter_port, port({{"reason", "parameter_port"}}));
    b.Counter("rx_refused_total", "", p.counters.rx_refused_gradient_port,
              port({{"reason", "gradient_port"}}));
    b.Counter("tx_copies_total", "Multicast copies made for the port.", p.counters.tx_copies, port());
    b.Counter("tx_dropped_total", "Frames not sent, by reason.", p.counters.tx_dropped_backpressure,
              port({{"reason", "backpressure"}}));
    b.Counter("tx_dropped_total", "", p.counters.tx_dropped_no_buffer, port({{"reason", "no_buffer"}}));
    b.Gauge("tx_held_frames", "Frames the port's queues still held at the last flush.",
            static_cast<double>(p.tx_held), port());
    const transport::QueueStats& t = p.transport;
    const std::pair<const char*, uint64_t> transport_counters[] = {
        {"rx_frames", t.rx_frames},         {"rx_bad_frames", t.rx_bad_frames},
        {"rx_dropped", t.rx_dropped},       {"tx_frames", t.tx_frames},
        {"tx_bad_frames", t.tx_bad_frames}, {"tx_unroutable", t.tx_unroutable},
        {"tx_backpressure", t.tx_backpressure}, {"tx_errors", t.tx_errors}};
    for (const auto& [name, value] : transport_counters) {
      b.Counter(absl::StrFormat("transport_%s_total", name),
                "The port's transport counter of that name (atp/transport.h QueueStats), summed "
                "over its queues.",
                value, port());
    }
  }
  const PipelineCounters& c = s.pipeline;
  const std::pair<const char*, uint64_t> pipeline_counters[] = {
      {"packets", c.packets},           {"not_atp", c.not_atp},
      {"not_aggregated", c.not_aggregated}, {"ecn_marked", c.ecn_marked},
      {"acks", c.acks},                 {"acks_cleared", c.acks_cleared},
      {"forwarded_fp", c.forwarded_fp}, {"forwarded_control", c.forwarded_control},
      {"claimed", c.claimed},
      {"resend_to_ps", c.resend_to_ps}, {"collisions", c.collisions},
      {"aggregated", c.aggregated},     {"duplicates", c.duplicates},
      {"completed", c.completed},       {"fed_to_level2", c.fed_to_level2},
      {"flushed", c.flushed},           {"orphaned", c.orphaned},
      {"wipes", c.wipes}};
  for (const auto& [name, value] : pipeline_counters) {
    b.Counter(absl::StrFormat("%s_total", name),
              "Switch pipeline counter of that name (docs/switchd.md, stats JSON 'pipeline').", value);
  }
  for (size_t i = 1; i < wire::kDecodeErrorCount; ++i) {
    b.Counter("malformed_total", "Malformed ATP frames, by the first thing wrong.",
              c.malformed_by_reason[i],
              {{"reason", std::string(wire::DecodeErrorName(static_cast<wire::DecodeError>(i)))}});
  }
  for (const JobStats& job : s.jobs) {
    const switch_emulator::PipelineJobCounters& j = job.counters;
    const std::string id = absl::StrCat(job.job);
    b.Counter("job_completed_total",
              "Aggregations this switch completed for the job (fan-in reached; each level counts).",
              j.completed, {{"job", id}});
    const std::pair<const char*, uint64_t> to_ps[] = {
        {"collision", j.collisions}, {"resend", j.resend_to_ps},   {"flush", j.flushed},
        {"float", j.forwarded_fp},   {"not_aggregated", j.not_aggregated},
        {"control", j.forwarded_control}};
    for (const auto& [reason, value] : to_ps) {
      b.Counter("job_to_ps_total",
                "The job's frames sent on toward the PS without a complete aggregate, by reason.",
                value, {{"job", id}, {"reason", reason}});
    }
    b.Counter("job_orphaned_total", "The job's partial aggregates released as orphans.", j.orphaned,
              {{"job", id}});
  }
  b.Gauge("aggregators_in_use", "Aggregators holding a partial aggregate.",
          static_cast<double>(s.aggregators_in_use));
  b.Gauge("aggregators", "Aggregators of the switch.", static_cast<double>(s.aggregators));
  const std::pair<const char*, uint64_t> routing[] = {
      {"unroutable", s.routing.unroutable}, {"no_multicast_ports", s.routing.no_multicast_ports},
      {"hairpin", s.routing.hairpin},       {"multicast", s.routing.multicast},
      {"ce_marked", s.routing.ce_marked}};
  for (const auto& [name, value] : routing) {
    b.Counter(absl::StrFormat("routing_%s_total", name),
              "Routing counter of that name (stats JSON 'routing').", value);
  }
  b.Counter("poll_rounds_total", "Rounds of the datapath thread.", s.poll_rounds);
  b.Gauge("uptime_seconds", "Seconds since the daemon started.", s.uptime_s);
  return b.Take();
}

namespace {

// TotalLine: the line for every job together.
std::string TotalLine(const SwitchdStats& now, const SwitchdStats* before) {
  const PipelineCounters d = Delta(now.pipeline, before == nullptr ? nullptr : &before->pipeline);
  // Gradients the pipeline looked at: everything ATP and well formed that is
  // not a parameter packet, nor a worker's control frame.
  const uint64_t gradients = d.packets - d.not_atp - d.malformed - d.acks - d.forwarded_control;
  return absl::StrFormat(
      "%s: aggregating? %u gradient frames: %u aggregated here (%.1f%%), %u completed; "
      "not aggregated: %u collisions, %u resends to the PS, %u float, %u not for this switch, "
      "%u duplicates; %u partial aggregates flushed, %u orphaned; %u/%u aggregators in use",
      now.name, gradients, d.aggregated, Percent(d.aggregated, gradients), d.completed,
      d.collisions, d.resend_to_ps, d.forwarded_fp, d.not_aggregated, d.duplicates, d.flushed,
      d.orphaned, now.aggregators_in_use, now.aggregators);
}

}  // namespace

std::string AggregationLine(const SwitchdStats& now, const SwitchdStats* before) {
  std::string lines = TotalLine(now, before);
  for (size_t k = 0; k < now.jobs.size(); ++k) {
    // Jobs come in configuration order, which never changes while running.
    const bool comparable = before != nullptr && k < before->jobs.size() &&
                            before->jobs[k].job == now.jobs[k].job;
    const switch_emulator::PipelineJobCounters d =
        JobDelta(now.jobs[k].counters, comparable ? &before->jobs[k].counters : nullptr);
    // Every frame of the job this switch sends on toward the PS is either a
    // complete aggregate or one of the reasons.
    const uint64_t incomplete =
        d.collisions + d.resend_to_ps + d.flushed + d.forwarded_fp + d.not_aggregated;
    absl::StrAppendFormat(
        &lines,
        "\n%s: job %u aggregating? %u completed here (%.1f%% of the %u frames sent on); "
        "sent on incomplete: %u collisions, %u resends, %u flushed partials, %u float, "
        "%u not aggregated here; %u control frames; %u orphaned",
        now.name, now.jobs[k].job, d.completed, Percent(d.completed, d.completed + incomplete),
        d.completed + incomplete, d.collisions, d.resend_to_ps, d.flushed, d.forwarded_fp,
        d.not_aggregated, d.forwarded_control, d.orphaned);
  }
  return lines;
}

}  // namespace atp::switchd
