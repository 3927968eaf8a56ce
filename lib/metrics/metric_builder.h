// lib/metrics/metric_builder.h: builds a list of atp::Metric families,
// merging samples of one name into one family (the first help text wins).
//
//   metrics::MetricBuilder b("atp_switch_");
//   b.Counter("frames_total", "Frames by port and direction.", rx, {{"port", "w0"}, {"direction", "rx"}});
//   std::vector<Metric> m = b.Take();
#ifndef ATP_LIB_METRICS_METRIC_BUILDER_H_
#define ATP_LIB_METRICS_METRIC_BUILDER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "atp/metrics.h"

namespace atp::metrics {

class MetricBuilder {
 public:
  explicit MetricBuilder(std::string prefix) : prefix_(std::move(prefix)) {}

  void Counter(std::string_view name, std::string_view help, uint64_t value, MetricLabels labels = {}) {
    Add(name, help, MetricType::kCounter, static_cast<double>(value), std::move(labels));
  }
  void Gauge(std::string_view name, std::string_view help, double value, MetricLabels labels = {}) {
    Add(name, help, MetricType::kGauge, value, std::move(labels));
  }
  std::vector<Metric> Take() { return std::move(metrics_); }

 private:
  void Add(std::string_view name, std::string_view help, MetricType type, double value,
           MetricLabels labels) {
    const std::string full = prefix_ + std::string(name);
    for (Metric& m : metrics_) {
      if (m.name == full) {
        m.samples.push_back({std::move(labels), value});
        return;
      }
    }
    metrics_.push_back({full, std::string(help), type, {{std::move(labels), value}}});
  }

  std::string prefix_;
  std::vector<Metric> metrics_;
};

}  // namespace atp::metrics

#endif  // ATP_LIB_METRICS_METRIC_BUILDER_H_
