// sim/goodput_stats.h: fairness and stability of the jobs' goodput, from
// the series an Experiment samples (ExperimentConfig::sample_interval).
//
//   config.sample_interval = TimeDelta::FromMicroseconds(50);
//   ExperimentResult result = experiment->Run();
//   ShareStats shares = SecondHalfShares(result, config.sample_interval);
//   if (shares.jain < 0.95) ...  // unfair
//   if (shares.max_cv > 0.5) ...  // unstable
#ifndef ATP_SIM_GOODPUT_STATS_H_
#define ATP_SIM_GOODPUT_STATS_H_

#include <span>
#include <vector>

#include "atp/time.h"
#include "sim/experiment.h"

namespace atp::sim {

// JainIndex: (sum x)^2 / (n * sum x^2), in [1/n, 1]; 1 = equal shares. An
// empty or all-zero input gives 1 (nobody is favoured).
double JainIndex(std::span<const double> shares);

// CoefficientOfVariation: population standard deviation / mean; 0 for a
// flat series, an empty one or one whose mean is 0 (a series that never
// moved is stable).
double CoefficientOfVariation(std::span<const double> series);

// ShareStats: the jobs' goodput over the second half of the time every job
// was running (from the start to the first job's completion; the whole run if
// no job completed). Jobs are in ExperimentResult order.
struct ShareStats {
  int first_bin = 0;  // the window: bins [first_bin, end_bin) of every series
  int end_bin = 0;
  std::vector<double> mean_gbps;  // per job, mean of its bins in the window
  std::vector<double> cv;         // per job, CoefficientOfVariation of those bins
  double jain = 1.0;              // JainIndex of mean_gbps
  double max_cv = 0.0;            // the largest cv
  double mean_cv = 0.0;           // mean of cv
};

// SecondHalfShares: `sample_interval` is the config's (> 0, and the run was
// sampled; with no samples every field keeps its default).
ShareStats SecondHalfShares(const ExperimentResult& result, TimeDelta sample_interval);

}  // namespace atp::sim

#endif  // ATP_SIM_GOODPUT_STATS_H_
