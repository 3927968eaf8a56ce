// sim/node.h: what every simulated node shares: a name and numbered
// ports. Port i of a node is one end of a cable: the node sends on port(i)
// (a Link it does not own) and receives what the cable's other Link delivers
// with `port` = i.
#ifndef ATP_SIM_NODE_H_
#define ATP_SIM_NODE_H_

#include <span>
#include <string>
#include <vector>

#include "sim/link.h"
#include "sim/packet.h"

namespace atp::sim {

class Node : public PacketReceiver {
 public:
  explicit Node(std::string name) : name_(std::move(name)) {}

  // AddPort: makes `egress` (owned by the Network, outliving the node) the
  // node's next port; returns its index.
  int AddPort(Link* egress) {
    ports_.push_back(egress);
    return static_cast<int>(ports_.size()) - 1;
  }
  Link* port(int i) const { return ports_[static_cast<size_t>(i)]; }
  int port_count() const { return static_cast<int>(ports_.size()); }
  const std::string& name() const { return name_; }
  // partition: which of the network's partitions (Simulator and pool) the
  // node lives in (network.h); set by the builder before it is connected.
  int partition() const { return partition_; }
  void set_partition(int partition) { partition_ = partition; }

 protected:
  // SendToPorts: sends `packet` out of every port in `ports` except
  // `exclude` (copies for all but the last). Returns the frames queued.
  int SendToPorts(PacketPtr packet, std::span<const int> ports, int exclude) {
    int last = -1;
    for (int p : ports) {
      if (p != exclude) last = p;
    }
    if (last < 0) return 0;
    int queued = 0;
    for (int p : ports) {
      if (p == exclude || p == last) continue;
      queued += port(p)->Send(packet->pool->Clone(*packet)) == SendResult::kQueued;
    }
    queued += port(last)->Send(std::move(packet)) == SendResult::kQueued;
    return queued;
  }

 private:
  std::string name_;
  std::vector<Link*> ports_;
  int partition_ = 0;
};

}  // namespace atp::sim

#endif  // ATP_SIM_NODE_H_
