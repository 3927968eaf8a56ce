// switch_emulator/daemon/switch_daemon.h: the switch pipeline bound to N
// transport ports, polled by one thread: the core of atp-switchd, without
// files, flags or DPDK, so tests drive it over in-process loopback devices.
//
//   SwitchDaemonOptions options;
//   options.pipeline = config.ToPipelineConfig();
//   options.routes = ...;  options.multicast = ...;
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<SwitchDaemon> daemon,
//                        SwitchDaemon::Create(std::move(options), {{"w0", dev0}, {"up", dev1}}));
//   ATP_RETURN_IF_ERROR(daemon->Start());     // the datapath thread
//   ... SwitchdStats s = daemon->Stats(); ...  // any thread
//   daemon->Stop();
//
// Tests call PollRound(now) on their own thread instead of Start().
//
// What happens to a received frame (Process on the pipeline, then):
//   kAbsorbed, kMalformed     -> released (counted by the pipeline; malformed per port too)
//   kToPs, kForward (unicast) -> the port of the longest route for its IPv4 destination
//   kForward to 224.0.0.0/4   -> the multicast table's ports for that destination
//   kMulticast                -> the multicast table's ports for the job's group
// Never back out of the port it came in on. Multicast copies come from each
// egress queue's tx_pool (the original goes to the last port). Egress queue:
// UDP destination port - base_port, modulo the egress port's queue count.
// The ECN depth handed to the pipeline is what the egress queue still held at
// its last Flush (frames waiting for room at the next hop). Frames a port
// refuses after tx_attempts tries are dropped and counted; none is leaked.
// Frames are forwarded with their Ethernet header unchanged (the endpoints
// address them to their final destination's MAC).
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
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/options.h"
#include "atp/time.h"
#include "atp/transport.h"
#include "switch_emulator/daemon/routing.h"
#include "switch_emulator/daemon/stats.h"
#include "switch_emulator/pipeline/pipeline.h"

namespace atp::switchd {

// DaemonPort: a port and the device behind it (not owned; outlives the daemon).
struct DaemonPort {
  std::string name;
  transport::Device* device = nullptr;
};

struct SwitchDaemonOptions {
  std::string name = "atp-switchd";
  switch_emulator::PipelineConfig pipeline;
  RouteTable routes;          // port indices into the DaemonPort list
  MulticastTable multicast;   // idem; a job's group is PipelineConfig's multicast_group
  // clock: read once per poll round; unset: CLOCK_MONOTONIC. Tests inject a fake.
  std::function<TimePoint()> clock;
  PollingOptions polling;     // the datapath thread's back-off when idle
  uint32_t max_burst = 32;    // frames per RxBurst, 1..256
  uint32_t tx_attempts = 4;   // TxBurst tries (a Flush between) before dropping, >= 1
  // orphan_scan_budget: aggregators ScanOrphans visits per poll round, >= 1.
  size_t orphan_scan_budget = 256;
  // on_thread_start / on_thread_stop: run on the datapath thread (DPDK
  // registers it as an lcore there).
  std::function<void()> on_thread_start;
  std::function<void()> on_thread_stop;
};

class SwitchDaemon {
 public:
  // Create: validates the options (burst, attempts, ports, route and
  // multicast port indices) and creates the pipeline.
  static absl::StatusOr<std::unique_ptr<SwitchDaemon>> Create(SwitchDaemonOptions options,
                                                              std::vector<DaemonPort> ports);

  SwitchDaemon(const SwitchDaemon&) = delete;
  SwitchDaemon& operator=(const SwitchDaemon&) = delete;
  ~SwitchDaemon();

  // Start: the datapath thread, polling until Stop. FailedPrecondition if
  // already running.
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
  const switch_emulator::SwitchPipeline& pipeline() const { return pipeline_; }

 private:
  struct Port {
    std::string name;
    transport::Device* device = nullptr;
    uint32_t queues = 0;
    PortCounters counters;
  };
  // Staging: frames waiting to be sent on one (port, queue), at most max_burst.
  struct Staging {
    std::vector<transport::FrameRef> frames;
    size_t count = 0;
  };

  SwitchDaemon(SwitchDaemonOptions options, std::vector<Port> ports,
               switch_emulator::SwitchPipeline pipeline);

  void Run();
  void HandleBurst(uint32_t in_port, size_t n, TimePoint now);
  // DepthFor: the ECN depth toward where `frame` will go.
  uint32_t DepthFor(uint32_t in_port, const transport::FrameRef& frame) const;
  void Unicast(uint32_t in_port, const transport::FrameRef& frame, uint32_t dst);
  void Multicast(uint32_t in_port, const transport::FrameRef& frame, uint32_t group);
  uint32_t EgressQueue(const transport::FrameRef& frame, uint32_t port) const;
  void Stage(uint32_t port, uint32_t queue, const transport::FrameRef& frame);
  void TransmitStaged();
  void Transmit(size_t slot);
  void Release(const transport::FrameRef& frame);
  void FlushAll();
  SwitchdStats Collect() const;

  static size_t Slot(uint32_t port, uint32_t queue) {
    return size_t{port} * transport::kMaxQueues + queue;
  }

  SwitchDaemonOptions options_;
  std::vector<Port> ports_;
  switch_emulator::SwitchPipeline pipeline_;
  TimePoint started_;
  RoutingCounters routing_;
  uint64_t poll_rounds_ = 0;

  // Datapath scratch, sized at Create.
  std::vector<transport::FrameRef> rx_;
  std::vector<transport::FrameRef> release_;
  size_t release_count_ = 0;
  std::vector<Staging> staging_;     // [Slot(port, queue)]
  std::vector<size_t> touched_;      // slots with staged frames
  std::vector<uint32_t> held_;       // [Slot(port, queue)]: Flush's last answer

  // Thread and snapshots.
  std::thread thread_;
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
