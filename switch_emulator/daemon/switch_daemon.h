// switch_emulator/daemon/switch_daemon.h: the switch pipeline bound to N
// transport ports, polled by one thread: the core of atp-switchd, without
// files, flags or DPDK, so tests drive it over in-process loopback devices.
//
//   SwitchDaemonOptions options;
//   options.host.pipeline = config.ToPipelineConfig();
//   options.host.routes = ...;  options.host.multicast = ...;
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<SwitchDaemon> daemon,
//                        SwitchDaemon::Create(std::move(options), {{"w0", dev0}, {"up", dev1}}));
//   ATP_RETURN_IF_ERROR(daemon->Start());     // the datapath thread
//   ... SwitchdStats s = daemon->Stats(); ...  // any thread
//   daemon->Stop();
//
// Tests call PollRound(now) on their own thread instead of Start().
//
// The datapath is the switch host (switch_emulator/host/switch_host.h: what
// happens to each frame, ECN, drops); this class only adds the thread, the
// clock and the statistics snapshots.
//
// Threads: the devices' queues belong to the datapath thread between Start
// and Stop (to the PollRound caller otherwise). Stats() may be called from
// any thread; while running it asks the datapath thread for a snapshot.
#ifndef ATP_SWITCH_EMULATOR_DAEMON_SWITCH_DAEMON_H_
#define ATP_SWITCH_EMULATOR_DAEMON_SWITCH_DAEMON_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/options.h"
#include "atp/time.h"
#include "atp/transport.h"
#include "switch_emulator/host/routing.h"
#include "switch_emulator/host/switch_host.h"
#include "switch_emulator/host/switch_host_stats.h"
#include "switch_emulator/pipeline/pipeline.h"

namespace atp::switchd {

// DaemonPort: a port and the device behind it (not owned; outlives the daemon).
using DaemonPort = HostPort;

struct SwitchDaemonOptions {
  // host: the datapath's options (name, pipeline, routes, multicast,
  // admission, bursts, orphan scans; port indices into the DaemonPort list),
  // given to the SwitchHost as they are. The default orphan_scan_interval
  // (zero) and orphan_scan_spread scan every poll round, its share of a pass
  // per quarter of the orphan timeout.
  SwitchHostOptions host;
  // clock: read once per poll round; unset: CLOCK_MONOTONIC. Tests inject a fake.
  std::function<TimePoint()> clock;
  // polling: the datapath thread's back-off when idle; polling.cpus: the
  // thread runs on cpus[0] (it is thread 0 of its group of one).
  PollingOptions polling;
  // on_thread_start / on_thread_stop: run on the datapath thread (DPDK
  // registers it as an lcore there).
  std::function<void()> on_thread_start;
  std::function<void()> on_thread_stop;
};

class SwitchDaemon {
 public:
  // kCpusField: the option Start's refusal of a CPU names.
  static constexpr char kCpusField[] = "SwitchDaemonOptions.polling.cpus";

  // Create: validates the options (burst, attempts, ports, route and
  // multicast port indices) and creates the pipeline.
  static absl::StatusOr<std::unique_ptr<SwitchDaemon>> Create(SwitchDaemonOptions options,
                                                              std::vector<DaemonPort> ports);

  SwitchDaemon(const SwitchDaemon&) = delete;
  SwitchDaemon& operator=(const SwitchDaemon&) = delete;
  ~SwitchDaemon();

  // Start: the datapath thread, polling until Stop. FailedPrecondition if
  // already running; InvalidArgumentError naming the CPU when
  // polling.cpus[0] is not one this process may run on (no thread is left
  // running then).
  absl::Status Start();
  // Stop: stops and joins the thread (after flushing every queue). Idempotent.
  void Stop();
  bool running() const { return running_.load(std::memory_order_acquire); }

  // PollRound: one round on the caller's thread (only while not running):
  // one RxBurst per queue of every port and what follows, a Flush of every
  // queue, an orphan scan. Returns the frames received.
  size_t PollRound(TimePoint now);

  // Stats: a snapshot. Any thread; while running it waits (up to a second)
  // for the datapath thread to take it.
  SwitchdStats Stats();

  // pipeline: for tests, only while not running.
  const switch_emulator::SwitchPipeline& pipeline() const { return host_->pipeline(); }

 private:
  SwitchDaemon(SwitchDaemonOptions options, std::unique_ptr<SwitchHost> host);

  void Run();
  SwitchdStats Collect() const;

  SwitchDaemonOptions options_;
  std::unique_ptr<SwitchHost> host_;
  TimePoint started_;

  // Thread and snapshots.
  std::thread thread_;
  // start_gate_: the thread waits here until Start has pinned it, so that
  // everything it runs (on_thread_start included) runs on its CPU;
  // abandoned_ (written before the release) tells it to return at once.
  std::binary_semaphore start_gate_{0};
  bool abandoned_ = false;
  std::atomic<bool> running_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> snapshot_requested_{0};
  std::mutex snapshot_mu_;
  std::condition_variable snapshot_cv_;
  uint64_t snapshot_served_ = 0;  // under snapshot_mu_
  SwitchdStats snapshot_;         // under snapshot_mu_
};

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_DAEMON_SWITCH_DAEMON_H_
