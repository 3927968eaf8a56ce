#include "examples/atp_sim/visibility.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <utility>
#include <variant>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "sim/network.h"
#include "sim/packet_filter.h"
#include "lib/tool/flag_checks.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, pcap, "",
          "Write the frames of the --pcap_links links to this pcap file, stamped with simulated "
          "time (open it with Wireshark and tools/wireshark/atp.lua). Empty: none.");
ABSL_FLAG(std::string, pcap_links, "tor_to_ps,ps_to_tor",
          "--pcap: comma-separated link names (w0->tor0) or kinds (worker_to_tor, tor_to_worker, "
          "ps_to_tor, tor_to_ps, tor_to_core, core_to_tor).");
ABSL_FLAG(std::string, plot, "",
          "Draw goodput per job, windows, queue depths and aggregators in use over time into this "
          ".png or .svg (and write the samples to FILE.json). Needs python3-matplotlib.");
ABSL_FLAG(double, plot_interval_us, 20,
          "--plot: simulated microseconds between samples, 0.001..86400000000.");
ABSL_FLAG(std::string, plot_python, "/usr/bin/python3",
          "--plot: the Python with matplotlib (Debian's python3-matplotlib).");
ABSL_FLAG(std::string, plot_script, ATP_SIM_PLOT_SCRIPT, "--plot: the drawing script.");

namespace atp::sim_tool {
namespace {

constexpr const char* kLinkKindNames[sim::kLinkKinds] = {
    "worker_to_tor", "tor_to_worker", "ps_to_tor", "tor_to_ps", "tor_to_core", "core_to_tor"};

absl::Status Bad(const char* flag, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", why));
}

// PcapTap: a filter that records every frame it sees and changes nothing.
class PcapTap final : public sim::PacketFilter {
 public:
  explicit PcapTap(capture::PcapRing* ring) : PacketFilter(sim::TrafficClass::kAll), ring_(ring) {}
  std::string_view name() const override { return "pcap_tap"; }

 protected:
  void Apply(sim::Packet& packet, TimePoint wire_time, sim::FilterOutcome&) override {
    ring_->Write(packet.frame(), wire_time.ToNanoseconds());
  }

