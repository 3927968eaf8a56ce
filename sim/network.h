// sim/network.h: a built simulated network: the simulator, the packet
// pool, every node and link, and where each job's workers and PS are.
// Built by BuildNetwork (topology.h); owns everything it holds.
//
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<Network> net, BuildNetwork(config));
//   for (Link* l : net->LinksOfKind(LinkKind::kTorToCore)) l->AddFilter(...);
//   net->sim().RunUntil(deadline);
#ifndef ATP_SIM_NETWORK_H_
#define ATP_SIM_NETWORK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/protocol/job_shape.h"
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
  Network() = default;
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;
  ~Network();

  Simulator& sim() { return sim_; }
  PacketPool& pool() { return pool_; }

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

 private:
  // Declared first: destroyed last, after everything that refers to them.
  Simulator sim_;
  PacketPool pool_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<LinkKind> link_kinds_;
  std::vector<std::unique_ptr<AtpSwitchNode>> tors_;
  std::unique_ptr<AtpSwitchNode> core_;
  std::vector<std::unique_ptr<WorkerNode>> workers_;
  std::vector<std::unique_ptr<PsNode>> ps_nodes_;
  std::vector<JobNodes> jobs_;
  int ps_rack_ = 0;
};

}  // namespace atp::sim

#endif  // ATP_SIM_NETWORK_H_
