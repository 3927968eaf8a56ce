#include "lib/worker/congestion_controller.h"

#include <algorithm>

namespace atp::worker {

CongestionController::CongestionController(const Config& config)
    : config_(config),
      window_(std::clamp<uint32_t>(config.initial_window, 1, std::max<uint32_t>(1, config.max_window))),
      ssthresh_(config.initial_ssthresh == 0 ? std::max<uint32_t>(1, config.max_window)
                                             : config.initial_ssthresh),
      send_bound_(window_) {}

void CongestionController::OnAck(uint64_t position, EcnMark ecn, uint64_t lowest_unacked) {
  if (!any_ack_ || position > largest_acked_) largest_acked_ = position;
  any_ack_ = true;
  if (config_.mode == Mode::kAimd) {
    if (InReductionEpoch(position)) {
      // The same congestion event: no second halving, no growth.
      if (ecn == EcnMark::kMarked) ++ignored_signals_;
    } else if (ecn == EcnMark::kMarked) {
      MaybeReduce(position);
    } else {
      Grow();
    }
  }
  UpdateSendBound(lowest_unacked);
}

void CongestionController::OnLoss(uint64_t position, uint64_t lowest_unacked) {
  if (config_.mode == Mode::kAimd) MaybeReduce(position);
  UpdateSendBound(lowest_unacked);
}

bool CongestionController::MaybeReduce(uint64_t position) {
  if (InReductionEpoch(position)) {
    ++ignored_signals_;
    return false;
  }
  ssthresh_ = std::max<uint32_t>(1, window_ / 2);
  window_ = ssthresh_;
  acked_since_increase_ = 0;
  reduced_ = true;
  // Everything sent so far is below send_bound_: the first ack at or beyond
  // it is for a fragment sent after this reduction.
  reduction_epoch_end_ = send_bound_;
  ++reductions_;
  return true;
}

void CongestionController::Grow() {
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

uint64_t CongestionController::SendableEnd(uint64_t lowest_unacked) const {
  const uint64_t base = any_ack_ ? std::max(lowest_unacked, largest_acked_ + 1) : lowest_unacked;
  return base + window_;
}

void CongestionController::UpdateSendBound(uint64_t lowest_unacked) {
  send_bound_ = std::max(send_bound_, SendableEnd(lowest_unacked));
}

CongestionController::DebugState CongestionController::debug_state() const {
  DebugState state;
  state.mode = config_.mode;
  state.window = window_;
  state.ssthresh = ssthresh_;
  state.in_slow_start = config_.mode == Mode::kAimd && window_ < ssthresh_;
  state.in_reduction_epoch = reduced_ && (!any_ack_ || largest_acked_ < reduction_epoch_end_);
  state.reduction_epoch_end = reduction_epoch_end_;
  state.send_bound = send_bound_;
  state.reductions = reductions_;
  state.ignored_signals = ignored_signals_;
  return state;
}

}  // namespace atp::worker
