// sim/network.h: a built simulated network: the simulators, the packet
// pools, every node and link, and where each job's workers and PS are.
// Built by BuildNetwork (topology.h); owns everything it holds.
//
// Partitions: a network has one partition, or two (TopologyConfig::
// partitions), each a Simulator and a PacketPool with the nodes that use
// them. RunUntil runs two partitions on two threads in windows of simulated
// time shorter than the delay of the links between them (the only contact
// between partitions: Link::Cross hands their frames over between windows),
// so neither can receive a frame sent in the window it is running. The run
// is deterministic (the same windows, the same handovers in link order,
// whatever the threads' speed), but events at the same nanosecond on both
// sides of a crossing link can run in another order than with one partition.
//
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<Network> net, BuildNetwork(config));
//   for (Link* l : net->LinksOfKind(LinkKind::kTorToCore)) l->AddFilter(...);
//   net->RunUntil(deadline);
#ifndef ATP_SIM_NETWORK_H_
#define ATP_SIM_NETWORK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lib/protocol/job_shape.h"
#include "sim/alarm.h"
#include "sim/atp_switch_node.h"
#include "sim/link.h"
#include "sim/packet.h"
#include "sim/ps_node.h"
#include "sim/simulator.h"
#include "sim/worker_node.h"

namespace atp::sim {

// LinkKind: where a link sits, for attaching filters to a class of links.
enum class LinkKind : uint8_t {
  kWorkerToTor,
  kTorToWorker,
  kPsToTor,
  kTorToPs,
  kTorToCore,
  kCoreToTor,
};
inline constexpr int kLinkKinds = 6;

// JobNodes: one job's shape and hosts.
struct JobNodes {
  protocol::JobShape shape;
  std::vector<int> racks;              // shape rack index -> physical rack
  std::vector<WorkerNode*> workers;    // in worker order (rack-major, as the PS sums)
  PsNode* ps = nullptr;
  TimePoint start_time;
};

class Network {
 public:
  // One partition until SetPartitions says otherwise.
  Network() { SetPartitions(1); }
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;
  ~Network();

  // sim, pool: partition `partition`'s (a single-partition network's only
  // ones by default).
  Simulator& sim(int partition = 0) { return *sims_[static_cast<size_t>(partition)]; }
  PacketPool& pool(int partition = 0) { return *pools_[static_cast<size_t>(partition)]; }
  int partitions() const { return static_cast<int>(sims_.size()); }

  // RunUntil: runs every partition through `deadline` (Simulator::RunUntil);
  // returns the events processed. With two partitions a RequestStop takes
  // effect at the end of the window it was made in.
  uint64_t RunUntil(TimePoint deadline);
  // RequestStop: from inside an Act: makes RunUntil return (at once with
  // one partition, as Simulator::Stop; at the window's end with two).
  void RequestStop();
  // At: runs `action` at simulated time `time` during RunUntil; it may
  // touch any node. With one partition it is an event like any other (an
  // Alarm, scheduled now). With two it runs between windows, both
  // partitions stopped and their clocks at `time`, before any event due at
  // `time` (actions at one time in the order given).
  void At(TimePoint time, std::function<void()> action);
  // Now: the clock (every partition's, between RunUntil calls).
  TimePoint Now() const { return sims_.front()->Now(); }
  uint64_t events_processed() const;
  // packets_outstanding: packets handed out by every partition's pool.
  uint64_t packets_outstanding() const;
  // kEventsForTwoThreads: below this many events in a window, handing the
  // next one to the other thread costs more than it saves.
  static constexpr uint64_t kEventsForTwoThreads = 128;
  // set_events_for_two_threads: a window runs on both threads when the one
  // before it had at least this many events (default kEventsForTwoThreads,
  // UINT64_MAX on a machine with one core); 0: every window, UINT64_MAX:
  // none. The run is the same either way.
  void set_events_for_two_threads(uint64_t events) { events_for_two_threads_ = events; }
  // windows: with two partitions, the windows run so far, and of those the
  // ones run on both threads (the others were too quiet to be worth it).
  uint64_t windows() const { return windows_; }
  uint64_t windows_on_two_threads() const { return windows_on_two_threads_; }

