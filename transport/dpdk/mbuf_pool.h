// transport/dpdk/mbuf_pool.h: FramePool over an rte_mempool of mbufs, and the
// mapping between an rte_mbuf and a FrameRef. Private to transport/dpdk.
//
// A FrameRef of a DPDK pool is an mbuf: handle = the rte_mbuf*, data = its
// data (buf_addr + data_off), length = its data_len. No copy either way.
#ifndef ATP_TRANSPORT_DPDK_MBUF_POOL_H_
#define ATP_TRANSPORT_DPDK_MBUF_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "atp/transport/frame_pool.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/tsan.h"

namespace atp::transport::internal {

// MbufOf / FrameOf: the two views of one buffer.
inline rte_mbuf* MbufOf(const FrameRef& frame) {
  return reinterpret_cast<rte_mbuf*>(static_cast<uintptr_t>(frame.handle));
}
inline FrameRef FrameOf(rte_mbuf* mbuf, FramePool* pool) {
  return FrameRef{rte_pktmbuf_mtod(mbuf, uint8_t*), pool,
                  static_cast<uint64_t>(reinterpret_cast<uintptr_t>(mbuf)), mbuf->data_len};
}
// SyncMbuf: makes the mbuf describe `frame` (data may have moved into the
// headroom, the length changed) before it goes to a port.
inline void SyncMbuf(const FrameRef& frame, rte_mbuf* mbuf) {
  mbuf->data_off = static_cast<uint16_t>(frame.data - static_cast<uint8_t*>(mbuf->buf_addr));
  mbuf->data_len = static_cast<uint16_t>(frame.length);
  mbuf->pkt_len = frame.length;
}

// FreeCounting: what free_count() counts.
enum class FreeCounting : uint8_t {
  // kMempool: the mbufs in the mempool (TX pools: an mbuf not there is held
  // by the application or in flight to a receiver).
  kMempool,
  // kHandedOut: capacity() minus the frames handed to the application and not
  // returned yet (RX pools: the driver keeps driver_reserve mbufs posted for
  // arrivals, a number that drifts while it refills, so the mempool's count
  // says nothing about leaks; what the application holds does).
  kHandedOut,
};

// MempoolRelease: when ~MbufPool frees the mempool.
enum class MempoolRelease : uint8_t {
  kWhenAllBack,  // once every mbuf is back (some may be in rings or in flight)
  kAtOnce,       // now: for RX pools of a closed port whose driver abandons
                 // the mbufs it had posted (af_xdp's fill ring)
};

// MbufPoolOptions: one pool's shape.
struct MbufPoolOptions {
  uint32_t frames = 2048;  // the application's share: capacity()
  uint32_t driver_reserve = 0;  // more mbufs, for the driver's RX descriptors
  FreeCounting counting = FreeCounting::kMempool;
  // headroom: bytes before FrameRef::data of what AllocBurst hands out. RX
  // pools take RTE_PKTMBUF_HEADROOM: the drivers reset data_off to it.
  uint32_t headroom = RTE_PKTMBUF_HEADROOM;
  uint32_t frame_room = 512;  // bytes usable from data (>= kFrameBytes)
  uint32_t cache = 256;       // per-lcore cache, capped at frames / 2
  int socket = SOCKET_ID_ANY;
};

class MbufPool final : public FramePool {
 public:
  // Create: a pktmbuf mempool with a process-unique name. ResourceExhausted
  // when the EAL's memory (-m) is too small for it.
  static absl::StatusOr<std::unique_ptr<MbufPool>> Create(const MbufPoolOptions& options);
  MbufPool(const MbufPool&) = delete;
  MbufPool& operator=(const MbufPool&) = delete;
  // ~MbufPool: the mempool is freed as set_release says (by default once
  // every mbuf is back: ReleaseMempool).
  ~MbufPool() override;
  void set_release(MempoolRelease release) { release_ = release; }

  // AllocBurst: mbufs with data_off = headroom(), data_len 0, refcnt 1.
  size_t AllocBurst(std::span<FrameRef> frames) override;
  // FreeBurst: returns each frame's mbuf to the mempool it came from, which
  // need not be this one (any DPDK pool frees any mbuf). Any thread.
  void FreeBurst(std::span<const FrameRef> frames) override;
  size_t free_count() const override;
  size_t capacity() const override { return frames_; }
  size_t frame_capacity() const override { return frame_room_; }
  size_t headroom() const override { return headroom_; }

  rte_mempool* mempool() const { return mempool_; }

  // AllocMbufs: up to `count` mbufs into `out` (fewer when the pool runs low),
  // data_off = headroom(). Returns how many. Not counted as handed out.
  size_t AllocMbufs(rte_mbuf** out, size_t count);

  // NoteHandedOut / NoteReturned: `n` frames of this pool object went to the
  // application (RxBurst) / came back from it (FreeBurst, or taken by a
  // TxBurst). Any thread.
  // Only kHandedOut pools count (an atomic add per burst); the others skip it.
  void NoteHandedOut(size_t n) {
    if (counting_ == FreeCounting::kHandedOut && n > 0) {
      outstanding_.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed);
    }
  }
  void NoteReturned(size_t n) {
    if (counting_ == FreeCounting::kHandedOut && n > 0) {
      outstanding_.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
    }
  }

 private:
  MbufPool(rte_mempool* mempool, const MbufPoolOptions& options, uint32_t frame_room)
      : mempool_(mempool),
        frames_(options.frames),
        counting_(options.counting),
        headroom_(static_cast<uint16_t>(options.headroom)),
        frame_room_(frame_room) {}

  rte_mempool* const mempool_;
  const uint32_t frames_;
  const FreeCounting counting_;
  const uint16_t headroom_;
  const uint32_t frame_room_;
  MempoolRelease release_ = MempoolRelease::kWhenAllBack;
  std::atomic<int64_t> outstanding_{0};
};

// AsMbufPool: the MbufPool `frame` belongs to, or null if it is not an mbuf.
MbufPool* AsMbufPool(const FrameRef& frame);

// FreeMbufs: returns mbufs to their mempools.
inline void FreeMbufs(rte_mbuf** mbufs, size_t count) {
  if (count == 0) return;
  MbufsToMempool(mbufs, count);
  rte_pktmbuf_free_bulk(mbufs, static_cast<unsigned>(count));
}
inline void FreeMbuf(rte_mbuf* mbuf) { FreeMbufs(&mbuf, 1); }

// ReleaseMempool: frees `mempool` now if every mbuf is back, else keeps it
// until a later SweepMempools finds them all back (mbufs of a closed device
// may still sit in a ring or in a caller's hands). Thread-safe.
void ReleaseMempool(rte_mempool* mempool);
// SweepMempools: frees the released mempools whose mbufs are all back; returns
// how many remain. Called by device open and close.
size_t SweepMempools();

// UniqueName: "<prefix><n>", n a process-wide counter (DPDK object names are
// global in the process and short: RTE_MEMPOOL_NAMESIZE, RTE_RING_NAMESIZE).
std::string UniqueName(std::string_view prefix);

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_MBUF_POOL_H_
