// switch_emulator/host/switch_host.h: the one host of the switch engine: the
// switch pipeline bound to N transport ports. No thread, no clock, no files:
// the caller passes `now` and calls again by the deadline Step returns.
// atp-switchd's datapath thread (switch_emulator/daemon/switch_daemon.h) and
// the simulator's ATP switch (sim/atp_switch_node.h, over simulated ports)
// both run it, so the simulator proves what the daemon does.
//
//   SwitchHostOptions options;
//   options.pipeline = ...;  options.routes = ...;  options.multicast = ...;
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<SwitchHost> host,
//                        SwitchHost::Create(std::move(options), {{"w0", dev0}, {"up", dev1}}));
//   for (;;) { host->Step(now); ... }       // or PollPort(port, now) for one port's frames
//
// What happens to a received frame: first the ingress check of a restricted
// job (options.admission: refused frames are released and counted per port
// and reason), then Process on the pipeline, then:
//   kAbsorbed, kMalformed     -> released (counted by the pipeline; malformed per port too)
//   kToPs, kForward (unicast) -> the port of the longest route for its IPv4 destination
//   kForward to 224.0.0.0/4   -> the multicast table's ports for that destination
//   kMulticast                -> the multicast table's ports for the job's group
// Never back out of the port it came in on. Multicast copies come from each
// egress queue's tx_pool (the original goes to the last port). Egress queue:
// UDP destination port - base_port, modulo the egress port's queue count.
//
// ECN: the depth handed to the pipeline is what the egress queue still held
// at its last Flush (frames waiting for room at the next hop: a DPDK ring, a
// simulated link's queue). The pipeline marks what it aggregates or sends to
// the PS; a kForward frame (a job this switch does not aggregate) that is
// ECN-capable gets CE here when that depth is past the pipeline's
// ecn_threshold, as any ECN switch would mark it.
//
// Frames a port refuses after tx_attempts tries are dropped and counted; none
// is leaked. Frames are forwarded with their Ethernet header unchanged.
//
// Threads: one thread at a time owns the host and its devices' queues.
#ifndef ATP_SWITCH_EMULATOR_HOST_SWITCH_HOST_H_
#define ATP_SWITCH_EMULATOR_HOST_SWITCH_HOST_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "atp/transport.h"
#include "switch_emulator/host/ingress_admission.h"
#include "switch_emulator/host/routing.h"
#include "switch_emulator/host/switch_host_stats.h"
#include "switch_emulator/pipeline/pipeline.h"

namespace atp::switchd {

// HostPort: a port and the device behind it (not owned; outlives the host).
struct HostPort {
  std::string name;
  transport::Device* device = nullptr;
};

// FrameDepthSource: see SwitchHostOptions::frame_depth.
class FrameDepthSource {
 public:
  // Handling: the host is about to run `frame` through its pipeline; the
  // copies it makes until the next Handling are of it. Called on the host's
  // thread for every frame it handles.
  virtual void Handling(const transport::FrameRef& frame) = 0;
  // Depth: the ECN depth of `frame` (the frame the host is handling, before
  // the pipeline sees it) at egress `port`'s queue `queue`. Called on the
  // host's thread; not for every frame (DepthMemo).
  virtual uint32_t Depth(uint32_t port, uint32_t queue, const transport::FrameRef& frame) = 0;

