// examples/atp_sim/report.h: atp-sim's output: a table per job, or one JSON
// object with the same fields.
#ifndef ATP_EXAMPLES_ATP_SIM_REPORT_H_
#define ATP_EXAMPLES_ATP_SIM_REPORT_H_

#include <string>

#include "sim/experiment.h"

namespace atp::sim_tool {

// Performance: how fast the simulator ran (wall clock; not part of the
// deterministic result).
// Frames are frame deliveries over links (one frame crossing one link), the
// run's verification of every result included.
struct Performance {
  double wall_seconds = 0.0;
  double cpu_seconds = 0.0;  // this process (single-threaded)
  double frames_per_wall_second = 0.0;
  double frames_per_cpu_second = 0.0;
};

std::string FormatTable(const sim::ExperimentConfig& config, const sim::ExperimentResult& result,
                        const Performance& performance);

std::string FormatJson(const sim::ExperimentConfig& config, const sim::ExperimentResult& result,
                       const Performance& performance);

}  // namespace atp::sim_tool

#endif  // ATP_EXAMPLES_ATP_SIM_REPORT_H_
