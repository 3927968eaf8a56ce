#include "lib/worker/rtt_estimator.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace atp::worker {

absl::Status RttEstimator::Config::Validate() const {
  if (rto_floor <= TimeDelta::Zero() || rto_floor.IsInfinite()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rto_floor: must be positive and finite, got ", rto_floor.ToNanoseconds(),
                     " ns"));
  }
  if (initial_rto < rto_floor || initial_rto.IsInfinite()) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial_rto: must be finite and >= rto_floor, got ",
                     initial_rto.ToNanoseconds(), " ns"));
  }
  if (max_rto < initial_rto || max_rto.IsInfinite()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_rto: must be finite and >= initial_rto, got ", max_rto.ToNanoseconds(), " ns"));
  }
  if (!(rto_backoff >= 1.0 && rto_backoff <= 1e3)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rto_backoff: must be in [1, 1000], got ", rto_backoff));
  }
  if (slowest_window <= TimeDelta::Zero() || slowest_window.IsInfinite()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slowest_window: must be positive and finite, got ", slowest_window.ToNanoseconds(),
        " ns"));
  }
  return absl::OkStatus();
}

RttEstimator::RttEstimator(const Config& config) : config_(config) {}

void RttEstimator::OnSample(TimeDelta rtt, TimePoint now) {
  if (rtt < TimeDelta::Zero()) return;
  rtt = std::min({rtt, SmoothedRto() * 2, config_.max_rto});
  latest_rtt_ = rtt;
  min_rtt_ = std::min(min_rtt_, rtt);
  if (samples_ == 0) {
    srtt_ = rtt;
    rttvar_ = rtt / 2;
  } else {
    TimeDelta error = srtt_ > rtt ? srtt_ - rtt : rtt - srtt_;
    rttvar_ = (rttvar_ * 3 + error) / 4;
    srtt_ = (srtt_ * 7 + rtt) / 8;
  }
  if (samples_ == 0 || now >= slowest_since_ + config_.slowest_window * 2) {
    slowest_before_ = TimeDelta::Zero();
    slowest_now_ = TimeDelta::Zero();
    slowest_since_ = now;
  } else if (now >= slowest_since_ + config_.slowest_window) {
    slowest_before_ = slowest_now_;
    slowest_now_ = TimeDelta::Zero();
    slowest_since_ = now;
  }
  slowest_now_ = std::max(slowest_now_, rtt);
  ++samples_;
  timeouts_ = 0;
}

void RttEstimator::OnTimeout() {
  // Saturates long before overflow matters: the result is clamped to max_rto.
  if (timeouts_ < 64) ++timeouts_;
  // The remembered waits did not cover this one; on a lossy path they were
  // other workers' timers (see the header): forget them.
  slowest_now_ = TimeDelta::Zero();
  slowest_before_ = TimeDelta::Zero();
}

TimeDelta RttEstimator::SmoothedRto() const {
  if (samples_ == 0) return std::max(config_.initial_rto, config_.rto_floor);
  return std::max(srtt_ + rttvar_ * 4, config_.rto_floor);
}

TimeDelta RttEstimator::UnbackedRto() const { return std::max(SmoothedRto(), slowest()); }

TimeDelta RttEstimator::Rto() const {
  const TimeDelta base = UnbackedRto();
  if (timeouts_ == 0) return std::min(base, config_.max_rto);  // the common case: no pow()
  double scaled = static_cast<double>(base.ToNanoseconds()) *
                  std::pow(config_.rto_backoff, static_cast<double>(timeouts_));
  double max_ns = static_cast<double>(config_.max_rto.ToNanoseconds());
  if (!(scaled < max_ns)) return config_.max_rto;
  return TimeDelta::FromNanoseconds(static_cast<int64_t>(scaled));
}

RttEstimator::DebugState RttEstimator::debug_state() const {
  DebugState state;
  state.has_sample = samples_ > 0;
  state.latest_rtt = latest_rtt_;
  state.min_rtt = samples_ > 0 ? min_rtt_ : TimeDelta::Zero();
  state.srtt = srtt_;
  state.rttvar = rttvar_;
  state.slowest = slowest();
  state.rto = Rto();
  state.timeouts = timeouts_;
  state.samples = samples_;
  return state;
}

}  // namespace atp::worker
