// transport/kernel/node_table.cc: the kernel UDP transport's address book.
#include "transport/kernel/node_table.h"

#include <arpa/inet.h>

#include "absl/strings/str_cat.h"

namespace atp::transport {

std::string SocketAddress::ToString() const { return absl::StrCat(ip.ToString(), ":", port); }

KernelUdpPeer KernelUdpPeer::FromPortRange(DeviceAddress address, wire::Ipv4Address socket_ip,
                                           uint16_t base_port, uint32_t num_queues) {
  KernelUdpPeer peer;
  peer.address = address;
  for (uint32_t q = 0; q < num_queues; ++q) {
    peer.queue_sockets.push_back(SocketAddress{socket_ip, static_cast<uint16_t>(base_port + q)});
  }
  return peer;
}

namespace internal {

sockaddr_in ToSockaddr(const SocketAddress& address) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(address.port);
  sa.sin_addr.s_addr = htonl(address.ip.value);
  return sa;
}

SocketAddress FromSockaddr(const sockaddr_in& address) {
  return SocketAddress{wire::Ipv4Address{ntohl(address.sin_addr.s_addr)}, ntohs(address.sin_port)};
}

absl::Status NodeTable::Add(const KernelUdpPeer& peer) {
  const std::string name = peer.address.ipv4.ToString();
  if (peer.queue_sockets.empty() || peer.queue_sockets.size() > kMaxQueues) {
    return absl::InvalidArgumentError(absl::StrCat("node ", name, " has ",
                                                   peer.queue_sockets.size(),
                                                   " queue sockets: must have 1 to 16"));
  }
  if (by_node_.contains(peer.address.ipv4.value)) {
    return absl::AlreadyExistsError(absl::StrCat("node ", name, " is already in the table"));
  }
  for (const SocketAddress& socket : peer.queue_sockets) {
    if (socket.port == 0 || socket.ip.value == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("node ", name, ": socket ", socket.ToString(), " is not an address"));
    }
    if (by_socket_.contains(SocketKey(socket.ip.value, socket.port))) {
      return absl::AlreadyExistsError(absl::StrCat("node ", name, ": socket ", socket.ToString(),
                                                   " already belongs to a node"));
    }
  }
  const auto index = static_cast<NodeIndex>(nodes_.size());
  Node node;
  node.address = peer.address;
  for (const SocketAddress& socket : peer.queue_sockets) {
    if (!by_socket_.emplace(SocketKey(socket.ip.value, socket.port), index).second) {
      // The same socket twice within this peer: undo what was added.
      for (const SocketAddress& added : peer.queue_sockets) {
        auto it = by_socket_.find(SocketKey(added.ip.value, added.port));
        if (it != by_socket_.end() && it->second == index) by_socket_.erase(it);
      }
      return absl::InvalidArgumentError(
          absl::StrCat("node ", name, ": socket ", socket.ToString(), " is listed twice"));
    }
    node.queue_sockets.push_back(ToSockaddr(socket));
  }
  by_node_.emplace(peer.address.ipv4.value, index);
  nodes_.push_back(std::move(node));
  return absl::OkStatus();
}

}  // namespace internal
}  // namespace atp::transport
