#include "lib/worker/worker_queue_config.h"

#include <bit>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace atp::worker {
namespace {

absl::Status FieldError(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("WorkerQueueConfig.", field, ": ", what));
}

}  // namespace

absl::Status WorkerQueueConfig::Validate() const {
  if (absl::Status s = shape.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerQueueConfig.shape: ", s.message()));
  }
  if (rack < 0 || rack >= shape.racks()) {
    return FieldError("rack", absl::StrCat("must be in 0..", shape.racks() - 1, ", got ", rack));
  }
  if (worker_in_rack < 0 || worker_in_rack >= shape.workers_in_rack(rack)) {
    return FieldError("worker_in_rack", absl::StrCat("must be in 0..",
                                                     shape.workers_in_rack(rack) - 1,
                                                     " for rack ", rack, ", got ",
                                                     worker_in_rack));
  }
  if (queue >= static_cast<uint32_t>(wire::kMaxQueues)) {
    return FieldError("queue",
                      absl::StrCat("must be in 0..", wire::kMaxQueues - 1, ", got ", queue));
  }
  if (slots == 0 || !std::has_single_bit(slots) || slots > kMaxSlots) {
    return FieldError("slots", absl::StrCat("must be a power of two in 1..", kMaxSlots, ", got ",
                                            slots));
  }
  if (!(std::isfinite(scale) && scale > 0)) {
    return FieldError("scale", absl::StrCat("must be positive and finite, got ", scale));
  }
  if (initial_window < 1 || initial_window > slots) {
    return FieldError("initial_window", absl::StrCat("must be in 1..slots (", slots, "), got ",
                                                     initial_window));
  }
  if (congestion_control != CongestionControl::kAimd &&
      congestion_control != CongestionControl::kFixedWindow) {
    return FieldError("congestion_control", "unknown mode");
  }
  if (loss_response != CongestionController::LossResponse::kHalve &&
      loss_response != CongestionController::LossResponse::kHalveOnlyWithEcn) {
    return FieldError("loss_response", "unknown value");
  }
  if (rto_jitter_percent > 100) {
    return FieldError("rto_jitter_percent",
                      absl::StrCat("must be in 0..100, got ", rto_jitter_percent));
  }
  if (absl::Status s = rtt_config().Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerQueueConfig.", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace atp::worker
