// atp-switchd: the ATP switch pipeline on N ports (DPDK memif / af_packet /
// af_xdp / NIC, or kernel UDP overlay sockets), configured by a YAML file.
//
//   atp-switchd --config=tor0.yaml --stats_json=/tmp/tor0.json --stats_interval_s=5
//   atp-switchd --config=tor0.yaml --check_config
//
// Exit status: 0 after SIGINT/SIGTERM (clean stop, stats written); 1 when a
// port cannot be opened; 2 on bad flags or a bad configuration (the message
// is "<config path>:<line>: <reason>"). SIGUSR1 writes the stats JSON.
// docs/switchd.md is the reference.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "atp/logging.h"
#include "lib/logging/log.h"
#include "lib/tool/command_line.h"
#include "lib/tool/flag_checks.h"
#include "switch_emulator/pipeline/aggregator.h"
#include "switch_emulator/daemon/config.h"
#include "lib/host/clock.h"
#include "switch_emulator/daemon/port_capture.h"
#include "switch_emulator/daemon/port_rate.h"
#include "switch_emulator/daemon/ports.h"
#include "switch_emulator/daemon/stats.h"
#include "switch_emulator/daemon/switch_daemon.h"
#include "switch_emulator/daemon/visibility.h"

ABSL_FLAG(std::string, config, "",
          "Path of the YAML configuration (required): ports, routes, multicast groups, jobs. "
          "See docs/switchd.md.");
ABSL_FLAG(int, stats_interval_s, 0,
          "Seconds between summary lines on stderr (frames in/out, aggregators in use, drops); "
          "0: none.");
ABSL_FLAG(std::string, stats_json, "",
          "Where to write the statistics JSON (atomically, via rename) at exit and on SIGUSR1; "
          "empty: SIGUSR1 logs a summary line instead.");
ABSL_FLAG(bool, check_config, false,
          "Parse and validate --config, print 'config ok' and exit 0 (2 if it is bad); opens no "
          "port.");
ABSL_FLAG(std::string, log_level, "info", "Log level: trace, debug, info, warn, error or off.");
ABSL_FLAG(int, max_sleep_us, 500,
          "Longest sleep of the idle datapath thread, microseconds, 1..1000000 (the latency an idle switch "
          "adds to the first frame after a pause). It spins, then yields, then sleeps.");
ABSL_FLAG(int, spin_iterations, atp::PollingOptions{}.spin_iterations,
          "Idle rounds the datapath thread spins (no syscall) before it yields; 0 by default, "
          "spin only with a core of its own.");
ABSL_FLAG(int, yield_iterations, atp::PollingOptions{}.yield_iterations,
          "Idle rounds the datapath thread yields the CPU (sched_yield) after spinning, before "
          "it sleeps.");
ABSL_FLAG(int, min_sleep_us, 20,
          "First sleep of the idle datapath thread, microseconds, 1..--max_sleep_us; each further "
          "idle sleep doubles, up to --max_sleep_us.");
ABSL_FLAG(bool, busy_poll, false,
          "The datapath thread never sleeps nor yields (lowest latency; takes a whole core).");
ABSL_FLAG(std::string, cpus, "",
          "The CPU the datapath thread runs on (one id, e.g. 1; a list: its first). Default: "
          "unpinned.");

ABSL_FLAG(std::string, pcap_dir, "",
          "Record what the ports receive and send as pcap files in this (existing) directory: "
          "<port>-rx-NNNNN.pcap and <port>-tx-NNNNN.pcap; every port, or only those whose YAML "
          "says 'pcap: true' when any does. Empty: no capture. docs/observability.md.");
ABSL_FLAG(int, pcap_max_file_mb, 64, "--pcap_dir: MiB per file before the next one begins.");
ABSL_FLAG(int, pcap_max_files, 4, "--pcap_dir: files kept per port and direction (a ring).");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics (GET /metrics) on this TCP port; 0: any free port (logged); "
          "-1: none. docs/observability.md.");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1",
          "--metrics_port: the address to listen on (0.0.0.0: every interface).");

