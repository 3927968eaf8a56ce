// transport/mlx5/dma_barrier.h: ordering between the CPU and the NIC's DMA.
// Private to transport/mlx5.
//
// These order memory the NIC reads or writes, not memory another thread
// reads, so they are not std::atomic_thread_fence: on x86-64 (total store
// order) writes reach memory in program order and only the compiler must be
// held back; reads of a completion after its owner bit need a load fence.
// They are the same choice rdma-core's udma barriers make. Other
// architectures fall back to full fences, which are stronger than needed.
// Unlike atomic_thread_fence they also build under ThreadSanitizer, which
// cannot model a fence and refuses it (GCC -Wtsan); TSan does not see the
// NIC either way.
#ifndef ATP_TRANSPORT_MLX5_DMA_BARRIER_H_
#define ATP_TRANSPORT_MLX5_DMA_BARRIER_H_

namespace atp::transport::mlx5 {

// DmaWriteBarrier: the CPU's writes before it (receive entries, send
// descriptors) reach memory before its writes after it (the doorbell record).
inline void DmaWriteBarrier() {
#if defined(__x86_64__)
  asm volatile("" ::: "memory");
#else
  __sync_synchronize();
#endif
}

// DmaReadBarrier: the CPU's reads after it (a completion's fields) see what the
// NIC wrote before the value read before it (the completion's owner bit).
inline void DmaReadBarrier() {
#if defined(__x86_64__)
  asm volatile("lfence" ::: "memory");
#else
  __sync_synchronize();
#endif
}

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_DMA_BARRIER_H_
