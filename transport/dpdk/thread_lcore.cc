// transport/dpdk/thread_lcore.cc
#include "transport/dpdk/thread_lcore.h"

#include <atomic>
#include <cstdint>

#include "atp/transport/dpdk.h"
#include "transport/dpdk/status.h"

namespace atp::transport::internal {
namespace {

// Process-wide counts behind GetDpdkThreadLcoreStats.
std::atomic<uint64_t> registered{0};
std::atomic<uint64_t> released{0};
std::atomic<uint64_t> failures{0};
std::atomic<bool> failure_reported{false};

// FlushLcoreCache: rte_mempool_walk's callback; `arg` is the lcore id whose
// cache of `mempool` goes back to the mempool. Only the thread holding that
// id calls it, so nobody else touches that cache meanwhile.
void FlushLcoreCache(rte_mempool* mempool, void* arg) {
  const unsigned lcore = *static_cast<const unsigned*>(arg);
  if (rte_mempool_cache* cache = rte_mempool_default_cache(mempool, lcore); cache != nullptr) {
    rte_mempool_cache_flush(cache, mempool);
  }
}

// ThreadLcore: what this library did about the calling thread's lcore id.
// Its destructor runs when the thread ends (thread_local), before the
// thread's TLS (rte_lcore_id's too) goes away.
class ThreadLcore {
 public:
  enum class State : uint8_t {
    kNone,     // nothing taken (an EAL lcore, an unregistered thread)
    kOwned,    // rte_thread_register gave this thread its id
    kRefused,  // rte_thread_register refused: no id left
  };

  ThreadLcore() = default;
  ThreadLcore(const ThreadLcore&) = delete;
  ThreadLcore& operator=(const ThreadLcore&) = delete;
  ~ThreadLcore() { Release(); }

  State state() const { return state_; }

  absl::Status Register() {
    if (rte_lcore_id() != LCORE_ID_ANY) return absl::OkStatus();
    if (rte_thread_register() != 0) {
      const int error = rte_errno;
      state_ = State::kRefused;
      failures.fetch_add(1, std::memory_order_relaxed);
      if (!failure_reported.exchange(true, std::memory_order_relaxed)) {
        // Once per process: the datapath itself never logs.
        rte_log(RTE_LOG_WARNING, RTE_LOGTYPE_EAL,
                "libatp: rte_thread_register failed (%s): a DPDK I/O thread runs without a "
                "mempool cache (every mbuf alloc/free goes to the mempool's ring); more threads "
                "use DPDK than there are lcore ids (RTE_MAX_LCORE = %d)\n",
                rte_strerror(error), RTE_MAX_LCORE);
      }
      return RteErrorStatus(error, "rte_thread_register (no free lcore id?)");
    }
    state_ = State::kOwned;
    registered.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  void Release() {
    if (state_ != State::kOwned) return;
    unsigned lcore = rte_lcore_id();
    if (lcore != LCORE_ID_ANY) {
      rte_mempool_walk(FlushLcoreCache, &lcore);
      rte_thread_unregister();
    }
    state_ = State::kNone;
    released.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  State state_ = State::kNone;
};

ThreadLcore& ThisThread() {
  thread_local ThreadLcore lcore;
  return lcore;
}

}  // namespace

absl::Status RegisterThreadLcore() { return ThisThread().Register(); }

void ReleaseThreadLcore() { ThisThread().Release(); }

void EnsureThreadLcoreSlow() {
  ThreadLcore& lcore = ThisThread();
  if (lcore.state() == ThreadLcore::State::kRefused) return;
  (void)lcore.Register();
}

}  // namespace atp::transport::internal

namespace atp::transport {

DpdkThreadLcoreStats GetDpdkThreadLcoreStats() {
  DpdkThreadLcoreStats stats;
  stats.registered = internal::registered.load(std::memory_order_relaxed);
  stats.released = internal::released.load(std::memory_order_relaxed);
  stats.failures = internal::failures.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace atp::transport
