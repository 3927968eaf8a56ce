// lib/worker/loss_detector.h: fast loss detection of one worker queue
// (ATP-SPEC section 5, "Loss detection").
//
// The queue's expected position is its lowest unacknowledged one. Parameter
// packets for positions beyond it while it is still unacknowledged mean that
// it (or its parameter packet) was lost: the third one declares it lost, and
// the engine resends it with `resend` set and tells the congestion controller.
//
// After a declaration the same position is not declared again on the strength
// of parameter packets for fragments that were sent before the resend (they
// say nothing about the resend's fate): only acknowledgements of positions at
// or beyond `rearm_bound` (the congestion controller's send_bound when the
// resend was decided; every position below it may have been sent earlier)
// count toward a second declaration. The retransmission timeout covers the
// rest. rearm_bound comes from the ACK stream only, so two workers that see
// the same parameter packets declare the same losses.
//
// The detector owns no timer and no fragment state: the engine passes the
// positions in.
//
//   LossDetector detector;
//   if (detector.OnAck(acked, lowest_unacked, cc.send_bound()) == LossVerdict::kLost) {
//     resend(lowest_unacked);
//   }
#ifndef ATP_LIB_WORKER_LOSS_DETECTOR_H_
#define ATP_LIB_WORKER_LOSS_DETECTOR_H_

#include <algorithm>
#include <cstdint>

namespace atp::worker {

enum class LossVerdict : uint8_t {
  kNone,
  kLost,  // the lowest unacknowledged position is lost: resend it
};

class LossDetector {
 public:
  // kReorderThreshold: parameter packets beyond the expected position that
  // declare it lost.
  static constexpr uint32_t kReorderThreshold = 3;

  struct DebugState {
    uint64_t tracked = 0;      // the expected position the counter refers to
    uint32_t count = 0;        // acks beyond it seen so far
    uint64_t count_from = 0;   // only acks of positions >= this count
    uint64_t losses = 0;       // declarations so far
  };

  LossDetector() = default;

  // OnAck: a parameter packet acknowledged `acked` (it was in flight), and
  // `lowest_unacked` is the lowest position still unacknowledged afterwards
  // (the next unsent one when nothing is in flight). `rearm_bound`: the
  // congestion controller's send_bound now. Returns kLost when
  // `lowest_unacked` is declared lost.
  // Runs on every acknowledgement: defined here to be inlined.
  LossVerdict OnAck(uint64_t acked, uint64_t lowest_unacked, uint64_t rearm_bound) {
    Track(lowest_unacked);
    if (acked <= tracked_ || acked < count_from_) return LossVerdict::kNone;
    if (++count_ < kReorderThreshold) return LossVerdict::kNone;
    count_ = 0;
    count_from_ = std::max(rearm_bound, tracked_ + 1);
    ++losses_;
    return LossVerdict::kLost;
  }

  // OnTimeout: every unacknowledged position was just resent; from now on
  // acknowledgements of positions below `rearm_bound` no longer count against
  // any expected position.
  void OnTimeout(uint64_t lowest_unacked, uint64_t rearm_bound);

  DebugState debug_state() const;

 private:
  // Track: on every acknowledgement; defined here to be inlined.
  void Track(uint64_t lowest_unacked) {
    if (lowest_unacked == tracked_) return;
    // The expected position moved: a fresh count for the new one.
    tracked_ = lowest_unacked;
    count_ = 0;
    count_from_ = std::max(lowest_unacked + 1, timeout_rearm_bound_);
  }

  uint64_t tracked_ = 0;
  uint32_t count_ = 0;
  uint64_t count_from_ = 1;
  uint64_t losses_ = 0;
  // The send_bound at the last timeout: acknowledgements of positions below
  // it never count (their fragments were all resent at the timeout).
  uint64_t timeout_rearm_bound_ = 0;
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_LOSS_DETECTOR_H_
