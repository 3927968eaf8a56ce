#include "sim/goodput_stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace atp::sim {

double JainIndex(std::span<const double> shares) {
  double sum = 0.0;
  double squares = 0.0;
  for (double x : shares) {
    sum += x;
    squares += x * x;
  }
  if (shares.empty() || squares <= 0.0) return 1.0;
  return sum * sum / (static_cast<double>(shares.size()) * squares);
}

double CoefficientOfVariation(std::span<const double> series) {
  if (series.empty()) return 0.0;
  double sum = 0.0;
  for (double x : series) sum += x;
  const double mean = sum / static_cast<double>(series.size());
  if (mean <= 0.0) return 0.0;
  double variance = 0.0;
  for (double x : series) variance += (x - mean) * (x - mean);
  variance /= static_cast<double>(series.size());
  return std::sqrt(variance) / mean;
}

ShareStats SecondHalfShares(const ExperimentResult& result, TimeDelta sample_interval) {
  ShareStats stats;
  if (result.jobs.empty() || sample_interval <= TimeDelta::Zero()) return stats;
  size_t bins = result.jobs.front().goodput_series_gbps.size();
  for (const JobResult& job : result.jobs) bins = std::min(bins, job.goodput_series_gbps.size());
  // Only whole bins during which every job was still running.
  for (const JobResult& job : result.jobs) {
    if (!job.completed) continue;
    const auto whole =
        static_cast<size_t>(job.completion_time.ToNanoseconds() / sample_interval.ToNanoseconds());
    bins = std::min(bins, whole);
  }
  if (bins == 0) return stats;
  stats.first_bin = static_cast<int>(bins / 2);
  stats.end_bin = static_cast<int>(bins);
  for (const JobResult& job : result.jobs) {
    const std::span<const double> window(job.goodput_series_gbps.data() + stats.first_bin,
                                         static_cast<size_t>(stats.end_bin - stats.first_bin));
    double sum = 0.0;
    for (double x : window) sum += x;
    stats.mean_gbps.push_back(sum / static_cast<double>(window.size()));
    stats.cv.push_back(CoefficientOfVariation(window));
  }
  stats.jain = JainIndex(stats.mean_gbps);
  for (double cv : stats.cv) {
    stats.max_cv = std::max(stats.max_cv, cv);
    stats.mean_cv += cv / static_cast<double>(stats.cv.size());
  }
  return stats;
}

}  // namespace atp::sim
