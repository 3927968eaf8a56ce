// lib/metrics/endpoint_metrics.cc: WorkerMetrics, ParameterServerMetrics and
// the servers over a Worker's or ParameterServer's stats().
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "atp/metrics.h"
#include "lib/metrics/metric_builder.h"

namespace atp {

std::vector<Metric> WorkerMetrics(const WorkerStats& s) {
  metrics::MetricBuilder b("atp_worker_");
  b.Counter("frames_sent_total", "Frames the transport took (first sends and resends).", s.frames_sent);
  b.Counter("fragments_sent_total", "Fragments sent for the first time.", s.fragments_sent);
  b.Counter("retransmissions_total", "Fragments resent (loss, timeout, overflow).", s.retransmissions);
  b.Counter("timeouts_total", "Retransmission timeouts.", s.timeouts);
  b.Counter("spurious_timeouts_total",
            "Retransmission timeouts whose resent position was answered twice (spurious).",
            s.spurious_timeouts);
  b.Counter("loss_events_total", "Fragments declared lost by reordering.", s.loss_events);
  b.Counter("collisions_total", "Parameter packets carrying a new aggregator index.", s.collisions);
  b.Counter("ecn_marks_total", "Parameter packets with ECN set.", s.ecn_marks);
  b.Counter("overflow_requests_total", "Requests to resend a fragment as float32.", s.overflow_requests);
  b.Counter("float_results_total", "Parameter packets that completed a fragment on the float32 path.",
            s.float_results);
  b.Counter("parameter_packets_total", "Parameter packets that completed a fragment.", s.parameter_packets);
  b.Counter("frames_received_total", "Frames the transport handed over.", s.frames_received);
  b.Counter("decode_errors_total", "Received frames that were not valid ATP frames.", s.decode_errors);
  b.Counter("source_refused_total", "Valid frames not from the queue's PS (docs/security.md).",
            s.source_refused);
  b.Counter("ignored_total", "Valid frames not for an in-flight fragment.", s.ignored);
  b.Counter("operations_started_total", "Push, Pull and PushPull operations started.", s.operations_started);
  b.Counter("operations_finished_total", "Operations finished.", s.operations_finished);
  b.Gauge("window_fragments", "Sum of the queues' congestion windows, fragments.", s.window);
  const std::string queue = "queue";
  for (const WorkerQueueStatistics& q : s.queues) {
    const MetricLabels l = {{queue, absl::StrCat(q.queue)}};
    b.Gauge("queue_window_fragments", "Congestion window of one queue, fragments.", q.window, l);
    b.Gauge("queue_ssthresh_fragments", "Slow-start threshold of one queue, fragments.", q.ssthresh, l);
    b.Gauge("queue_in_flight_fragments", "Fragments sent, not acknowledged.", static_cast<double>(q.in_flight), l);
    b.Gauge("queue_queued_fragments", "Fragments assigned, not yet sent.", static_cast<double>(q.queued_fragments), l);
    b.Counter("queue_fragments_assigned_total", "Fragments the scheduler gave this queue.", q.fragments_assigned, l);
    b.Counter("queue_frames_sent_total", "Frames this queue sent.", q.frames_sent, l);
    b.Counter("queue_retransmissions_total", "Fragments this queue resent.", q.retransmissions, l);
    b.Counter("queue_tx_backpressure_total", "Bursts the transport took only in part.", q.tx_backpressure, l);
    b.Gauge("queue_srtt_seconds", "Smoothed round-trip time.", absl::ToDoubleSeconds(q.srtt), l);
    b.Gauge("queue_rto_seconds", "Retransmission timeout now.", absl::ToDoubleSeconds(q.rto), l);
  }
  return b.Take();
}

std::vector<Metric> ParameterServerMetrics(const ParameterServerStats& s) {
  metrics::MetricBuilder b("atp_ps_");
  b.Counter("frames_received_total", "Frames handed to the PS.", s.frames_received);
  b.Counter("decode_errors_total", "Frames rejected as not valid ATP frames.", s.decode_errors);
  b.Counter("source_refused_total",
            "Valid frames from a source the job does not name (docs/security.md).", s.source_refused);
  b.Counter("frames_sent_total", "Parameter packets and overflow requests sent, per copy.", s.frames_sent);
  b.Counter("tx_dropped_total", "Frames not sent: no buffer or no room.", s.tx_dropped);
  const std::pair<const char*, uint64_t> outcomes[] = {
      {"contribution", s.contributions}, {"duplicate", s.duplicates},
      {"integer_on_float_path", s.integer_on_float_path}, {"param_resent", s.param_resent},
      {"stale", s.stale}, {"ahead", s.ahead}, {"unknown_job", s.unknown_job},
      {"wrong_shard", s.wrong_shard}, {"shape_mismatch", s.shape_mismatch},
      {"malformed", s.malformed}, {"unexpected_ack", s.unexpected_ack},
      {"control", s.control}};
  for (const auto& [outcome, value] : outcomes) {
    b.Counter("gradients_total", "Gradient messages given to the engine, by outcome.", value,
              {{"outcome", outcome}});
  }
  b.Counter("completed_total",
            "Fragments completed, by path: switch (arrived whole from the switches), ps (summed "
            "here from several contributions), float (the float32 overflow path).",
            s.switch_completed, {{"path", "switch"}});
  b.Counter("completed_total", "", s.completed - s.fp_completed - s.switch_completed,
            {{"path", "ps"}});
  b.Counter("completed_total", "", s.fp_completed, {{"path", "float"}});
  b.Counter("collisions_rehashed_total", "Completions that carried a new aggregator index.",
            s.collisions_rehashed);
  b.Counter("overflow_requests_total", "Requests that workers resend a fragment as float32.",
            s.overflow_requests);
  b.Counter("orphans_released_total", "Partial fragments dropped after the orphan timeout.",
            s.orphans_released);
  b.Counter("ce_to_ecn_total", "Gradient frames a switch marked CE, their ecn bit set.", s.ce_to_ecn);
  // Control frames and what they lead to (docs/protocol.md "Runs and restarts").
  b.Counter("control_received_total", "Control frames understood and acted on.", s.control_received);
  b.Counter("control_rejected_total", "Control frames that did not decode.", s.control_rejected);
  b.Counter("status_sent_total", "Status messages sent, all kinds.", s.status_sent);
  b.Counter("join_requests_total", "Status messages asking a queue's workers to join.",
            s.join_requests);
  b.Counter("rebuilds_total", "Queues rebuilt from the workers' joins (restart, new run).",
            s.rebuilds);
  b.Counter("stale_joins_total", "Joins answering another PS's request: ignored.", s.stale_joins);
  b.Counter("unsynchronized_gradients_total",
            "Gradients held back on a queue another run was joining.", s.unsynchronized_gradients);
  b.Counter("unsynchronized_declarations_total",
            "Operation declarations held back on a queue another run was joining.",
            s.unsynchronized_declarations);
  b.Counter("replay_requests_total", "Status messages asking a worker to replay results.",
            s.replay_requests);
  b.Counter("replays_total", "Replayed parameter packets taken as their position's result.",
            s.replays);
  b.Counter("mismatches_total", "Joins or operations that disagreed with the job's.",
            s.mismatches);
  b.Counter("operations_confirmed_total", "Pieces of operations every worker declared alike.",
            s.operations_confirmed);
  b.Counter("pulls_total", "kPull frames (SkipReduce's contribution variant), by outcome.",
            s.pulls_answered, {{"outcome", "answered"}});
  b.Counter("pulls_total", "", s.pulls_ignored, {{"outcome", "ignored"}});
  return b.Take();
}

absl::StatusOr<std::unique_ptr<MetricsServer>> ServeWorkerMetrics(const Worker& worker,
                                                                  MetricsServerOptions options) {
  options.labels.insert(options.labels.begin(), {"job", absl::StrCat(worker.options().job.job_id)});
  return MetricsServer::Start(std::move(options), [&worker] { return WorkerMetrics(worker.stats()); });
}

absl::StatusOr<std::unique_ptr<MetricsServer>> ServeParameterServerMetrics(
    const ParameterServer& server, MetricsServerOptions options) {
  return MetricsServer::Start(std::move(options),
                              [&server] { return ParameterServerMetrics(server.stats()); });
}

}  // namespace atp
