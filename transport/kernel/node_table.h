// transport/kernel/node_table.h: the kernel UDP transport's address book:
// ATP node address (the IPv4 in frames) -> one socket address per queue, and
// back from a sender's socket address to its node. Pure: no sockets.
#ifndef ATP_TRANSPORT_KERNEL_NODE_TABLE_H_
#define ATP_TRANSPORT_KERNEL_NODE_TABLE_H_

#include <netinet/in.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "atp/transport/kernel_udp.h"

namespace atp::transport::internal {

// ToSockaddr: `address` as the kernel takes it.
sockaddr_in ToSockaddr(const SocketAddress& address);
SocketAddress FromSockaddr(const sockaddr_in& address);

class NodeTable {
 public:
  // Node: one peer, with its sockets ready for sendmmsg.
  struct Node {
    DeviceAddress address;
    std::vector<sockaddr_in> queue_sockets;
  };
  using NodeIndex = uint32_t;

  // Add: fails (AlreadyExists) if the node address or one of its sockets is
  // already in the table, (InvalidArgument) if it has no queues or more than
  // 16, or a socket with port 0 or address 0.0.0.0.
  absl::Status Add(const KernelUdpPeer& peer);

  // FindNode: the node with ATP address `ipv4`.
  std::optional<NodeIndex> FindNode(uint32_t ipv4) const {
    auto it = by_node_.find(ipv4);
    if (it == by_node_.end()) return std::nullopt;
    return it->second;
  }
  // FindSender: the node owning socket `ip`:`port` (both host order).
  std::optional<NodeIndex> FindSender(uint32_t ip, uint16_t port) const {
    auto it = by_socket_.find(SocketKey(ip, port));
    if (it == by_socket_.end()) return std::nullopt;
    return it->second;
  }
  const Node& node(NodeIndex index) const { return nodes_[index]; }
  size_t size() const { return nodes_.size(); }
  // generation: changes with every Add (a cached "no such node" goes stale).
  uint64_t generation() const { return nodes_.size(); }

 private:
  static uint64_t SocketKey(uint32_t ip, uint16_t port) { return (uint64_t{ip} << 16) | port; }

  std::vector<Node> nodes_;
  absl::flat_hash_map<uint32_t, NodeIndex> by_node_;
  absl::flat_hash_map<uint64_t, NodeIndex> by_socket_;
};

// GroSegmentBytes: the length of segment i of a received datagram of `bytes`
// that the kernel coalesced with segment size `gso_size` (0: not coalesced).
inline size_t GroSegmentBytes(size_t bytes, size_t gso_size, size_t offset) {
  const size_t step = gso_size == 0 ? bytes : gso_size;
  const size_t left = bytes - offset;
  return left < step ? left : step;
}

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_KERNEL_NODE_TABLE_H_
