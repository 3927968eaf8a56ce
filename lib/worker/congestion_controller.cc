#include "lib/worker/congestion_controller.h"

#include <algorithm>

namespace atp::worker {

CongestionController::CongestionController(const Config& config)
    : config_(config),
      window_(std::clamp<uint32_t>(config.initial_window, 1, std::max<uint32_t>(1, config.max_window))),
      ssthresh_(config.initial_ssthresh == 0 ? std::max<uint32_t>(1, config.max_window)
                                             : config.initial_ssthresh),
      send_bound_(window_) {}

void CongestionController::OnLoss(uint64_t position, uint64_t lowest_unacked) {
  if (config_.mode == Mode::kAimd) {
    if (config_.loss_response == LossResponse::kHalveOnlyWithEcn &&
        acks_since_ecn_ > 2 * uint64_t{window_}) {
      ++losses_without_ecn_;
    } else {
      MaybeReduce(position);
    }
  }
  UpdateSendBound(lowest_unacked);
}

void CongestionController::OnTimeout() {
  if (config_.mode != Mode::kAimd) return;
  // A timeout during a timeout's recovery (no acknowledgement beyond the
  // epoch yet) is the same event: the threshold stays (like Linux TCP in
  // its Loss state), so the recovery slow starts back to it.
  const bool same_event = timeout_epoch_ && reduced_ &&
                          (!any_ack_ || largest_acked_ < reduction_epoch_end_);
  if (!same_event) ssthresh_ = std::max<uint32_t>(kMinTimeoutSsthresh, window_ / 2);
  window_ = std::min<uint32_t>(kTimeoutWindow, std::max<uint32_t>(1, config_.max_window));
  acked_since_increase_ = 0;
  reduced_ = true;
  timeout_epoch_ = true;
  reduction_epoch_end_ = send_bound_;
  ++timeouts_;
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
  timeout_epoch_ = false;
  // Everything sent so far is below send_bound_: the first ack at or beyond
  // it is for a fragment sent after this reduction.
  reduction_epoch_end_ = send_bound_;
  ++reductions_;
  return true;
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
  state.in_timeout_epoch = state.in_reduction_epoch && timeout_epoch_;
  state.reductions = reductions_;
  state.timeouts = timeouts_;
  state.losses_without_ecn = losses_without_ecn_;
  state.ignored_signals = ignored_signals_;
  return state;
}

}  // namespace atp::worker
