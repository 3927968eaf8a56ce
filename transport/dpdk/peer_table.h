// transport/dpdk/peer_table.h: the nodes a DPDK device may send to: IPv4
// address -> number of queues. Pure: no DPDK. Private to transport/dpdk.
#ifndef ATP_TRANSPORT_DPDK_PEER_TABLE_H_
#define ATP_TRANSPORT_DPDK_PEER_TABLE_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "atp/transport/dpdk.h"

namespace atp::transport::internal {

class PeerTable {
 public:
  // Add: InvalidArgument if num_queues is not in [1, 16]; AlreadyExists if
  // the address is known.
  absl::Status Add(const DpdkPeer& peer);

  // QueuesOf: the number of queues of node `ipv4` (host order); 0 if unknown.
  uint32_t QueuesOf(uint32_t ipv4) const {
    auto it = queues_.find(ipv4);
    return it == queues_.end() ? 0 : it->second;
  }
  size_t size() const { return queues_.size(); }

 private:
  absl::flat_hash_map<uint32_t, uint32_t> queues_;
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_PEER_TABLE_H_
