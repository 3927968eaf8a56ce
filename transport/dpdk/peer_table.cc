// transport/dpdk/peer_table.cc
#include "transport/dpdk/peer_table.h"

#include "absl/strings/str_cat.h"

namespace atp::transport::internal {

absl::Status PeerTable::Add(const DpdkPeer& peer) {
  if (peer.num_queues < 1 || peer.num_queues > kMaxQueues) {
    return absl::InvalidArgumentError(absl::StrCat("DpdkPeer ", peer.address.ipv4.ToString(),
                                                   ": num_queues = ", peer.num_queues,
                                                   ", must be in [1, ", kMaxQueues, "]"));
  }
  if (!queues_.emplace(peer.address.ipv4.value, peer.num_queues).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("DpdkPeer ", peer.address.ipv4.ToString(), " is already known"));
  }
  return absl::OkStatus();
}

}  // namespace atp::transport::internal
