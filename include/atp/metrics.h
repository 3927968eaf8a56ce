// atp/metrics.h: Prometheus metrics of libatp's endpoints and tools, served
// as the Prometheus text exposition over HTTP (GET /metrics) with
// prometheus-cpp (Debian's prometheus-cpp-dev) when libatp is built with it
// (ATP_HAVE_PROMETHEUS; MetricsAvailable() says so at run time).
//
// An application exports its Worker's counters with one call, and keeps the
// server for as long as it should answer:
//
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<atp::MetricsServer> metrics,
//                        atp::ServeWorkerMetrics(*worker, {.port = 9464}));
//   // curl http://127.0.0.1:9464/metrics  ->  atp_worker_fragments_sent_total{job="7"} 4096 ...
//
// Values are read when a scrape arrives (a stats snapshot per scrape), so
// they are as fresh as the snapshot (atp/worker.h, atp/parameter_server.h).
// Names follow the Prometheus conventions: atp_<component>_<what>[_total]
// with counters ending in _total, base units (seconds), labels for
// dimensions (port, direction, reason, job, queue). docs/observability.md
// lists them. Python: the bindings call ServeWorkerMetrics (worker.serve_metrics).
#ifndef ATP_METRICS_H_
#define ATP_METRICS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/parameter_server.h"
#include "atp/worker.h"

namespace atp {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

struct MetricSample {
  MetricLabels labels;
  double value = 0;
};

enum class MetricType : uint8_t { kCounter, kGauge };

// Metric: one metric family: a name, its help text and its samples.
struct Metric {
  std::string name;
  std::string help;
  MetricType type = MetricType::kCounter;
  std::vector<MetricSample> samples;
};

// MetricsSource: what a scrape reads; called on a server thread.
using MetricsSource = std::function<std::vector<Metric>()>;

struct MetricsServerOptions {
  // address: where to listen; "0.0.0.0" for every interface.
  std::string address = "127.0.0.1";
  // port: 1..65535, or 0 for any free port (MetricsServer::port() says which).
  int port = 0;
  // labels: added to every sample (e.g. {"job", "7"} for a process serving one job).
  MetricLabels labels;

  absl::Status Validate(std::string_view field = "MetricsServerOptions") const;
};

// MetricsAvailable: whether this libatp was built with prometheus-cpp.
bool MetricsAvailable();

class MetricsServer {
 public:
  // Start: listens and answers GET /metrics from `source` until destroyed.
  // FailedPrecondition without prometheus-cpp; Unavailable when the address
  // cannot be bound (in use, no such interface).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(MetricsServerOptions options,
                                                              MetricsSource source);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // port: the port it listens on.
  int port() const { return port_; }

 private:
  struct State;
  MetricsServer(std::unique_ptr<State> state, int port);
  std::unique_ptr<State> state_;
  int port_ = 0;
};

// MetricsText: `metrics` in the Prometheus text exposition format (what a
// scrape returns), with `labels` added to every sample. Empty without
// prometheus-cpp.
std::string MetricsText(const std::vector<Metric>& metrics, const MetricLabels& labels = {});

// WorkerMetrics: every counter of WorkerStats (atp_worker_*_total), the
// window and in-flight gauges, and per queue (label queue) the window,
// in-flight fragments, srtt and rto.
std::vector<Metric> WorkerMetrics(const WorkerStats& stats);

// ParameterServerMetrics: every counter of ParameterServerStats
// (atp_ps_*_total; messages by outcome as atp_ps_gradients_total{outcome=};
// completions as atp_ps_completed_total{path="integer|float"}).
std::vector<Metric> ParameterServerMetrics(const ParameterServerStats& stats);

// ServeWorkerMetrics / ServeParameterServerMetrics: a MetricsServer over the
// endpoint's stats(), with label job=<id> (the worker's job; for a server,
// set options.labels yourself when it serves one job). The endpoint must
// outlive the server.
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeWorkerMetrics(const Worker& worker,
                                                                  MetricsServerOptions options);
absl::StatusOr<std::unique_ptr<MetricsServer>> ServeParameterServerMetrics(
    const ParameterServer& server, MetricsServerOptions options);

}  // namespace atp

#endif  // ATP_METRICS_H_