 private:
  capture::PcapRing* ring_;
};

// RunPlotScript: the drawing script on `json`; its messages go to stderr.
absl::Status RunPlotScript(const VisibilityOptions& options, const std::string& json) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(options.python.c_str(), options.python.c_str(), options.plot_script.c_str(),
            json.c_str(), options.plot.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = -1;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "--plot: ", options.python, " ", options.plot_script, " failed (exit ",
        WIFEXITED(status) ? WEXITSTATUS(status) : -1,
        "); is python3-matplotlib installed (--plot_python)?"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<VisibilityOptions> VisibilityOptionsFromFlags() {
  VisibilityOptions o;
  o.pcap = absl::GetFlag(FLAGS_pcap);
  o.pcap_links = absl::StrSplit(absl::GetFlag(FLAGS_pcap_links), ',', absl::SkipEmpty());
  if (!o.pcap.empty() && o.pcap_links.empty()) {
    return Bad("pcap_links", "names no link or link kind (nothing would be captured)");
  }
  o.plot = absl::GetFlag(FLAGS_plot);
  if (!o.plot.empty() && !absl::EndsWith(o.plot, ".png") && !absl::EndsWith(o.plot, ".svg")) {
    return Bad("plot", absl::StrCat("'", o.plot, "' must end in .png or .svg"));
  }
  if (o.pcap.empty()) {
    if (absl::Status s = tool::RefuseGiven({"pcap_links"}, "only with --pcap"); !s.ok()) return s;
  }
  if (o.plot.empty()) {
    if (absl::Status s = tool::RefuseGiven({"plot_interval_us", "plot_python", "plot_script"},
                                           "only with --plot");
        !s.ok()) {
      return s;
    }
  }
  // Checked now: the picture and its samples are written after the run.
  if (absl::Status s = tool::CheckWritableFile("plot", o.plot); !s.ok()) return s;
  if (absl::Status s = tool::CheckWritableFile("pcap", o.pcap); !s.ok()) return s;
  const double interval_us = absl::GetFlag(FLAGS_plot_interval_us);
  // At least the simulator's 1 ns resolution (0 would sample forever), at
  // most a simulated day (the int64 nanoseconds stay exact).
  if (!(interval_us >= 1e-3 && interval_us <= 86400e6)) {
    return Bad("plot_interval_us", absl::StrCat(interval_us, " is not in [0.001, 86400000000]"));
  }
  o.plot_interval = TimeDelta::FromNanoseconds(static_cast<int64_t>(interval_us * 1e3));
  o.python = absl::GetFlag(FLAGS_plot_python);
  o.plot_script = absl::GetFlag(FLAGS_plot_script);
  return o;
}

SimVisibility::SimVisibility(VisibilityOptions options) : options_(std::move(options)) {}
SimVisibility::~SimVisibility() = default;

absl::Status SimVisibility::Attach(sim::Experiment& experiment) {
  network_ = &experiment.network();
  if (!options_.pcap.empty()) {
    std::vector<sim::Link*> chosen;
    for (const std::string& wanted : options_.pcap_links) {
      // A kind counts only when this topology has links of it (tor_to_core
      // with one rack has none): a capture of nothing is refused, not
      // written empty.
      bool found = false;
      for (int k = 0; k < sim::kLinkKinds; ++k) {
        if (wanted != kLinkKindNames[k]) continue;
        for (sim::Link* l : network_->LinksOfKind(static_cast<sim::LinkKind>(k))) {
          chosen.push_back(l);
          found = true;
        }
      }
      for (const auto& l : network_->links()) {
        if (l->name() == wanted) {
          chosen.push_back(l.get());
          found = true;
        }
      }
      if (!found) {
        return Bad("pcap_links", absl::StrCat("no link or link kind '", wanted,
                                              "' with links in this topology"));
      }
    }
    // A link named twice (or by its name and its kind) is tapped once: each
    // tap would write every frame again.
    std::vector<sim::Link*> once;
    for (sim::Link* l : chosen) {
      if (std::find(once.begin(), once.end(), l) == once.end()) once.push_back(l);
    }
    chosen = std::move(once);
    capture::PcapRingOptions ring;
    const size_t slash = options_.pcap.rfind('/');
    ring.directory = slash == std::string::npos ? "." : options_.pcap.substr(0, slash);
    ring.stem = slash == std::string::npos ? options_.pcap : options_.pcap.substr(slash + 1);
    ring.single_file = true;
    absl::StatusOr<std::unique_ptr<capture::PcapRing>> opened = capture::PcapRing::Open(ring);
    if (!opened.ok()) return opened.status();
    pcap_ = *std::move(opened);
    // Filters run in the order added: the tap sees what the impairments
    // attached at Create let onto the wire.
    for (sim::Link* l : chosen) l->AddFilter(std::make_unique<PcapTap>(pcap_.get()));
  }
  if (!options_.plot.empty()) {
    last_fragments_.assign(network_->job_count(), 0);
    sampler_ = std::make_unique<sim::Alarm>(&network_->sim(), [this](TimePoint now) {
      TakeSample(now);
      sampler_->Set(now + options_.plot_interval);
    });
    sampler_->Set(TimePoint::Zero() + options_.plot_interval);
  }
  return absl::OkStatus();
}

void SimVisibility::TakeSample(TimePoint now) {
  Sample s;
  s.time_us = static_cast<double>(now.ToNanoseconds()) / 1e3;
  for (size_t j = 0; j < network_->job_count(); ++j) {
    const worker::WorkerQueueStats w = network_->job(j).workers.front()->Stats();
    const double bits = static_cast<double>(w.parameter_packets - last_fragments_[j]) *
                        static_cast<double>(wire::kPayloadBytes) * 8.0;
    s.goodput_gbps.push_back(bits / options_.plot_interval.ToSeconds() / 1e9);
    s.window.push_back(w.window);
    last_fragments_[j] = w.parameter_packets;
  }
  for (int k = 0; k < sim::kLinkKinds; ++k) {
    uint32_t deepest = 0;
    for (sim::Link* l : network_->LinksOfKind(static_cast<sim::LinkKind>(k))) {
      deepest = std::max(deepest, l->QueueDepth());
    }
    s.depth.push_back(deepest);
  }
  for (int r = 0; r < network_->rack_count(); ++r) {
    s.aggregators.push_back(static_cast<double>(network_->tor(r)->pipeline().aggregators_in_use()));
  }
  samples_.push_back(std::move(s));
}

absl::Status SimVisibility::Finish() {
  if (sampler_) sampler_->Cancel();
  if (pcap_) {
    pcap_->Flush();
    pcap_.reset();
  }
  if (options_.plot.empty()) return absl::OkStatus();
  nlohmann::json j;
  j["title"] = options_.title;
  j["interval_us"] = options_.plot_interval.ToSeconds() * 1e6;
  for (size_t job = 0; job < network_->job_count(); ++job) j["jobs"].push_back(network_->job(job).shape.job);
  j["link_kinds"] = kLinkKindNames;
  for (int r = 0; r < network_->rack_count(); ++r) j["tors"].push_back(network_->tor(r)->name());
  j["samples"] = nlohmann::json::array();
  for (const Sample& s : samples_) {
    j["samples"].push_back({{"t_us", s.time_us}, {"goodput_gbps", s.goodput_gbps}, {"window", s.window},
                            {"depth", s.depth}, {"aggregators_in_use", s.aggregators}});
  }
  const std::string samples_path = options_.plot + ".json";
  {
    std::ofstream out(samples_path);
    out << j.dump() << "\n";
    if (!out) return absl::UnavailableError(absl::StrCat("--plot: cannot write ", samples_path));
  }
  return RunPlotScript(options_, samples_path);
}

absl::Status PlotScenarioTable(const ScenarioTable& table, const VisibilityOptions& options) {
  nlohmann::json j;
  j["scenario"] = table.name;
  j["title"] = table.title;
  j["finding"] = table.finding;
  j["columns"] = table.columns;
  j["rows"] = nlohmann::json::array();
  for (const std::vector<Cell>& row : table.rows) {
    nlohmann::json r = nlohmann::json::array();
    for (const Cell& c : row) std::visit([&](const auto& v) { r.push_back(v); }, c);
    j["rows"].push_back(std::move(r));
  }
  const std::string path = options.plot + ".json";
  {
    std::ofstream out(path);
    out << j.dump() << "\n";
    if (!out) return absl::UnavailableError(absl::StrCat("--plot: cannot write ", path));
  }
  return RunPlotScript(options, path);
}

}  // namespace atp::sim_tool
