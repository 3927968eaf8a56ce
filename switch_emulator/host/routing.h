// switch_emulator/host/routing.h: atp-switchd's forwarding tables: IPv4
// routes (longest prefix wins) and multicast groups, both mapping to port
// indices. Pure data, built at startup and read by the datapath thread.
//
//   RouteTable routes;
//   routes.Add(*wire::Ipv4Address::Parse("10.1.0.0"), 24, /*port=*/0);
//   routes.Add({0}, 0, /*port=*/3);                          // default route
//   std::optional<uint32_t> port = routes.Lookup(dst);      // 0 for 10.1.0.7, else 3
//   RouteCache cache;                                        // a datapath thread's
//   uint32_t same = cache.LookupPort(routes, dst);           // kNoPort for none
//
//   MulticastTable groups;
//   groups.Add(group, {0, 1, 2});
//   std::span<const uint32_t> ports = groups.Ports(group);  // empty when unknown
#ifndef ATP_SWITCH_EMULATOR_HOST_ROUTING_H_
#define ATP_SWITCH_EMULATOR_HOST_ROUTING_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "atp/wire.h"

namespace atp::switchd {

// IsMulticastAddress: 224.0.0.0/4.
constexpr bool IsMulticastAddress(uint32_t ipv4) { return (ipv4 >> 28) == 0xE; }

class RouteTable {
 public:
  // Add: frames to prefix/length go to `port`. AlreadyExists for the same
  // prefix twice; InvalidArgument for length > 32 or bits beyond the length.
  absl::Status Add(wire::Ipv4Address prefix, uint32_t length, uint32_t port);
  // Set: as Add, but a route already there for the prefix now goes to `port`.
  absl::Status Set(wire::Ipv4Address prefix, uint32_t length, uint32_t port);

  // kNoPort: LookupPort's answer when no prefix holds the address; never a
  // route's port (Add refuses it).
  static constexpr uint32_t kNoPort = ~uint32_t{0};

  // Lookup: the port of the longest prefix holding `ipv4` (host order), or
  // nullopt when none does. At most one hash probe per prefix length in use.
  std::optional<uint32_t> Lookup(uint32_t ipv4) const {
    const uint32_t port = LookupPort(ipv4);
    if (port == kNoPort) return std::nullopt;
    return port;
  }
  // LookupPort: Lookup for the datapath, kNoPort for none. GCC 12 returns an
  // std::optional<uint32_t> built on the stack as two stores and reloads it
  // as one 8-byte load, which stalls store forwarding on every lookup.
  uint32_t LookupPort(uint32_t ipv4) const;

  size_t size() const { return size_; }
  // port_limit: one more than the largest port index in the table (0 if empty).
  uint32_t port_limit() const { return port_limit_; }
  // version: changes with every route added or changed (never 0).
  uint64_t version() const { return version_; }

 private:
  uint64_t version_ = 1;
  uint32_t port_limit_ = 0;
  // by_length_[l]: prefix (masked, host order) -> port, for routes of length l.
  std::array<absl::flat_hash_map<uint32_t, uint32_t>, 33> by_length_;
  // lengths_: the lengths in use, longest first.
  std::vector<uint32_t> lengths_;
  size_t size_ = 0;
};

// RouteCache: one datapath thread's direct-mapped cache of a RouteTable's
// answers (kNoPort included), emptied whenever the table's version moves.
// A table lookup is a hash probe per prefix length in use: about 110
// instructions for a destination behind the default route of a table that
// also has host routes, as every switch of the in-process fabric has; a
// cached one about 10. Not thread-safe: one per thread.
class RouteCache {
 public:
  uint32_t LookupPort(const RouteTable& table, uint32_t ipv4) {
    Entry& entry = entries_[(ipv4 * 0x9E3779B9u) >> (32 - kBits)];  // Fibonacci hashing
    if (entry.version != table.version() || entry.ipv4 != ipv4) {
      entry = Entry{table.version(), ipv4, table.LookupPort(ipv4)};
    }
    return entry.port;
  }

 private:
  struct Entry {
    uint64_t version = 0;  // the table's when filled; 0: empty
    uint32_t ipv4 = 0;
    uint32_t port = RouteTable::kNoPort;
  };
  static constexpr int kBits = 6;
  std::array<Entry, size_t{1} << kBits> entries_{};
};

class MulticastTable {
 public:
  // Add: `group` is replicated to `ports`. AlreadyExists for a group twice;
  // InvalidArgument if `group` is not 224.0.0.0/4 or `ports` is empty.
  absl::Status Add(wire::Ipv4Address group, std::vector<uint32_t> ports);
  // AddMember: appends `port` to `group` (created if new) unless it is
  // listed already: for a caller building groups port by port (the
  // simulator's topology). InvalidArgument if `group` is not multicast.
  absl::Status AddMember(wire::Ipv4Address group, uint32_t port);

  // Ports: the group's ports, empty when it is unknown.
  std::span<const uint32_t> Ports(uint32_t group) const {
    auto it = groups_.find(group);
    if (it == groups_.end()) return {};
    return it->second;
  }

  size_t size() const { return groups_.size(); }
  // port_limit: one more than the largest port index in the table (0 if empty).
  uint32_t port_limit() const { return port_limit_; }

 private:
  uint32_t port_limit_ = 0;
  absl::flat_hash_map<uint32_t, std::vector<uint32_t>> groups_;
};

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_HOST_ROUTING_H_
