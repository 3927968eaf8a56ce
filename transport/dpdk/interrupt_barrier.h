// transport/dpdk/interrupt_barrier.h: waiting for the EAL's interrupt thread
// to finish what it is doing. Private to transport/dpdk.
//
// memif (DPDK 22.11) handles its control channel on the EAL interrupt thread,
// and tearing a connection down there races with the application closing the
// same port on its own thread (double frees, a crash in the interrupt thread):
// a peer's disconnect message arrives while the application closes the port
// the peer was connected to, or, in one process, one side's close makes the
// interrupt thread disconnect the other side while the application closes
// that one too. The device closes a memif port only after the interrupt
// thread has handled everything that was pending (InterruptThreadBarrier),
// before stopping it and again after.
#ifndef ATP_TRANSPORT_DPDK_INTERRUPT_BARRIER_H_
#define ATP_TRANSPORT_DPDK_INTERRUPT_BARRIER_H_

#include "absl/status/status.h"
#include "atp/time.h"

namespace atp::transport::internal {

// InterruptThreadBarrier: returns once the interrupt thread has run a
// callback of ours twice in a row, so that every event that was pending when
// it was called (in the same epoll batch as our first wake-up or before it)
// has been handled. DeadlineExceeded after `timeout` (the thread is stuck).
absl::Status InterruptThreadBarrier(TimeDelta timeout);

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_INTERRUPT_BARRIER_H_