  size_t job_count() const { return jobs_.size(); }
  const JobNodes& job(size_t index) const { return jobs_[index]; }
  // JobIndex: the index of job id `job`, or -1.
  int JobIndex(uint8_t job) const;

  // tor: the ToR of physical rack `rack` (the PS's rack included).
  AtpSwitchNode* tor(int rack) const { return tors_[static_cast<size_t>(rack)].get(); }
  int rack_count() const { return static_cast<int>(tors_.size()); }
  // ps_rack: the physical rack of the PS hosts (equal to a worker rack in a
  // one-rack network).
  int ps_rack() const { return ps_rack_; }
  // core: the core switch, or null in a one-rack network.
  AtpSwitchNode* core() const { return core_.get(); }

  const std::vector<std::unique_ptr<Link>>& links() const { return links_; }
  std::vector<Link*> LinksOfKind(LinkKind kind) const;
  // FrameDeliveries: frames delivered by all links (the simulator's "packets").
  uint64_t FrameDeliveries() const;

  // Building blocks, for BuildNetwork.
  // Connect: a cable between port a of `a` and a new port of `b`: two Links.
  // Returns {a's port, b's port}.
  std::pair<int, int> Connect(Node* a, Node* b, const LinkConfig& a_to_b, LinkKind kind_a_to_b,
                              const LinkConfig& b_to_a, LinkKind kind_b_to_a);
  std::vector<std::unique_ptr<AtpSwitchNode>>& mutable_tors() { return tors_; }
  std::unique_ptr<AtpSwitchNode>& mutable_core() { return core_; }
  std::vector<std::unique_ptr<WorkerNode>>& mutable_workers() { return workers_; }
  std::vector<std::unique_ptr<PsNode>>& mutable_ps() { return ps_nodes_; }
  std::vector<JobNodes>& mutable_jobs() { return jobs_; }
  void set_ps_rack(int rack) { ps_rack_ = rack; }
  // SetPartitions: 1 or 2 (anew: every Simulator and pool is replaced);
  // before the first node is made.
  void SetPartitions(int partitions);

 private:
  // RunWindows: RunUntil with two partitions.
  uint64_t RunWindows(TimePoint deadline);
  // PartitionLoop: the second partition's thread: runs each window it is
  // given until the network goes away.
  void PartitionLoop();

  // Declared first: destroyed last, after everything that refers to them.
  std::vector<std::unique_ptr<Simulator>> sims_;
  std::vector<std::unique_ptr<PacketPool>> pools_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<LinkKind> link_kinds_;
  std::vector<std::unique_ptr<AtpSwitchNode>> tors_;
  std::unique_ptr<AtpSwitchNode> core_;
  std::vector<std::unique_ptr<WorkerNode>> workers_;
  std::vector<std::unique_ptr<PsNode>> ps_nodes_;
  std::vector<JobNodes> jobs_;
  int ps_rack_ = 0;

  // Two partitions: the links between them, the shortest time a frame takes
  // over one (ns: the window), and the second partition's thread. The main
  // thread publishes a window by storing its end and bumping window_; the
  // thread runs partition 1 to that end and stores the same number in
  // finished_ (each side spins briefly on the other's counter, then sleeps
  // on it with atomic wait/notify).
  std::vector<Link*> crossing_links_;
  int64_t window_ns_ = 0;
  std::multimap<TimePoint, std::function<void()>> actions_;  // At, by time
  std::vector<std::unique_ptr<Alarm>> alarms_;               // At, one partition
  std::atomic<bool> stop_requested_{false};
  int64_t window_end_ns_ = 0;
  std::atomic<uint64_t> window_{0};
  std::atomic<uint64_t> finished_{0};
  uint64_t partition_events_ = 0;  // partition 1's, of the last window
  // Events of the last window, both partitions: below
  // events_for_two_threads_ the next window runs on this thread alone.
  uint64_t events_for_two_threads_ = kEventsForTwoThreads;
  uint64_t last_window_events_ = 0;
  uint64_t windows_ = 0;
  uint64_t windows_on_two_threads_ = 0;
  bool quit_ = false;
  std::thread partition_thread_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_NETWORK_H_
