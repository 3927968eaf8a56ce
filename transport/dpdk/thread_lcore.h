// transport/dpdk/thread_lcore.h: gives every thread that uses a DPDK queue an
// EAL lcore id for as long as it lives. Private to transport/dpdk.
//
// Why: a thread without an lcore id (rte_lcore_id() == LCORE_ID_ANY: any
// std::thread, such as lib/host's polling threads) has no mempool cache, so
// every mbuf alloc and free, ours and the drivers' (memif allocates each
// received mbuf and frees each sent one), goes to the mempool's ring with
// atomics. Registered (rte_thread_register), the thread uses its per-lcore
// cache of each mempool.
//
//   size_t DpdkQueue::RxBurst(...) {
//     EnsureThreadLcore();  // one thread-local read once registered
//     ...
//
// The id goes back when the thread ends (a thread_local's destructor), after
// the thread's caches are flushed to their mempools, so that threads may come
// and go without ever running out of the RTE_MAX_LCORE ids and no mbuf stays
// parked in the cache of an id nobody uses. When no id is left the thread
// works on without a cache: counted (DpdkThreadLcoreStats::failures) and
// reported once per process on the EAL's log.
#ifndef ATP_TRANSPORT_DPDK_THREAD_LCORE_H_
#define ATP_TRANSPORT_DPDK_THREAD_LCORE_H_

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "transport/dpdk/dpdk_headers.h"

namespace atp::transport::internal {

// RegisterThreadLcore: gives the calling thread an lcore id unless it has one
// (an EAL thread, or registered already); the id is released when the thread
// ends or at ReleaseThreadLcore. ResourceExhausted when every id is taken.
// Needs an initialised EAL.
absl::Status RegisterThreadLcore();

// ReleaseThreadLcore: flushes the calling thread's cache of every mempool and
// gives back the id RegisterThreadLcore took; nothing for a thread that holds
// no id from it (the EAL's own lcores keep theirs).
void ReleaseThreadLcore();

// EnsureThreadLcoreSlow: RegisterThreadLcore, unless it failed on this thread
// before (a burst does not retry: rte_thread_register takes a lock).
void EnsureThreadLcoreSlow();

// EnsureThreadLcore: for the queue's burst calls, on the queue's thread.
inline void EnsureThreadLcore() {
  if (ABSL_PREDICT_TRUE(rte_lcore_id() != LCORE_ID_ANY)) return;
  EnsureThreadLcoreSlow();
}

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_THREAD_LCORE_H_
