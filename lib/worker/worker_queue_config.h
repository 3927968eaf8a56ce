// lib/worker/worker_queue_config.h: the configuration of one worker queue
// engine (one per worker, queue and I/O thread; ATP-SPEC sections 3 and 5).
//
//   atp::worker::WorkerQueueConfig config;
//   config.shape = atp::protocol::JobShape::Uniform(/*job=*/7, /*racks=*/2, /*workers=*/4);
//   config.rack = 1;
//   config.worker_in_rack = 3;
//   config.queue = 5;
//   config.slots = 256;
//   ATP_RETURN_IF_ERROR(config.Validate());
#ifndef ATP_LIB_WORKER_WORKER_QUEUE_CONFIG_H_
#define ATP_LIB_WORKER_WORKER_QUEUE_CONFIG_H_

#include <cstdint>

#include "absl/status/status.h"
#include "atp/quantize.h"
#include "atp/time.h"
#include "atp/wire.h"
#include "lib/protocol/aggregator_index.h"
#include "lib/protocol/job_shape.h"
#include "lib/worker/congestion_controller.h"
#include "lib/worker/rtt_estimator.h"

namespace atp::worker {

// kMaxSlots: the largest window-slot count. The worker and the PS must use the
// same value (slot = position mod slots on both sides), so this matches the
// PS's bound (lib/ps/ps_config.h). Serial-number arithmetic on 20-bit
// positions needs every live position within half the position space of the
// expected one: in-flight positions span at most `slots`, and stale parameter
// packets are at most `slots` behind (the PS keeps one old generation).
inline constexpr uint32_t kMaxSlots = 1u << 16;
static_assert(2 * uint64_t{kMaxSlots} <= (uint64_t{1} << wire::kQueueShift) / 2,
              "positions in flight and stale ones must stay within half the 20-bit space");

struct WorkerQueueConfig {
  using CongestionControl = CongestionController::Mode;

  // shape: the job's racks and workers (the job id is shape.job).
  protocol::JobShape shape;
  // rack / worker_in_rack: this worker's place in the shape.
  int rack = 0;
  int worker_in_rack = 0;
  // queue: this engine's queue index, 0..15 (the top 4 bits of seq).
  uint32_t queue = 0;
  // slots: window slots of the queue: a power of two in
  // [initial_window, kMaxSlots]; the same value as the PS's. Also the largest
  // window congestion control may reach.
  uint32_t slots = 256;
  // scale: quantization factor (x * scale rounded to int32), the job's value.
  double scale = kDefaultScale;
  protocol::IndexPolicy index_policy = protocol::IndexPolicy::kHashed;
  // initial_window: fragments in flight at start, 1..slots (the fixed window
  // when congestion_control is kFixedWindow).
  uint32_t initial_window = 200;
  CongestionControl congestion_control = CongestionControl::kAimd;
  // loss_response: see CongestionController::LossResponse.
  // The default halves on every detected loss, as ATP-SPEC section 5 says;
  // kHalveOnlyWithEcn (halve only when ECN was seen recently) is an option
  // for deployments whose switches mark long before they drop.
  CongestionController::LossResponse loss_response = CongestionController::LossResponse::kHalve;
  // Retransmission timeout (see RttEstimator): floor, value before the first
  // sample, ceiling, and the factor per consecutive timeout. The floor's
  // default (200 us) is explained in rtt_estimator.h.
  TimeDelta rto_floor = TimeDelta::FromMicroseconds(200);
  TimeDelta initial_rto = TimeDelta::FromMilliseconds(20);
  // max_rto: 100 ms is 10^4 simulated round trips; a timeout sends one
  // fragment per worker (the window collapses), so a longer ceiling protects
  // nothing and only stretches recovery under heavy loss.
  TimeDelta max_rto = TimeDelta::FromMilliseconds(100);
  double rto_backoff = 2.0;
  // Timer jitter (see TimerJitter): every timer deadline is stretched by a
  // fraction in [0, rto_jitter_percent %) of the timeout, drawn afresh at
  // each timeout from a stream seeded by timer_seed and this engine's
  // (job, rack, worker, queue). 0 turns it off (every worker of a job then
  // times out in the same instant: see timer_jitter.h for why that
  // livelocks). A simulation sets timer_seed from its run seed.
  uint32_t rto_jitter_percent = 25;
  uint64_t timer_seed = 0;
  // incarnation: the worker process's random identity, written into the
  // control frames this engine sends (kPull; lib/wire/control_message.h).
  uint64_t incarnation = 0;

  // Validate: the shape is valid and every field is in range; the message
  // names the offending field ("WorkerQueueConfig.slots: ...").
  absl::Status Validate() const;

  RttEstimator::Config rtt_config() const {
    return RttEstimator::Config{.rto_floor = rto_floor,
                                .initial_rto = initial_rto,
                                .max_rto = max_rto,
                                .rto_backoff = rto_backoff};
  }
  CongestionController::Config cc_config() const {
    return CongestionController::Config{
        .mode = congestion_control,
        .initial_window = initial_window,
        .max_window = slots,
        .loss_response = loss_response};
  }
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_WORKER_QUEUE_CONFIG_H_
