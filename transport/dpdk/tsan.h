// transport/dpdk/tsan.h: telling ThreadSanitizer about the hand-overs it
// cannot see. Private to transport/dpdk.
//
// DPDK's drivers and its mempool rings live in shared libraries that are not
// instrumented, so an mbuf written on one thread, passed through a driver
// (net_ring) or through a mempool, and touched on another thread looks like a
// race to TSan. The backend marks each hand-over where it happens: a thread
// releases an mbuf before giving it to a driver and acquires it after a driver
// gives it one; freeing into a mempool releases the mempool, allocating from
// it acquires it. In builds without TSan these compile to nothing.
#ifndef ATP_TRANSPORT_DPDK_TSAN_H_
#define ATP_TRANSPORT_DPDK_TSAN_H_

#include <cstddef>

#include "transport/dpdk/dpdk_headers.h"

#if defined(__SANITIZE_THREAD__)
#define ATP_DPDK_THREAD_SANITIZER 1
#else
#define ATP_DPDK_THREAD_SANITIZER 0
#endif

// The TSan runtime's annotation entry points (weak: absent without TSan).
extern "C" {
void __tsan_acquire(void* addr) __attribute__((weak));
void __tsan_release(void* addr) __attribute__((weak));
}

namespace atp::transport::internal {

inline constexpr bool kThreadSanitizer = ATP_DPDK_THREAD_SANITIZER == 1;

// MbufsToDriver: `mbufs` go to a driver (rte_eth_tx_burst) or a mempool.
inline void MbufsToDriver(rte_mbuf* const* mbufs, size_t n) {
  if constexpr (kThreadSanitizer) {
    for (size_t i = 0; i < n; ++i) __tsan_release(mbufs[i]);
  }
}

// MbufsFromDriver: `mbufs` came from a driver (rte_eth_rx_burst), which may
// have taken them from a mempool other threads free into.
inline void MbufsFromDriver(rte_mbuf* const* mbufs, size_t n) {
  if constexpr (kThreadSanitizer) {
    for (size_t i = 0; i < n; ++i) {
      __tsan_acquire(mbufs[i]->pool);
      __tsan_acquire(mbufs[i]);
    }
  }
}

// MbufsToMempool / MempoolToMbufs: around freeing into, and allocating from,
// a mempool.
inline void MbufsToMempool(rte_mbuf* const* mbufs, size_t n) {
  if constexpr (kThreadSanitizer) {
    for (size_t i = 0; i < n; ++i) __tsan_release(mbufs[i]->pool);
  }
}
inline void MempoolToMbufs(rte_mempool* mempool) {
  if constexpr (kThreadSanitizer) __tsan_acquire(mempool);
}

// HandOver / TakeOver: `object` goes to another thread through DPDK (an
// interrupt callback registered with the EAL): release before, acquire on
// the other side.
inline void HandOver(void* object) {
  if constexpr (kThreadSanitizer) __tsan_release(object);
}
inline void TakeOver(void* object) {
  if constexpr (kThreadSanitizer) __tsan_acquire(object);
}

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_TSAN_H_