 protected:
  ~FrameDepthSource() = default;
};

struct SwitchHostOptions {
  std::string name = "atp-switchd";
  switch_emulator::PipelineConfig pipeline;
  RouteTable routes;          // port indices into the HostPort list
  MulticastTable multicast;   // idem; a job's group is PipelineConfig's multicast_group
  // admission: the ports each restricted job's parameter packets and
  // gradients may arrive on (port indices, as above); a frame of such a job
  // on another port is dropped before the pipeline and counted per port and
  // reason (PortCounters::rx_refused_*). Default: nothing restricted.
  IngressAdmission admission;
  uint32_t max_burst = 32;    // frames per RxBurst, 1..256
  uint32_t tx_attempts = 4;   // TxBurst tries (a Flush between) before dropping, >= 1
  // orphan_scan_budget: aggregators one orphan scan visits at most, >= 1.
  size_t orphan_scan_budget = 256;
  // orphan_scan_interval: time between orphan scans while aggregators are in
  // use; zero scans at every Step.
  TimeDelta orphan_scan_interval = TimeDelta::Zero();
  // orphan_scan_spread: a scan visits only its share of the time since the
  // last one (OrphanScanBudget): a full pass per quarter of the pipeline's
  // orphan timeout, however often Step runs. Without it every scan visits
  // orphan_scan_budget aggregators, which a daemon polling every few
  // microseconds pays at every round (the simulator, which steps only at its
  // deadlines, turns it off and scans everything each time).
  bool orphan_scan_spread = true;
  // depth_at_each_frame: the ECN depth of a frame's egress queue is its
  // Flush() answer at that frame (for media where Flush only reads a depth:
  // the simulator's links, the in-process fabric); false: what the queue
  // held at its last Flush (real ports, where Flush pushes frames out and
  // one per frame would break up bursts).
  bool depth_at_each_frame = false;
  // frame_depth: with depth_at_each_frame, asked for that depth instead of
  // the queue's Flush(), for a medium whose depth depends on where the frame
  // goes beyond the port (the in-process fabric: the backlog at the frame's
  // destination, while earlier frames of the burst are still staged). Null:
  // Flush(). Not owned; outlives the host.
  FrameDepthSource* frame_depth = nullptr;
};

class SwitchHost {
 public:
  // Create: validates the options (burst, attempts, ports, route and
  // multicast port indices) and creates the pipeline. `ports` may be empty
  // for a caller that adds them with AddPort.
  static absl::StatusOr<std::unique_ptr<SwitchHost>> Create(SwitchHostOptions options,
                                                            std::vector<HostPort> ports);
  // Create: the same around a pipeline the caller made (options.pipeline then
  // gives only the ECN threshold and base port the host itself uses).
  static absl::StatusOr<std::unique_ptr<SwitchHost>> Create(
      SwitchHostOptions options, std::vector<HostPort> ports,
      switch_emulator::SwitchPipeline pipeline);

  // AddPort: one more port (the next index); control path, before traffic.
  absl::Status AddPort(HostPort port);

  SwitchHost(const SwitchHost&) = delete;
  SwitchHost& operator=(const SwitchHost&) = delete;

  // Step: one round: one RxBurst per queue of every port and what follows, a
  // Flush of every queue, an orphan scan when one is due. Returns the frames
  // received; *deadline (if given) is when the host wants the next Step even
  // if nothing arrives (the next orphan scan; infinite when none is needed).
  size_t Step(TimePoint now, TimePoint* deadline = nullptr);

  // PollPort: what Step does for one port's frames only (no Flush of the
  // other ports, no orphan scan): for a caller that knows where frames
  // arrived (the simulator, the in-process fabric).
  size_t PollPort(uint32_t port, TimePoint now);
  // PollQueue: PollPort for one queue of the port, for a caller that knows
  // the queue too (the in-process fabric's ports receive on queue 0 only,
  // and asking their 15 other queues costs more than the frame).
  size_t PollQueue(uint32_t port, uint32_t queue, TimePoint now);

  // NextDeadline: when the next orphan scan is due (infinite while no
  // aggregator is in use).
  TimePoint NextDeadline() const;
  // ScanOrphansIfDue: the orphan scan of Step, alone. Returns true if it ran.
  bool ScanOrphansIfDue(TimePoint now);
  // OrphanScanBudget: the aggregators a scan `since_last` after the previous
  // one visits: with orphan_scan_spread, the aggregator count times
  // since_last / (orphan timeout / 4), rounded up, in [1, orphan_scan_budget];
  // without it (or with an infinite timeout), orphan_scan_budget.
  size_t OrphanScanBudget(TimeDelta since_last) const;

  // FlushAll: a Flush of every queue of every port.
  void FlushAll();

  // Collect: the counters now; uptime_s is left 0 (the host has no clock).
  SwitchdStats Collect() const;

  // routes / multicast: the tables, for a caller building them after Create
  // (the simulator's topology); control path only.
  RouteTable& routes() { return options_.routes; }
  MulticastTable& multicast() { return options_.multicast; }

  switch_emulator::SwitchPipeline& pipeline() { return pipeline_; }
  const switch_emulator::SwitchPipeline& pipeline() const { return pipeline_; }
  const SwitchHostOptions& options() const { return options_; }
  uint32_t port_count() const { return static_cast<uint32_t>(ports_.size()); }
  // WaitFds: the wait_fd of every queue of every port that has one (kernel
  // UDP sockets, loopback eventfds; not memif, whose PMD has no Rx
  // interrupts), for a thread that sleeps until a frame arrives.
  std::vector<int> WaitFds() const;

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

  SwitchHost(SwitchHostOptions options, std::vector<Port> ports,
             switch_emulator::SwitchPipeline pipeline);

