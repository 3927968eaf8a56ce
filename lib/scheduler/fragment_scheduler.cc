#include "lib/scheduler/fragment_scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "atp/wire.h"

namespace atp::scheduler {

absl::Status FragmentSchedulerConfig::Validate() const {
  if (queues < 1 || queues > static_cast<uint32_t>(wire::kMaxQueues)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "FragmentSchedulerConfig.queues: ", queues, " is not in 1..", wire::kMaxQueues));
  }
  if (min_piece_fragments < 1) {
    return absl::InvalidArgumentError("FragmentSchedulerConfig.min_piece_fragments: must be >= 1");
  }
  if (max_piece_fragments < min_piece_fragments) {
    return absl::InvalidArgumentError(
        absl::StrCat("FragmentSchedulerConfig.max_piece_fragments: ", max_piece_fragments,
                     " is below min_piece_fragments (", min_piece_fragments, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<FragmentScheduler> FragmentScheduler::Create(const FragmentSchedulerConfig& config) {
  if (absl::Status status = config.Validate(); !status.ok()) return status;
  return FragmentScheduler(config);
}

FragmentScheduler::FragmentScheduler(const FragmentSchedulerConfig& config)
    : config_(config), loads_(config.queues, 0) {}

uint32_t FragmentScheduler::LeastLoadedQueue() const {
  // std::min_element returns the first of equal minima: the lowest index.
  return static_cast<uint32_t>(std::min_element(loads_.begin(), loads_.end()) - loads_.begin());
}

size_t FragmentScheduler::Assign(size_t values, std::vector<Piece>& out) {
  if (values == 0) return 0;
  const uint64_t fragments = (values + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
  const uint64_t by_size =
      (fragments + config_.max_piece_fragments - 1) / config_.max_piece_fragments;
  const uint64_t by_spread = std::min<uint64_t>(config_.queues, fragments / config_.min_piece_fragments);
  const uint64_t pieces = std::max<uint64_t>({uint64_t{1}, by_size, by_spread});
  for (uint64_t i = 0; i < pieces; ++i) {
    const uint64_t first = fragments * i / pieces;
    const uint64_t end = fragments * (i + 1) / pieces;
    Piece piece;
    piece.queue = LeastLoadedQueue();
    piece.first_value = static_cast<size_t>(first) * wire::kValuesPerFragment;
    piece.values =
        std::min(values, static_cast<size_t>(end) * wire::kValuesPerFragment) - piece.first_value;
    piece.fragments = end - first;
    loads_[piece.queue] += piece.fragments;
    out.push_back(piece);
  }
  return static_cast<size_t>(pieces);
}

}  // namespace atp::scheduler