namespace atp::switchd {
namespace {

constexpr char kProgram[] = "atp-switchd";
constexpr int kOpenFailedExit = 1;
// kBadUsageExit: bad flags or a bad configuration.
constexpr int kBadUsageExit = tool::kExitBadUsage;
constexpr uint32_t kKernelUdpBurst = 64;  // frames per burst when every port is kernel UDP

constexpr char kUsage[] =
    "the ATP switch pipeline (in-network aggregation) on N ports.\n"
    "  atp-switchd --config=tor0.yaml [--stats_json=PATH] [--stats_interval_s=N]\n"
    "  atp-switchd --config=tor0.yaml --check_config\n"
    "Exit status: 0 after SIGINT/SIGTERM (stats written); 1 a port cannot be opened;\n"
    "2 bad flags or configuration ('<path>:<line>: <reason>'). SIGUSR1 writes --stats_json.\n"
    "Configuration reference: docs/switchd.md.";

[[noreturn]] void BadConfig(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
  std::exit(kBadUsageExit);
}

bool SetLogLevelFromFlag() {
  const std::string level = absl::GetFlag(FLAGS_log_level);
  const std::pair<const char*, LogLevel> levels[] = {
      {"trace", LogLevel::kTrace}, {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},   {"error", LogLevel::kError}, {"off", LogLevel::kOff}};
  for (const auto& [name, value] : levels) {
    if (level == name) {
      SetLogLevel(value);
      return true;
    }
  }
  return false;
}

// Tables: the route and multicast tables of `config` (already validated, so
// a failure here is a bug in the parser, reported like a bad config).
absl::Status BuildTables(const SwitchdConfig& config, SwitchDaemonOptions& options) {
  for (const RouteConfig& r : config.routes) {
    if (absl::Status s = options.host.routes.Add(r.prefix, r.length, r.port_index); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(config.path, ":", r.line, ": ", s.message()));
    }
  }
  for (const MulticastConfig& m : config.multicast) {
    if (absl::Status s = options.host.multicast.Add(m.group, m.port_indices); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(config.path, ":", m.line, ": ", s.message()));
    }
  }
  for (uint32_t p = 0; p < config.ports.size(); ++p) {
    const PortConfig& port = config.ports[p];
    if (port.admits_parameters && port.admits_gradients) continue;
    options.host.admission.RestrictPort(p, port.admits_parameters, port.admits_gradients);
  }
  for (const JobEntryConfig& job : config.jobs) {
    if (!job.ingress_check) continue;
    if (absl::Status s = options.host.admission.Restrict(job.id, job.parameter_ports, job.gradient_ports);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(config.path, ":", job.line, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

void WriteStats(const SwitchdStats& stats) {
  const std::string path = absl::GetFlag(FLAGS_stats_json);
  if (path.empty()) return;
  if (absl::Status s = WriteStatsJson(path, stats); !s.ok()) {
    internal::Logger().error("{}", std::string(s.message()));
  }
}

int Main(int argc, char** argv) {
  tool::ParseCommandLineOrExit(argc, argv, "atp-switchd", {"switch_emulator/daemon/main"}, kUsage);
  if (!SetLogLevelFromFlag()) {
    std::fprintf(stderr, "atp-switchd: --log_level=%s: expected trace, debug, info, warn, error or off\n",
                 absl::GetFlag(FLAGS_log_level).c_str());
    return kBadUsageExit;
  }
  tool::ExitIfBad(kProgram, tool::CheckRange("stats_interval_s", absl::GetFlag(FLAGS_stats_interval_s),
                                              0, INT32_MAX));
  absl::StatusOr<PollingOptions> polling =
      tool::PollingFromFlags({.busy_poll = absl::GetFlag(FLAGS_busy_poll),
                              .spin_iterations = absl::GetFlag(FLAGS_spin_iterations),
                              .yield_iterations = absl::GetFlag(FLAGS_yield_iterations),
                              .min_sleep_us = absl::GetFlag(FLAGS_min_sleep_us),
                              .max_sleep_us = absl::GetFlag(FLAGS_max_sleep_us),
                              .cpus = absl::GetFlag(FLAGS_cpus)});
  tool::ExitIfBad(kProgram, polling.status());
  // Checked now: the statistics are written at exit, after the whole run.
  tool::ExitIfBad(kProgram, tool::CheckWritableFile("stats_json", absl::GetFlag(FLAGS_stats_json)));
  tool::ExitIfBad(kProgram, tool::CheckMetricsFlags(absl::GetFlag(FLAGS_metrics_port),
                                                    absl::GetFlag(FLAGS_metrics_address)));
  if (absl::GetFlag(FLAGS_pcap_dir).empty()) {
    tool::ExitIfBad(kProgram, tool::RefuseGiven({"pcap_max_file_mb", "pcap_max_files"}, "only with --pcap_dir"));
  }
  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (config_path.empty()) {
    std::fprintf(stderr, "atp-switchd: --config is required (see --help)\n");
    return kBadUsageExit;
  }
  absl::StatusOr<SwitchdConfig> config = LoadSwitchdConfig(config_path);
  if (!config.ok()) BadConfig(config.status());
  // The aggregator array is allocated whole at start.
  const double array_bytes = static_cast<double>(config->aggregators) *
                             (sizeof(switch_emulator::AggregatorState) +
                              sizeof(switch_emulator::AggregatorValues));
  if (tool::PhysicalMemoryBytes() > 0 && array_bytes > tool::PhysicalMemoryBytes() / 2) {
    BadConfig(absl::InvalidArgumentError(absl::StrCat(
        config_path, ": aggregators: ", config->aggregators, " need ",
        static_cast<int64_t>(array_bytes / (1 << 20)), " MiB, more than half of this machine's ",
        static_cast<int64_t>(tool::PhysicalMemoryBytes() / (1 << 20)), " MiB")));
  }

  SwitchDaemonOptions options;
  options.host.name = config->name;
  options.host.pipeline = config->ToPipelineConfig();
  // Kernel UDP ports only: bursts of 64 frames, a GSO send's most segments,
  // so a poll round's frames toward a port leave in one sendmmsg of one
  // datagram per run (32 frames took twice the system calls and skbs).
  if (!config->ports.empty() &&
      std::all_of(config->ports.begin(), config->ports.end(),
                  [](const PortConfig& port) { return port.type == PortType::kKernelUdp; })) {
    options.host.max_burst = kKernelUdpBurst;
  }
  if (absl::Status s = BuildTables(*config, options); !s.ok()) BadConfig(s);
  if (absl::StatusOr<switch_emulator::SwitchPipeline> p =
          switch_emulator::SwitchPipeline::Create(options.host.pipeline);
      !p.ok()) {
    BadConfig(absl::InvalidArgumentError(absl::StrCat(config_path, ":1: ", p.status().message())));
  }
  PortCaptureOptions capture;
  capture.directory = absl::GetFlag(FLAGS_pcap_dir);
  if (absl::GetFlag(FLAGS_pcap_max_file_mb) < 1 || absl::GetFlag(FLAGS_pcap_max_files) < 1) {
    std::fprintf(stderr, "atp-switchd: --pcap_max_file_mb and --pcap_max_files must be >= 1\n");
    return kBadUsageExit;
  }
  capture.max_file_bytes = uint64_t{static_cast<uint32_t>(absl::GetFlag(FLAGS_pcap_max_file_mb))} << 20;
  capture.max_files = static_cast<uint32_t>(absl::GetFlag(FLAGS_pcap_max_files));
  if (absl::Status s = CheckPortCapture(*config, capture); !s.ok()) {
    std::fprintf(stderr, "atp-switchd: %s\n", std::string(s.message()).c_str());
    return kBadUsageExit;
  }
  MetricsServerOptions metrics;
  metrics.port = absl::GetFlag(FLAGS_metrics_port);
  metrics.address = absl::GetFlag(FLAGS_metrics_address);
  if (metrics.port != -1) {
    if (!MetricsAvailable()) {
      BadConfig(absl::FailedPreconditionError(
          "atp-switchd: --metrics_port: this build has no prometheus-cpp (prometheus-cpp-dev)"));
    }
  }
  if (absl::GetFlag(FLAGS_check_config)) {
    std::printf("config ok\n");
    return 0;
  }

  // Signals are taken synchronously by this thread (sigtimedwait); every
  // thread started from here on (the EAL's, the datapath) inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<OpenedPorts> ports = OpenPorts(*config);
  if (!ports.ok()) {
    std::fprintf(stderr, "atp-switchd: %s\n", std::string(ports.status().message()).c_str());
    return kOpenFailedExit;
  }
  if (absl::Status s = CapturePorts(*config, capture, ports->devices); !s.ok()) {
    std::fprintf(stderr, "atp-switchd: %s\n", std::string(s.message()).c_str());
    return kOpenFailedExit;
  }
  // Outside the capture: a rate-limited port's frames are recorded when
  // they leave its egress FIFO.
  if (absl::Status s = LimitPortRates(*config, host::MonotonicNow, ports->devices); !s.ok()) {
    std::fprintf(stderr, "atp-switchd: %s\n", std::string(s.message()).c_str());
    return kOpenFailedExit;
  }
  std::vector<DaemonPort> daemon_ports;
  for (size_t i = 0; i < config->ports.size(); ++i) {
    daemon_ports.push_back({config->ports[i].name, ports->devices[i].get()});
  }
  options.polling = *polling;
  if (ports->dpdk) {
    options.on_thread_start = DpdkThreadStartHook();
    options.on_thread_stop = DpdkThreadStopHook();
  }
  absl::StatusOr<std::unique_ptr<SwitchDaemon>> daemon =
      SwitchDaemon::Create(std::move(options), std::move(daemon_ports));
  if (!daemon.ok()) {
    std::fprintf(stderr, "atp-switchd: %s\n", std::string(daemon.status().message()).c_str());
    return kOpenFailedExit;
  }
  if (absl::Status s = (*daemon)->Start(); !s.ok()) {
    // Start refuses a valid daemon only for a --cpus CPU this process may
    // not run on: a bad flag value, named as the flag.
    absl::string_view why = s.message();
    const bool bad_cpu = absl::ConsumePrefix(&why, absl::StrCat(SwitchDaemon::kCpusField, ": "));
    const std::string message = bad_cpu ? absl::StrCat("--cpus: ", why) : std::string(why);
    std::fprintf(stderr, "atp-switchd: %s\n", message.c_str());
    return bad_cpu ? kBadUsageExit : kOpenFailedExit;
  }
  // The metrics listener before the switch says it runs: a port in use or
  // an address that is not this host's fails the start (exit 1), not a
  // switch that said "running". After Start: a scrape reads the running
  // daemon's snapshot (before it, Stats() collects on the caller's thread,
  // which would race the datapath's first steps).
  std::unique_ptr<MetricsServer> metrics_server;
  if (metrics.port != -1) {
    SwitchDaemon* running = daemon->get();
    absl::StatusOr<std::unique_ptr<MetricsServer>> started =
        MetricsServer::Start(metrics, [running] { return SwitchdMetrics(running->Stats()); });
    if (!started.ok()) {
      std::fprintf(stderr, "atp-switchd: --metrics_port: %s\n", std::string(started.status().message()).c_str());
      return kOpenFailedExit;
    }
    metrics_server = *std::move(started);
    internal::Logger().info("{}: metrics on http://{}:{}/metrics", config->name, metrics.address,
                            metrics_server->port());
  }
  internal::Logger().info("{}: running, {} port(s), {} route(s), {} group(s), {} job(s)",
                          config->name, config->ports.size(), config->routes.size(),
                          config->multicast.size(), config->jobs.size());
  for (const JobEntryConfig& job : config->jobs) {
    const auto names = [&](const std::vector<uint32_t>& indices) {
      std::string out;
      for (uint32_t p : indices) absl::StrAppend(&out, out.empty() ? "" : ",", config->ports[p].name);
      return out;
    };
    if (job.ingress_check) {
      internal::Logger().info("{}: job {}: parameter packets admitted from [{}], gradients from [{}]",
                              config->name, job.id, names(job.parameter_ports),
                              names(job.gradient_ports));
    } else {
      internal::Logger().info("{}: job {}: ingress_check off, frames admitted on every port",
                              config->name, job.id);
    }
  }

  const int interval_s = absl::GetFlag(FLAGS_stats_interval_s);
  absl::Time next_summary = absl::Now() + absl::Seconds(interval_s);
  SwitchdStats previous = (*daemon)->Stats();
  for (;;) {
    const absl::Duration wait =
        interval_s > 0 ? std::max(next_summary - absl::Now(), absl::ZeroDuration()) : absl::Seconds(1);
    const timespec timeout = absl::ToTimespec(wait);
    const int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGINT || sig == SIGTERM) {
      internal::Logger().info("{}: {} received, stopping", config->name,
                              sig == SIGINT ? "SIGINT" : "SIGTERM");
      break;
    }
    if (sig == SIGUSR1) {
      const SwitchdStats stats = (*daemon)->Stats();
      if (absl::GetFlag(FLAGS_stats_json).empty()) {
        std::fprintf(stderr, "%s\n", SummaryLine(stats, nullptr).c_str());
      } else {
        WriteStats(stats);
      }
    }
    if (interval_s > 0 && absl::Now() >= next_summary) {
      SwitchdStats stats = (*daemon)->Stats();
      std::fprintf(stderr, "%s\n%s\n", SummaryLine(stats, &previous).c_str(),
                   AggregationLine(stats, &previous).c_str());
      previous = std::move(stats);
      next_summary += absl::Seconds(interval_s);
    }
  }
  metrics_server.reset();  // scrapes read the daemon
  (*daemon)->Stop();
  const SwitchdStats final_stats = (*daemon)->Stats();
  WriteStats(final_stats);
  std::fprintf(stderr, "%s\n%s\n", SummaryLine(final_stats, nullptr).c_str(),
               AggregationLine(final_stats, nullptr).c_str());
  daemon->reset();  // before the devices it polls
  return 0;
}

}  // namespace
}  // namespace atp::switchd

int main(int argc, char** argv) { return atp::switchd::Main(argc, argv); }
