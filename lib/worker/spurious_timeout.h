// lib/worker/spurious_timeout.h: telling a spurious retransmission timeout
// from a real one, after the fact (the Eifel idea, RFC 3522 / 4015, with the
// PS's answer in place of a timestamp).
//
// A timeout resends the lowest unacknowledged position p first (the probe).
// If p was not lost, only late (its round trip waited for a descheduled
// worker, switch or PS: the usual cause on a shared CPU), the parameter
// packet of the original still comes, and the resend reaches a switch whose
// aggregator for p was released at completion, goes to the PS, and the PS
// answers it with p's stored parameter packet again (ATP-SPEC section 6).
// So the worker sees p acknowledged twice: the timeout was spurious. (An
// answer that arrives before the resend went out proves it too, but when
// the resend leaves is this worker's own timing: the verdict comes from the
// parameter packets only, which every worker of the job receives alike, so
// workers that time out together stay together, windows included.)
//
// If p (or its parameter packet) was really lost, only the resend's answer
// comes: one parameter packet, no verdict. (A second copy can also come
// from another worker's resend of p; then both timed out on the same
// position and the undo below at worst keeps a window that a lost parameter
// packet would have collapsed once.)
//
// The verdict undoes what the timeout did on a wrong guess (the engine's
// part): the window and threshold come back, the positions not yet resent
// are not resent, and the estimator keeps the slow round trips it forgot,
// raised to the probe's own, so the next wait of that length does not fire
// the timer again.
//
// The probe owns no fragment state; the engine passes positions in.
//
//   probe.Arm(expected, cc.snapshot(), rtt.memory());      // at the timeout
//   probe.OnAnswered(p, rtt_of_original);                  // p's first ack
//   probe.OnDuplicate(raw_position);                       // a stale ack
#ifndef ATP_LIB_WORKER_SPURIOUS_TIMEOUT_H_
#define ATP_LIB_WORKER_SPURIOUS_TIMEOUT_H_

#include <cstdint>

#include "atp/time.h"
#include "atp/wire.h"
#include "lib/worker/congestion_controller.h"
#include "lib/worker/rtt_estimator.h"

namespace atp::worker {

class SpuriousTimeoutProbe {
 public:
  // What a timeout changed, to be restored on a spurious verdict.
  struct Undo {
    CongestionController::Snapshot cc;
    RttEstimator::SlowestMemory slowest;
    TimeDelta probe_rtt;  // the probe's original round trip, answered late
  };

  // Arm: a timeout at which `position` (the lowest unacknowledged one) is
  // resent first. A timeout while the probe waits for its first answer is the
  // same event (backoff): the state saved at the first stays.
  void Arm(uint64_t position, const CongestionController::Snapshot& cc,
           const RttEstimator::SlowestMemory& slowest) {
    if (armed_ && !answered_) return;
    armed_ = true;
    answered_ = false;
    position_ = position;
    undo_ = Undo{.cc = cc, .slowest = slowest, .probe_rtt = TimeDelta::Zero()};
  }

  // OnAnswered: the first parameter packet for `position` arrived, after a
  // round trip of `rtt` since the original was sent.
  void OnAnswered(uint64_t position, TimeDelta rtt) {
    if (!armed_ || answered_ || position != position_) return;
    answered_ = true;
    undo_.probe_rtt = rtt;
  }

  // OnDuplicate: a parameter packet for a position below the lowest
  // unacknowledged one, `raw_position` its 20 bits; `lowest_unacked` and
  // `slots` bound how long a duplicate may still come (after a window of
  // progress its bits may name a newer position). Returns true on a
  // spurious verdict.
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

  const Undo& undo() const { return undo_; }

 private:
  bool armed_ = false;
  bool answered_ = false;
  uint64_t position_ = 0;
  Undo undo_;
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_SPURIOUS_TIMEOUT_H_
