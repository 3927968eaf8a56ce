// examples/atp_sim/options.h: atp-sim's flags, turned into an
// ExperimentConfig (with every value checked, so a bad flag is a clear
// error rather than a surprise in the middle of a run).
#ifndef ATP_EXAMPLES_ATP_SIM_OPTIONS_H_
#define ATP_EXAMPLES_ATP_SIM_OPTIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "examples/atp_sim/scenarios.h"
#include "sim/experiment.h"

namespace atp::sim_tool {

// OutputFormat: what atp-sim prints.
enum class OutputFormat { kTable, kJson };

struct Options {
  sim::ExperimentConfig experiment;
  OutputFormat format = OutputFormat::kTable;
  // scenario: a named scenario (scenarios.h) to run instead of `experiment`;
  // empty = run `experiment`.
  std::string scenario;
  Scale scale = Scale::kFull;
  // partitions_chosen: --partitions was given (not 0, the automatic choice,
  // which --pcap and --plot bring down to 1).
  bool partitions_chosen = false;
};

// OptionsFromFlags: reads the parsed flags; InvalidArgumentError names the
// flag and the accepted range.
absl::StatusOr<Options> OptionsFromFlags();

}  // namespace atp::sim_tool

#endif  // ATP_EXAMPLES_ATP_SIM_OPTIONS_H_
