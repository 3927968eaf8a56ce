// transport/dpdk/ring_link.cc: DpdkRingLink, two net_ring ports joined by
// rte_rings (rte_eth_from_rings).
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "atp/transport/dpdk.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/mbuf_pool.h"
#include "transport/dpdk/status.h"

namespace atp::transport {
namespace {

using internal::RteErrorStatus;

constexpr size_t kMaxNameLength = 16;
constexpr uint32_t kInjectPoolFrames = 256;

class RingLink final : public DpdkRingLink {
 public:
  explicit RingLink(const DpdkRingLinkOptions& options) : options_(options) {}
  ~RingLink() override;

  absl::Status Create();
  const std::string& port_name(Side side) const override {
    return side == Side::kA ? name_a_ : name_b_;
  }
  absl::Status Inject(Side to, uint32_t queue, std::span<const uint8_t> bytes) override;

 private:
  // rings_a_to_b_[i]: A's TX queue i, B's RX queue i; rings_b_to_a_ the other way.
  const DpdkRingLinkOptions options_;
  std::string name_a_;
  std::string name_b_;
  std::vector<rte_ring*> rings_a_to_b_;
  std::vector<rte_ring*> rings_b_to_a_;
  bool created_a_ = false;
  bool created_b_ = false;
  std::unique_ptr<internal::MbufPool> inject_pool_;
};

absl::Status RingLink::Create() {
  for (auto* rings : {&rings_a_to_b_, &rings_b_to_a_}) {
    for (uint32_t q = 0; q < options_.num_queues; ++q) {
      const std::string name = internal::UniqueName("atp_rl");
      // One producer (the sending port's TX queue q, one thread) and one
      // consumer (the receiving port's RX queue q).
      rte_ring* ring = rte_ring_create(name.c_str(), options_.ring_frames, SOCKET_ID_ANY,
                                       RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
      if (ring == nullptr) {
        return RteErrorStatus(rte_errno, absl::StrCat("rte_ring_create(", options_.ring_frames, ")"));
      }
      rings->push_back(ring);
    }
  }
  const unsigned n = options_.num_queues;
  const std::string a = options_.name + "_a";
  const std::string b = options_.name + "_b";
  if (rte_eth_from_rings(a.c_str(), rings_b_to_a_.data(), n, rings_a_to_b_.data(), n,
                         SOCKET_ID_ANY) < 0) {
    return RteErrorStatus(rte_errno, absl::StrCat("rte_eth_from_rings(", a, ")"));
  }
  created_a_ = true;
  if (rte_eth_from_rings(b.c_str(), rings_a_to_b_.data(), n, rings_b_to_a_.data(), n,
                         SOCKET_ID_ANY) < 0) {
    return RteErrorStatus(rte_errno, absl::StrCat("rte_eth_from_rings(", b, ")"));
  }
  created_b_ = true;
  name_a_ = "net_ring_" + a;
  name_b_ = "net_ring_" + b;
  internal::MbufPoolOptions pool;
  pool.frames = kInjectPoolFrames;
  pool.frame_room = 2048;
  pool.cache = 0;
  ATP_ASSIGN_OR_RETURN(inject_pool_, internal::MbufPool::Create(pool));
  return absl::OkStatus();
}

absl::Status RingLink::Inject(Side to, uint32_t queue, std::span<const uint8_t> bytes) {
  if (queue >= options_.num_queues) {
    return absl::InvalidArgumentError(absl::StrCat("DpdkRingLink::Inject: queue ", queue));
  }
  if (bytes.size() > inject_pool_->frame_capacity()) {
    return absl::InvalidArgumentError(absl::StrCat("DpdkRingLink::Inject: ", bytes.size(), " bytes"));
  }
  rte_mbuf* mbuf = nullptr;
  if (inject_pool_->AllocMbufs(&mbuf, 1) == 0) {
    return absl::ResourceExhaustedError("DpdkRingLink::Inject: pool empty (frames not released)");
  }
  std::memcpy(rte_pktmbuf_mtod(mbuf, uint8_t*), bytes.data(), bytes.size());
  mbuf->data_len = static_cast<uint16_t>(bytes.size());
  mbuf->pkt_len = static_cast<uint32_t>(bytes.size());
  rte_ring* ring = to == Side::kB ? rings_a_to_b_[queue] : rings_b_to_a_[queue];
  // Injecting shares the ring's producer side with the sending port: call it
  // only while that port's queue is not sending (tests: same thread).
  internal::MbufsToDriver(&mbuf, 1);
  if (rte_ring_sp_enqueue(ring, mbuf) != 0) {
    internal::FreeMbuf(mbuf);
    return absl::ResourceExhaustedError("DpdkRingLink::Inject: ring full");
  }
  return absl::OkStatus();
}

RingLink::~RingLink() {
  if (created_a_) (void)rte_vdev_uninit(("net_ring_" + options_.name + "_a").c_str());
  if (created_b_) (void)rte_vdev_uninit(("net_ring_" + options_.name + "_b").c_str());
  // Whatever is still in flight goes back to its mempool (kept alive by the
  // graveyard if its device is gone), then the rings go.
  for (auto* rings : {&rings_a_to_b_, &rings_b_to_a_}) {
    for (rte_ring* ring : *rings) {
      void* objects[64];
      for (unsigned n; (n = rte_ring_sc_dequeue_burst(ring, objects, 64, nullptr)) > 0;) {
        internal::FreeMbufs(reinterpret_cast<rte_mbuf**>(objects), n);
      }
      rte_ring_free(ring);
    }
  }
  inject_pool_.reset();
  internal::SweepMempools();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DpdkRingLink>> DpdkRingLink::Create(
    const DpdkRingLinkOptions& options) {
  if (!internal::EalInitialized()) {
    return absl::FailedPreconditionError("DpdkRingLink::Create: call InitDpdkEal first");
  }
  if (options.name.empty() || options.name.size() > kMaxNameLength ||
      options.name.find_first_of(", =") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DpdkRingLinkOptions.name = '", options.name, "': 1..16 characters, no ',', '=' or ' '"));
  }
  if (options.num_queues < 1 || options.num_queues > kMaxQueues) {
    return absl::InvalidArgumentError(
        absl::StrCat("DpdkRingLinkOptions.num_queues = ", options.num_queues, ": 1..16"));
  }
  if (options.ring_frames < 2 || (options.ring_frames & (options.ring_frames - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("DpdkRingLinkOptions.ring_frames = ",
                                                   options.ring_frames, ": a power of two >= 2"));
  }
  auto link = std::make_unique<RingLink>(options);
  ATP_RETURN_IF_ERROR(link->Create());
  return link;
}

}  // namespace atp::transport
