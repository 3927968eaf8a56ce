// transport/dpdk/interrupt_gate.h: keeps the EAL interrupt thread out of
// the memif driver while a queue is inside a burst. Private to transport/dpdk.
//
// Why: DPDK 22.11's memif driver tears a connection down on the EAL interrupt
// thread (memif_socket.c: memif_intr_handler -> memif_disconnect ->
// memif_free_regions, rte_eth_memif.c) when the peer's control socket closes
// or it says "disconnect": it clears ETH_MEMIF_FLAG_CONNECTED, then munmaps
// the shared regions and frees their descriptors, with nothing that waits for
// a datapath thread already past the flag check at the top of eth_memif_rx /
// eth_memif_tx. A peer that dies mid-traffic therefore crashes the process
// now and then (SIGSEGV storing ring->tail into the unmapped ring). memif
// raises no LSC event (no rte_eth_dev_callback_process in the driver), so
// there is no hook before the unmap; no devarg avoids it (zero-copy still
// unmaps region 0, the rings; both roles unmap on disconnect).
//
// How: the interrupt thread is single, and runs our callbacks too. A gate
// callback (on an eventfd of ours) parks the interrupt thread while the gate
// is open; queues enter the open gate around their bursts (two stores and a
// load, never blocking: a queue that finds it closed skips the hardware
// burst this time). Every `period` (10 ms; 2 ms while a gated port's link is
// down, so handshakes go fast; at once on Hurry) the callback closes the
// gate, waits for every queue to leave its burst, re-arms its eventfd and
// returns: the interrupt thread then handles whatever is pending (memif
// messages, disconnects, alarms) with no queue inside the driver, and comes
// back to the callback, which opens the gate again. Every interrupt-thread
// callback other than the gate's thus runs with the gate closed.
//
// Control calls that touch a memif port (stop, start, close, a reconnect from
// a queue's thread) hold a slot too (Enter), so they never overlap the
// interrupt thread's memif work either. Never wait for the interrupt thread
// (InterruptThreadBarrier) while holding a slot: that deadlocks.
#ifndef ATP_TRANSPORT_DPDK_INTERRUPT_GATE_H_
#define ATP_TRANSPORT_DPDK_INTERRUPT_GATE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/time.h"

struct rte_intr_handle;

namespace atp::transport::internal {

// GateSlot: one thread's "inside a burst" flag (a queue's, or a control
// call's). Written by its thread, read by the interrupt thread.
struct alignas(64) GateSlot {
  std::atomic<uint32_t> inside{0};
  uint16_t port_id = 0;  // whose link the gate watches (period)
};

class InterruptGate {
 public:
  // Acquire: the process's gate, started by the first call; every memif
  // device holds it, and the last one to let go stops it. Control path.
  static absl::StatusOr<std::shared_ptr<InterruptGate>> Acquire();
  ~InterruptGate();

  InterruptGate(const InterruptGate&) = delete;
  InterruptGate& operator=(const InterruptGate&) = delete;

  // Register / Unregister: `slot` takes part in the gate (the interrupt
  // thread waits for it) from Register until Unregister; not inside then.
  void Register(GateSlot* slot);
  void Unregister(GateSlot* slot);

  // TryEnter: datapath; never blocks. True: the gate is open and stays so
  // until Leave (the interrupt thread is parked). False: closed; skip the burst.
  bool TryEnter(GateSlot& slot) {
    slot.inside.store(1, std::memory_order_seq_cst);
    if (closed_.load(std::memory_order_seq_cst) == 0) return true;
    slot.inside.store(0, std::memory_order_release);
    return false;
  }
  void Leave(GateSlot& slot) { slot.inside.store(0, std::memory_order_release); }

  // Enter: control path; waits (hurrying the interrupt thread) until the gate
  // is open, then holds it like TryEnter. Leave afterwards.
  void Enter(GateSlot& slot);

  // Hurry: asks the interrupt thread to handle its pending events now rather
  // than at the end of its period (a port just started connecting).
  void Hurry();

  // rounds: how many times the gate has closed (tests).
  uint64_t rounds() const { return rounds_.load(std::memory_order_relaxed); }

 private:
  InterruptGate() = default;
  absl::Status Start();
  static void OnWakeup(void* arg);
  void Park();
  TimeDelta Period();
  void WaitForSlots();

  int fd_ = -1;
  rte_intr_handle* handle_ = nullptr;
  bool registered_ = false;
  // 1: closed (the interrupt thread is, or may be, doing other work).
  std::atomic<uint32_t> closed_{1};
  std::atomic<uint64_t> rounds_{0};

  std::mutex slots_mu_;
  std::vector<GateSlot*> slots_;

  std::mutex park_mu_;
  std::condition_variable park_cv_;
  bool stopping_ = false;  // under park_mu_
  bool hurry_ = false;     // under park_mu_
};

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_INTERRUPT_GATE_H_
