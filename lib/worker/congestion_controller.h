// lib/worker/congestion_controller.h: the sending window of one worker queue,
// AIMD on ECN (ATP-SPEC section 5, "Congestion control").
//
// The window is counted in fragments: the engine keeps at most window()
// fragments unacknowledged (and, separately, never sends a position `slots`
// or more beyond the lowest unacknowledged one). It starts at
// `initial_window`, grows by one per acknowledged fragment up to ssthresh
// (slow start) and then by one per window's worth of acknowledged fragments,
// i.e. one per round trip (congestion avoidance). An `ecn` mark or a detected
// loss halves it (ssthresh = window = max(1, window / 2)), at most once per
// round trip; with LossResponse::kHalveOnlyWithEcn (WorkerQueueConfig's
// default) a loss halves it only if a mark arrived recently. It never leaves [1, max_window] (max_window = the queue's slots).
// With Mode::kFixedWindow the window stays at initial_window whatever happens
// (the simulator's congestion-control-off experiments).
//
// Why "once per round trip" is measured on positions and not on a timer:
// every worker of a job receives the same parameter packets (multicast), so
// if the controller's inputs are only that ACK stream, every worker computes
// the same window after the same packets and the windows move together
// (ATP-SPEC section 5), which is what makes the job's share of a bottleneck
// fair and its workers' sending rates equal. A local timer (or the local send
// clock) would differ from worker to worker by microseconds and split the
// windows. So the controller keeps `send_bound`, computed from the ACK stream
// only, below which is every position the engine may have sent so far: the
// positions in [lowest_unacked, next) are either in flight (at most window)
// or acknowledged out of order (at most largest_acked - lowest_unacked of
// them), so next <= max(lowest_unacked, largest_acked + 1) + window, and
// send_bound is the largest value of that right-hand side so far. A
// reduction opens a "reduction epoch" that ends at the first acknowledgement
// of a position >= the send_bound at the time of the reduction, i.e. of a
// fragment that was necessarily sent after the reduction: one round trip
// later. During the epoch, further ecn marks and losses (which belong to the
// same congestion event) are ignored and the window does not grow (like TCP
// NewReno recovery).
//
// A retransmission timeout (OnTimeout) is the one input that is not on the
// ACK stream, and it must still shrink the window: a timeout means the
// network dropped a whole window's worth of traffic (incast on small
// buffers), and resends are never aggregated by the switches (ATP-SPEC
// section 4, rule 4), so resending a full window from every worker would
// multiply the traffic into the already full port. Like TCP, a timeout sets
// ssthresh = max(2, window / 2) (not again for a timeout inside a timeout
// epoch: the same event, like Linux TCP's Loss state), collapses the window to kTimeoutWindow and
// opens a "timeout epoch" ending at send_bound (every fragment sent so far,
// all resent one by one as the window allows). Inside it the window slow
// starts on every unmarked acknowledgement (the resent fragments are below
// the epoch's end: an ordinary reduction epoch would freeze the window at
// one fragment for the whole recovery), while ecn marks and losses are
// ignored (they belong to the event that caused the timeout) and marked
// acknowledgements do not grow it. The workers of a job time out for the same
// loss at nearly the same time, and the window after a timeout depends only
// on the window before it, so the windows stay together as far as local
// timers allow: workers that time out between the same two parameter
// packets have the same window afterwards.
//
//   CongestionController cc(config);
//   cc.OnAck(position, ecn ? EcnMark::kMarked : EcnMark::kNotMarked, lowest_unacked);
//   while (in_flight < cc.window()) send(next++);
#ifndef ATP_LIB_WORKER_CONGESTION_CONTROLLER_H_
#define ATP_LIB_WORKER_CONGESTION_CONTROLLER_H_

#include <algorithm>
#include <cstdint>

namespace atp::worker {

// EcnMark: whether a parameter packet carried the `ecn` flag.
enum class EcnMark : uint8_t { kNotMarked, kMarked };

class CongestionController {
 public:
  // LossResponse: what a detected loss (OnLoss) does to the window.
  enum class LossResponse : uint8_t {
    // ATP-SPEC section 5: halve, at most once per round trip.
    kHalve,
    // Halve only if an `ecn` mark arrived within the last 2 x window
    // acknowledgements (the ACK stream only, so workers stay together).
    // With ECN thresholds far below the switches' buffers, a queue marks
    // long before it tail-drops, so a loss without marks is not congestion
    // (corruption, a flapping link): halving for it costs Reno's
    // 1.22 / sqrt(p) fragments per round trip for nothing.
    kHalveOnlyWithEcn,
  };

  enum class Mode : uint8_t {
    kAimd,         // ATP-SPEC section 5
    kFixedWindow,  // window = initial_window forever
  };

  struct Config {
    Mode mode = Mode::kAimd;
    uint32_t initial_window = 200;
    // max_window: the queue's slot count; also the initial ssthresh when
    // initial_ssthresh is 0.
    uint32_t max_window = 256;
    uint32_t initial_ssthresh = 0;  // 0: max_window (no threshold)
    LossResponse loss_response = LossResponse::kHalve;
    // Requires 1 <= initial_window <= max_window (the engine validates it).
  };

