// lib/metrics/metrics_server.cc: MetricsServer and MetricsText over
// prometheus-cpp (pull: an embedded CivetWeb HTTP server).
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/config.h"
#include "atp/metrics.h"
#if ATP_HAVE_PROMETHEUS
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"
#endif

namespace atp {

#if ATP_HAVE_PROMETHEUS
namespace {

std::vector<prometheus::MetricFamily> ToFamilies(const std::vector<Metric>& metrics,
                                                 const MetricLabels& extra) {
  std::vector<prometheus::MetricFamily> families;
  families.reserve(metrics.size());
  for (const Metric& m : metrics) {
    prometheus::MetricFamily f;
    f.name = m.name;
    f.help = m.help;
    f.type = m.type == MetricType::kCounter ? prometheus::MetricType::Counter
                                            : prometheus::MetricType::Gauge;
    for (const MetricSample& s : m.samples) {
      prometheus::ClientMetric c;
      for (const auto& [name, value] : extra) c.label.push_back({name, value});
      for (const auto& [name, value] : s.labels) c.label.push_back({name, value});
      if (m.type == MetricType::kCounter) {
        c.counter.value = s.value;
      } else {
        c.gauge.value = s.value;
      }
      f.metric.push_back(std::move(c));
    }
    families.push_back(std::move(f));
  }
  return families;
}

// SourceCollectable: a scrape calls the source for a fresh snapshot.
class SourceCollectable final : public prometheus::Collectable {
 public:
  SourceCollectable(MetricsSource source, MetricLabels labels)
      : source_(std::move(source)), labels_(std::move(labels)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return ToFamilies(source_(), labels_);
  }

 private:
  MetricsSource source_;
  MetricLabels labels_;
};

}  // namespace

struct MetricsServer::State {
  std::shared_ptr<SourceCollectable> collectable;
  std::unique_ptr<prometheus::Exposer> exposer;
};
#else
struct MetricsServer::State {};
#endif

absl::Status MetricsServerOptions::Validate(std::string_view field) const {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".port: ", port,
                                                   " is outside 0..65535"));
  }
  if (address.empty() || address.find(':') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".address: '", address, "' is not an IPv4 address"));
  }
  return absl::OkStatus();
}

bool MetricsAvailable() { return ATP_HAVE_PROMETHEUS; }

MetricsServer::MetricsServer(std::unique_ptr<State> state, int port)
    : state_(std::move(state)), port_(port) {}

MetricsServer::~MetricsServer() = default;

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(MetricsServerOptions options,
                                                                    MetricsSource source) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
#if ATP_HAVE_PROMETHEUS
  auto state = std::make_unique<State>();
  state->collectable = std::make_shared<SourceCollectable>(std::move(source), options.labels);
  const std::string bind = absl::StrCat(options.address, ":", options.port);
  try {
    // One thread: scrapes are rare and each takes a snapshot.
    state->exposer = std::make_unique<prometheus::Exposer>(bind, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", bind, ": ", e.what()));
  }
  state->exposer->RegisterCollectable(state->collectable);
  const std::vector<int> ports = state->exposer->GetListeningPorts();
  const int port = ports.empty() ? options.port : ports.front();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(state), port));
#else
  (void)source;
  return absl::FailedPreconditionError(
      "metrics: this libatp was built without prometheus-cpp (install prometheus-cpp-dev and "
      "configure with -DLIBATP_WITH_PROMETHEUS=ON)");
#endif
}

std::string MetricsText(const std::vector<Metric>& metrics, const MetricLabels& labels) {
#if ATP_HAVE_PROMETHEUS
  return prometheus::TextSerializer().Serialize(ToFamilies(metrics, labels));
#else
  (void)metrics;
  (void)labels;
  return {};
#endif
}

}  // namespace atp
