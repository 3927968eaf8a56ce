// lib/worker/spurious_timeout.h: counting retransmission timeouts whose
// resent position was answered twice (the Eifel idea, RFC 3522, with the PS's
// answer in place of a timestamp), to tell spurious timeouts from real ones
// in the stats.
//
// A timeout resends the lowest unacknowledged position p first (the probe).
// If p was not lost, only late (its round trip waited for a descheduled
// worker, switch or PS: the usual cause on a shared CPU), the parameter
// packet of the original still comes, and the resend reaches a switch whose
// aggregator for p was released at completion, goes to the PS, and the PS
// answers it with p's stored parameter packet (ATP-SPEC section 6): the
// worker sees p answered twice. If p (or its parameter packet) was really
// lost, only the resend's answer comes.
//
// Only a count: the PS multicasts that repeat, so a worker also sees it when
// another worker resent p. Under incast every worker times out on the same
// position and each sees the others' repeats whether or not its own
// fragment was dropped; undoing the timeout's window collapse on that
// evidence brought the congestion collapse back
// (tests/sim/scenario_test.cc, TimeoutResendsDoNotCollapseUnderIncast). In
// a loss-free run every such timeout is spurious.
//
//   probe.Arm(expected);                          // at the timeout
//   probe.OnAnswered(p);                          // p's first answer
//   if (probe.OnDuplicate(raw, lowest, slots)) ++spurious;  // a stale answer
#ifndef ATP_LIB_WORKER_SPURIOUS_TIMEOUT_H_
#define ATP_LIB_WORKER_SPURIOUS_TIMEOUT_H_

#include <cstdint>

#include "atp/wire.h"

namespace atp::worker {

class SpuriousTimeoutProbe {
 public:
  // Arm: a timeout at which `position` (the lowest unacknowledged one) is
  // resent first. A timeout while the probe waits for its first answer is the
  // same event (backoff).
  void Arm(uint64_t position) {
    if (armed_ && !answered_) return;
    armed_ = true;
    answered_ = false;
    position_ = position;
  }

  // OnAnswered: the first parameter packet for `position` arrived.
  void OnAnswered(uint64_t position) {
    if (armed_ && !answered_ && position == position_) answered_ = true;
  }

  // OnDuplicate: a parameter packet for a position below the lowest
  // unacknowledged one, `raw_position` its 20 bits; `lowest_unacked` and
  // `slots` bound how long a duplicate may still come (after a window of
  // progress its bits may name a newer position). Returns true when it
  // answers the probe a second time.
  bool OnDuplicate(uint32_t raw_position, uint64_t lowest_unacked, uint64_t slots) {
    if (!armed_ || !answered_) return false;
    if (lowest_unacked >= position_ + slots) {
      armed_ = false;
      return false;
    }
    if (raw_position != (position_ & wire::kPositionMask)) return false;
    armed_ = false;
    return true;
  }

 private:
  bool armed_ = false;
  bool answered_ = false;
  uint64_t position_ = 0;
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_SPURIOUS_TIMEOUT_H_
