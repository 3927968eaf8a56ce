// examples/atp_sim/visibility.h: what atp-sim records besides its report:
//
//   --pcap=FILE        the frames of chosen links (--pcap_links) as they go
//                      onto the wire, stamped with simulated time (ns since
//                      the start), one pcap file: open it with Wireshark and
//                      tools/wireshark/atp.lua
//   --plot=FILE.png    (or .svg) goodput per job over time, worker 0's
//                      congestion window per job, the deepest queue of each
//                      link kind and the aggregators in use per ToR, drawn by
//                      tools/plot/atp_sim_plot.py (Debian's matplotlib) from
//                      FILE.json, the samples this writes beside it; with
//                      --scenario=NAME, the scenario's table as a figure
//
//   SimVisibility vis;
//   ATP_RETURN_IF_ERROR(vis.Attach(*experiment));   // before Run
//   experiment->Run();
//   ATP_RETURN_IF_ERROR(vis.Finish());               // writes the samples, draws
#ifndef ATP_EXAMPLES_ATP_SIM_VISIBILITY_H_
#define ATP_EXAMPLES_ATP_SIM_VISIBILITY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "examples/atp_sim/scenario_table.h"
#include "lib/capture/pcap_ring.h"
#include "sim/alarm.h"
#include "sim/experiment.h"

namespace atp::sim_tool {

struct VisibilityOptions {
  std::string pcap;                     // "" = none
  std::vector<std::string> pcap_links;  // link names ("w0->tor0") or kinds ("tor_to_ps")
  std::string plot;                     // "" = none; .png or .svg
  TimeDelta plot_interval = TimeDelta::FromMicroseconds(20);
  std::string python = "/usr/bin/python3";
  std::string plot_script;              // tools/plot/atp_sim_plot.py
  std::string title;
};

// VisibilityOptionsFromFlags: --pcap, --pcap_links, --plot, --plot_interval_us,
// --plot_python, --plot_script; InvalidArgument names the flag.
absl::StatusOr<VisibilityOptions> VisibilityOptionsFromFlags();

// PlotScenarioTable: a named scenario's figure (--scenario=NAME --plot=FILE):
// one panel per numeric column against the rows' labels (their text
// columns), from FILE.json.
absl::Status PlotScenarioTable(const ScenarioTable& table, const VisibilityOptions& options);

class SimVisibility {
 public:
  explicit SimVisibility(VisibilityOptions options);
  ~SimVisibility();

  // Attach: taps the chosen links and starts the sampler. InvalidArgument
  // for a link that does not exist; Unavailable if FILE cannot be created.
  absl::Status Attach(sim::Experiment& experiment);
  // Finish: closes the capture, writes the samples and draws the plot
  // (Unavailable with the script's exit status when drawing fails).
  absl::Status Finish();

 private:
  struct Sample {
    double time_us = 0;
    std::vector<double> goodput_gbps;   // per job
    std::vector<double> window;         // per job: worker 0, queue 0
    std::vector<double> depth;          // per link kind: the deepest link
    std::vector<double> aggregators;    // per ToR
  };
  void TakeSample(TimePoint now);

  VisibilityOptions options_;
  sim::Network* network_ = nullptr;
  std::unique_ptr<capture::PcapRing> pcap_;
  std::unique_ptr<sim::Alarm> sampler_;
  std::vector<uint64_t> last_fragments_;
  std::vector<Sample> samples_;
};

}  // namespace atp::sim_tool

#endif  // ATP_EXAMPLES_ATP_SIM_VISIBILITY_H_