  // DebugState: the controller's state, for tests and logs.
  struct DebugState {
    Mode mode = Mode::kAimd;
    uint32_t window = 0;
    uint32_t ssthresh = 0;
    bool in_slow_start = false;
    bool in_reduction_epoch = false;   // no ack at or beyond its end yet
    uint64_t reduction_epoch_end = 0;  // first position whose ack ends the epoch
    uint64_t send_bound = 0;
    bool in_timeout_epoch = false;     // the epoch was opened by a timeout
    uint64_t reductions = 0;           // window halvings done
    uint64_t timeouts = 0;             // OnTimeout calls that collapsed the window
    uint64_t ignored_signals = 0;      // ecn/loss signals inside an epoch
    uint64_t losses_without_ecn = 0;   // losses kHalveOnlyWithEcn did not act on
  };

  explicit CongestionController(const Config& config);

  // OnAck: a parameter packet completed `position` (in flight until now);
  // `lowest_unacked` is the queue's lowest unacknowledged position after it
  // (the next position to send when nothing is in flight). Runs on every
  // acknowledgement: defined below, to be inlined.
  void OnAck(uint64_t position, EcnMark ecn, uint64_t lowest_unacked);

  // OnLoss: the loss detector declared `position` lost (and it is being
  // resent). `lowest_unacked` as for OnAck.
  void OnLoss(uint64_t position, uint64_t lowest_unacked);

  // kTimeoutWindow: the window after a retransmission timeout.
  static constexpr uint32_t kTimeoutWindow = 1;
  // kMinTimeoutSsthresh: ssthresh never drops below this on a timeout (TCP's
  // two segments), so recovery slow starts at least to two fragments.
  static constexpr uint32_t kMinTimeoutSsthresh = 2;

  // OnTimeout: the engine's retransmission timer fired (see above). Does
  // nothing with Mode::kFixedWindow.
  void OnTimeout();

  // window: fragments the engine may have in flight (sent, unacknowledged).
  uint32_t window() const { return window_; }
  uint32_t ssthresh() const { return ssthresh_; }
  // send_bound: every position the engine may have sent so far is below it.
  uint64_t send_bound() const { return send_bound_; }
  DebugState debug_state() const;

 private:
  bool InReductionEpoch(uint64_t position) const {
    return reduced_ && position < reduction_epoch_end_;
  }
  // MaybeReduce: halves the window unless `position` belongs to the current
  // reduction epoch. Returns whether it did.
  bool MaybeReduce(uint64_t position);
  // These run on every acknowledgement: defined here to be inlined.
  void Grow() {
    if (window_ >= config_.max_window) return;
    if (window_ < ssthresh_) {
      ++window_;  // slow start: one per acknowledged fragment
      return;
    }
    // Congestion avoidance: one per window of acknowledged fragments.
    if (++acked_since_increase_ >= window_) {
      acked_since_increase_ = 0;
      ++window_;
    }
  }
  void UpdateSendBound(uint64_t lowest_unacked) {
    send_bound_ = std::max(send_bound_, SendableEnd(lowest_unacked));
  }
  // SendableEnd: what the engine may send up to with this window.
  uint64_t SendableEnd(uint64_t lowest_unacked) const {
    const uint64_t base =
        any_ack_ ? std::max(lowest_unacked, largest_acked_ + 1) : lowest_unacked;
    return base + window_;
  }

  Config config_;
  uint32_t window_;
  uint32_t ssthresh_;
  uint32_t acked_since_increase_ = 0;  // congestion avoidance counter
  bool reduced_ = false;               // a reduction has happened
  bool timeout_epoch_ = false;         // the current epoch came from OnTimeout
  bool any_ack_ = false;
  uint64_t largest_acked_ = 0;
  uint64_t reduction_epoch_end_ = 0;
  uint64_t send_bound_;
  uint64_t reductions_ = 0;
  uint64_t timeouts_ = 0;
  uint64_t ignored_signals_ = 0;
  uint64_t losses_without_ecn_ = 0;
  // Acknowledgements since the last `ecn` mark (saturating); starts "long ago".
  uint64_t acks_since_ecn_ = UINT64_MAX;
};

inline void CongestionController::OnAck(uint64_t position, EcnMark ecn, uint64_t lowest_unacked) {
  if (!any_ack_ || position > largest_acked_) largest_acked_ = position;
  any_ack_ = true;
  if (ecn == EcnMark::kMarked) {
    acks_since_ecn_ = 0;
  } else if (acks_since_ecn_ != UINT64_MAX) {
    ++acks_since_ecn_;
  }
  if (config_.mode == Mode::kAimd) {
    if (InReductionEpoch(position)) {
      // The same congestion event: no second halving, and no growth unless
      // this is a timeout's recovery (which slow starts on unmarked acks).
      if (ecn == EcnMark::kMarked) {
        ++ignored_signals_;
      } else if (timeout_epoch_) {
        Grow();
      }
    } else if (ecn == EcnMark::kMarked) {
      MaybeReduce(position);
    } else {
      Grow();
    }
  }
  UpdateSendBound(lowest_unacked);
}

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_CONGESTION_CONTROLLER_H_
