// python/src/worker_stats_dict.h: a Worker's statistics as a Python dict,
// the one shape both modules return (atp._atp's Worker.stats() and the torch
// backend's worker_stats()): one key per WorkerStats field, durations in
// seconds, "queues" a list of per-queue dicts.
#ifndef ATP_PYTHON_SRC_WORKER_STATS_DICT_H_
#define ATP_PYTHON_SRC_WORKER_STATS_DICT_H_

#include "absl/time/time.h"
#include "atp/worker.h"
#include "pybind11/pybind11.h"

namespace atp::python {

inline pybind11::dict QueueStatsDict(const WorkerQueueStatistics& q) {
  pybind11::dict d;
  d["queue"] = q.queue;
  d["frames_sent"] = q.frames_sent;
  d["fragments_sent"] = q.fragments_sent;
  d["fragments_skipped"] = q.fragments_skipped;
  d["fragments_not_contributed"] = q.fragments_not_contributed;
  d["pulls_sent"] = q.pulls_sent;
  d["retransmissions"] = q.retransmissions;
  d["timeouts"] = q.timeouts;
  d["spurious_timeouts"] = q.spurious_timeouts;
  d["loss_events"] = q.loss_events;
  d["collisions"] = q.collisions;
  d["ecn_marks"] = q.ecn_marks;
  d["overflow_requests"] = q.overflow_requests;
  d["float_results"] = q.float_results;
  d["parameter_packets"] = q.parameter_packets;
  d["frames_received"] = q.frames_received;
  d["decode_errors"] = q.decode_errors;
  d["source_refused"] = q.source_refused;
  d["ignored"] = q.ignored;
  d["tx_backpressure"] = q.tx_backpressure;
  d["window"] = q.window;
  d["ssthresh"] = q.ssthresh;
  d["in_flight"] = q.in_flight;
  d["queued_fragments"] = q.queued_fragments;
  d["fragments_assigned"] = q.fragments_assigned;
  d["srtt_s"] = absl::ToDoubleSeconds(q.srtt);
  d["rto_s"] = absl::ToDoubleSeconds(q.rto);
  return d;
}

inline pybind11::dict WorkerStatsDict(const WorkerStats& s) {
  pybind11::dict d;
  d["frames_sent"] = s.frames_sent;
  d["fragments_sent"] = s.fragments_sent;
  d["fragments_skipped"] = s.fragments_skipped;
  d["fragments_not_contributed"] = s.fragments_not_contributed;
  d["pulls_sent"] = s.pulls_sent;
  d["retransmissions"] = s.retransmissions;
  d["timeouts"] = s.timeouts;
  d["spurious_timeouts"] = s.spurious_timeouts;
  d["loss_events"] = s.loss_events;
  d["collisions"] = s.collisions;
  d["ecn_marks"] = s.ecn_marks;
  d["overflow_requests"] = s.overflow_requests;
  d["float_results"] = s.float_results;
  d["parameter_packets"] = s.parameter_packets;
  d["frames_received"] = s.frames_received;
  d["decode_errors"] = s.decode_errors;
  d["source_refused"] = s.source_refused;
  d["ignored"] = s.ignored;
  d["window"] = s.window;
  d["operations_started"] = s.operations_started;
  d["operations_finished"] = s.operations_finished;
  pybind11::list queues;
  for (const WorkerQueueStatistics& q : s.queues) queues.append(QueueStatsDict(q));
  d["queues"] = queues;
  return d;
}

}  // namespace atp::python

#endif  // ATP_PYTHON_SRC_WORKER_STATS_DICT_H_
