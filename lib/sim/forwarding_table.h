// lib/sim/forwarding_table.h: where a switch sends a frame: unicast routes
// (destination address -> port, with a default port toward the core) and
// multicast groups (group -> ports).
#ifndef ATP_LIB_SIM_FORWARDING_TABLE_H_
#define ATP_LIB_SIM_FORWARDING_TABLE_H_

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace atp::sim {

class ForwardingTable {
 public:
  static constexpr int kNoRoute = -1;

  void AddRoute(uint32_t ip, int port) { routes_[ip] = port; }
  // SetDefaultPort: where addresses without a route go (kNoRoute: dropped).
  void SetDefaultPort(int port) { default_port_ = port; }
  void AddGroupMember(uint32_t group, int port) {
    std::vector<int>& ports = groups_[group];
    if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  }

  // Lookup: the port for a unicast address, or kNoRoute.
  int Lookup(uint32_t ip) const {
    auto it = routes_.find(ip);
    return it != routes_.end() ? it->second : default_port_;
  }
  // GroupPorts: the member ports of `group` (empty if unknown).
  std::span<const int> GroupPorts(uint32_t group) const {
    auto it = groups_.find(group);
    return it != groups_.end() ? std::span<const int>(it->second) : std::span<const int>();
  }

 private:
  absl::flat_hash_map<uint32_t, int> routes_;
  absl::flat_hash_map<uint32_t, std::vector<int>> groups_;
  int default_port_ = kNoRoute;
};

}  // namespace atp::sim

#endif  // ATP_LIB_SIM_FORWARDING_TABLE_H_
