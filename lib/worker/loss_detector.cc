#include "lib/worker/loss_detector.h"

#include <algorithm>

namespace atp::worker {

void LossDetector::OnTimeout(uint64_t lowest_unacked, uint64_t rearm_bound) {
  // Every position below rearm_bound was resent together: acknowledgements of
  // earlier sends say nothing about any of those resends, whichever position
  // becomes the expected one next.
  timeout_rearm_bound_ = std::max(timeout_rearm_bound_, rearm_bound);
  Track(lowest_unacked);
  count_ = 0;
  count_from_ = std::max(tracked_ + 1, timeout_rearm_bound_);
}

LossDetector::DebugState LossDetector::debug_state() const {
  return DebugState{
      .tracked = tracked_, .count = count_, .count_from = count_from_,
                    .losses = losses_};
}

}  // namespace atp::worker
