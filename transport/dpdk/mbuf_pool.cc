// transport/dpdk/mbuf_pool.cc
#include "transport/dpdk/mbuf_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <typeinfo>
#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/dpdk/status.h"

namespace atp::transport::internal {
namespace {

constexpr size_t kAllocChunk = 64;

struct Graveyard {
  std::mutex mu;
  std::vector<rte_mempool*> pools;
};

Graveyard& TheGraveyard() {
  static Graveyard* graveyard = new Graveyard();  // outlives static destructors, like the EAL
  return *graveyard;
}

bool AllBack(const rte_mempool* mempool) {
  return rte_mempool_avail_count(mempool) == mempool->size;
}

}  // namespace

std::string UniqueName(std::string_view prefix) {
  static std::atomic<uint64_t> counter{0};
  return std::string(prefix) + std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
}

absl::StatusOr<std::unique_ptr<MbufPool>> MbufPool::Create(const MbufPoolOptions& options) {
  if (options.frames < 2 || options.frame_room < wire::kFrameBytes ||
      options.headroom > UINT16_MAX || options.frame_room > UINT16_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("MbufPool: bad shape (frames ", options.frames,
                                                   ", headroom ", options.headroom,
                                                   ", frame_room ", options.frame_room, ")"));
  }
  const uint32_t headroom_room = std::max<uint32_t>(options.headroom, RTE_PKTMBUF_HEADROOM);
  const uint32_t data_room = (headroom_room + options.frame_room + 63) / 64 * 64;
  if (data_room > UINT16_MAX) return absl::InvalidArgumentError("MbufPool: data room over 64 KiB");
  const uint32_t cache =
      std::min({options.cache, options.frames / 2, uint32_t{RTE_MEMPOOL_CACHE_MAX_SIZE}});
  const std::string name = UniqueName("atp_mb");
  const uint32_t mbufs = options.frames + options.driver_reserve;
  rte_mempool* mempool = rte_pktmbuf_pool_create(name.c_str(), mbufs, cache, 0,
                                                 static_cast<uint16_t>(data_room), options.socket);
  if (mempool == nullptr) {
    return RteErrorStatus(rte_errno, absl::StrCat("rte_pktmbuf_pool_create(", mbufs,
                                                  " mbufs of ", data_room,
                                                  " bytes; is the EAL memory (-m) large enough?)"));
  }
  return std::unique_ptr<MbufPool>(new MbufPool(mempool, options, data_room - headroom_room));
}

size_t MbufPool::free_count() const {
  if (counting_ == FreeCounting::kMempool) {
    return std::min<size_t>(rte_mempool_avail_count(mempool_), frames_);
  }
  const int64_t held = outstanding_.load(std::memory_order_relaxed);
  return held <= 0 ? frames_ : held >= frames_ ? 0 : frames_ - static_cast<size_t>(held);
}

MbufPool::~MbufPool() {
  if (release_ == MempoolRelease::kAtOnce) {
    rte_mempool_free(mempool_);
  } else {
    ReleaseMempool(mempool_);
  }
}

size_t MbufPool::AllocMbufs(rte_mbuf** out, size_t count) {
  MempoolToMbufs(mempool_);
  size_t n = 0;
  while (n < count) {
    size_t want = std::min(kAllocChunk, count - n);
    // rte_pktmbuf_alloc_bulk is all or nothing: halve the ask until it fits.
    while (want > 0 && rte_pktmbuf_alloc_bulk(mempool_, out + n, static_cast<unsigned>(want)) != 0) {
      want /= 2;
    }
    if (want == 0) break;
    if (headroom_ != RTE_PKTMBUF_HEADROOM) {  // the reset left data_off there
      for (size_t i = n; i < n + want; ++i) out[i]->data_off = headroom_;
    }
    n += want;
  }
  return n;
}

size_t MbufPool::AllocBurst(std::span<FrameRef> frames) {
  rte_mbuf* mbufs[kAllocChunk];
  size_t n = 0;
  while (n < frames.size()) {
    const size_t got = AllocMbufs(mbufs, std::min(kAllocChunk, frames.size() - n));
    for (size_t i = 0; i < got; ++i) frames[n + i] = FrameOf(mbufs[i], this);
    n += got;
    if (got == 0) break;
  }
  NoteHandedOut(n);
  return n;
}

void MbufPool::FreeBurst(std::span<const FrameRef> frames) {
  rte_mbuf* mbufs[kAllocChunk];
  for (size_t done = 0; done < frames.size();) {
    const size_t n = std::min(kAllocChunk, frames.size() - done);
    for (size_t i = 0; i < n; ++i) mbufs[i] = MbufOf(frames[done + i]);
    FreeMbufs(mbufs, n);
    done += n;
  }
  NoteReturned(frames.size());
}

MbufPool* AsMbufPool(const FrameRef& frame) {
  // MbufPool is final: comparing the dynamic type answers what dynamic_cast
  // would, without walking the class hierarchy (libstdc++'s __do_dyncast took
  // 0.6% of atp-switchd, which sends every frame from another port's pool).
  return frame.pool != nullptr && typeid(*frame.pool) == typeid(MbufPool)
             ? static_cast<MbufPool*>(frame.pool)
             : nullptr;
}

void ReleaseMempool(rte_mempool* mempool) {
  Graveyard& graveyard = TheGraveyard();
  {
    std::lock_guard<std::mutex> lock(graveyard.mu);
    graveyard.pools.push_back(mempool);
  }
  SweepMempools();
}

size_t SweepMempools() {
  Graveyard& graveyard = TheGraveyard();
  std::lock_guard<std::mutex> lock(graveyard.mu);
  std::erase_if(graveyard.pools, [](rte_mempool* mempool) {
    if (!AllBack(mempool)) return false;
    rte_mempool_free(mempool);
    return true;
  });
  return graveyard.pools.size();
}

}  // namespace atp::transport::internal