  size_t PollQueues(uint32_t port, TimePoint now);
  void HandleBurst(uint32_t in_port, size_t n, TimePoint now);
  // LookedUp: the lookup DepthFor made for the frame's IPv4 destination (a
  // unicast route, or a group's ports), so that routing the frame after the
  // pipeline does not look it up again.
  struct LookedUp {
    enum class Kind : uint8_t { kNone, kUnicast, kGroup } kind = Kind::kNone;
    uint32_t dst = 0;
    uint32_t port = RouteTable::kNoPort;    // kUnicast
    std::span<const uint32_t> group_ports;  // kGroup
  };
  // DepthFor: the ECN depth toward where `frame` will go: the memo's answer
  // (inline: most frames), else LookUpDepth's for the destination `dst`.
  uint32_t DepthFor(uint32_t in_port, const transport::FrameRef& frame, uint32_t frame_queue,
                    LookedUp* looked_up);
  uint32_t LookUpDepth(uint32_t in_port, uint32_t dst, const transport::FrameRef& frame,
                       uint32_t frame_queue, LookedUp* looked_up);
  uint32_t EgressDepth(uint32_t port, uint32_t queue, const transport::FrameRef& frame);
  void MarkForwarded(const transport::FrameRef& frame, uint32_t depth);
  void Unicast(uint32_t in_port, const transport::FrameRef& frame, uint32_t frame_queue,
               uint32_t port);  // RouteTable::kNoPort: no route
  // Multicast: to `group`'s ports (`looked_up`'s, when it looked that group up).
  void Multicast(uint32_t in_port, const transport::FrameRef& frame, uint32_t frame_queue,
                 uint32_t group, const LookedUp& looked_up);
  // FrameQueue: the queue a frame names (its UDP destination port less the
  // base port; 0 for a frame that names none). EgressQueue: that queue on
  // egress port `port` (modulo the port's queue count).
  uint32_t FrameQueue(const transport::FrameRef& frame) const;
  uint32_t EgressQueue(uint32_t frame_queue, uint32_t port) const {
    return frame_queue % ports_[port].queues;
  }
  // Stage: `frame` for (port, queue): staged until the burst ends (or the
  // staging is full), or sent at once in a burst of one frame.
  void Stage(uint32_t port, uint32_t queue, const transport::FrameRef& frame);
  void TransmitStaged();
  void Transmit(size_t slot);
  // Send: TxBurst of `frames` on (port, queue), tx_attempts tries; what the
  // queue refuses is dropped and counted.
  void Send(uint32_t port, uint32_t queue, std::span<const transport::FrameRef> frames);
  void Release(const transport::FrameRef& frame);

  static absl::Status CheckPort(const HostPort& port, size_t index, uint16_t base_port);
  static size_t Slot(uint32_t port, uint32_t queue) {
    return size_t{port} * transport::kMaxQueues + queue;
  }

  SwitchHostOptions options_;
  std::vector<Port> ports_;
  switch_emulator::SwitchPipeline pipeline_;
  RoutingCounters routing_;
  RouteCache route_cache_;  // of options_.routes, for the datapath
  uint64_t poll_rounds_ = 0;
  TimePoint next_scan_ = TimePoint::FromNanoseconds(0);
  TimePoint last_scan_ = TimePoint::FromNanoseconds(0);

  // Datapath scratch, sized at Create.
  std::vector<transport::FrameRef> rx_;
  std::vector<transport::FrameRef> release_;
  size_t release_count_ = 0;
  std::vector<Staging> staging_;     // [Slot(port, queue)]
  std::vector<size_t> touched_;      // slots with staged frames
  std::vector<uint32_t> held_;       // [Slot(port, queue)]: Flush's last answer
  bool transmit_at_once_ = false;    // the burst being handled has one frame
  // depth_memo_: DepthFor's last answer. A depth changes only when this host
  // sends (Send) or between its bursts (other hosts' sends, receivers taking
  // frames, FlushAll), and a burst's frames mostly share an entry and a
  // destination: the lookups and depth reads run once per burst and
  // destination, not once per frame. Forgotten at every Send and at every
  // burst's start.
  struct DepthMemo {
    bool valid = false;
    uint32_t in_port = 0;
    uint32_t dst = 0;  // the frame's IPv4 destination, host order
    uint32_t frame_queue = 0;
    LookedUp looked_up;
    uint32_t depth = 0;
  };
  DepthMemo depth_memo_;
};

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_HOST_SWITCH_HOST_H_
