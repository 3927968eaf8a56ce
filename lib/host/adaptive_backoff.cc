#include "lib/host/adaptive_backoff.h"

#include <algorithm>

#include "lib/host/clock.h"

namespace atp::host {

AdaptiveBackoff::AdaptiveBackoff(const PollingOptions& options)
    : spin_rounds_(options.spin_iterations),
      yield_rounds_(uint64_t{options.spin_iterations} + options.yield_iterations),
      min_sleep_(ToTimeDelta(options.min_sleep)),
      max_sleep_(ToTimeDelta(options.max_sleep)),
      sleep_(min_sleep_),
      current_sleep_(min_sleep_) {}

AdaptiveBackoff::Action AdaptiveBackoff::OnIdle() {
  ++idle_rounds_;
  if (idle_rounds_ <= spin_rounds_) return Action::kSpin;
  if (idle_rounds_ <= yield_rounds_) return Action::kYield;
  current_sleep_ = sleep_;
  sleep_ = std::min(sleep_ * 2, max_sleep_);
  return Action::kSleep;
}

}  // namespace atp::host
