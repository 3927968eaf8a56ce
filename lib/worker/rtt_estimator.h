// lib/worker/rtt_estimator.h: round-trip time statistics and the
// retransmission timeout of one worker queue (ATP-SPEC section 5, "Timeout").
//
// RFC 6298 smoothing: the first sample R sets srtt = R, rttvar = R / 2; later
// ones update rttvar = 3/4 rttvar + 1/4 |srtt - R| and srtt = 7/8 srtt + 1/8 R.
// The timeout is
//
//   rto = min(max_rto, max(floor, srtt + 4 * rttvar) * backoff^timeouts)
//
// (initial_rto before the first sample, backed off the same way). Every
// timeout multiplies it by `rto_backoff`; a new sample, or progress (the
// engine's lowest unacknowledged position advanced: OnProgress), resets the
// backoff. Progress is proof that the path works even when no sample can be
// taken (every completion answered a resend, so Karn's rule forbids one):
// without the reset, such a queue pays a timeout at max_rto for every loss.
//
// The default floor is 200 us: the simulated round trip is ~10 us and a
// datacenter's is tens of microseconds, but a round trip here also waits for
// the job's slowest worker, and hosts add scheduling jitter of the order of
// 100 us; 200 us keeps a spurious timeout rare (and one costs little: the
// window collapses to one fragment, CongestionController::OnTimeout) while
// a real loss that reordering cannot detect costs 20 round trips, not 100
// (the former 1 ms floor).
//
// The estimator owns no timer: the engine asks for Rto() and computes its own
// deadline. A round trip here is "gradient sent" to "parameter packet
// received", so it includes the wait for the slowest worker of the job. The
// caller must not feed samples from retransmitted fragments (Karn's rule).
//
//   RttEstimator rtt(config);
//   rtt.OnSample(now - sent_time);
//   TimePoint deadline = now + rtt.Rto();
#ifndef ATP_LIB_WORKER_RTT_ESTIMATOR_H_
#define ATP_LIB_WORKER_RTT_ESTIMATOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "atp/time.h"

namespace atp::worker {

class RttEstimator {
 public:
  struct Config {
    TimeDelta rto_floor = TimeDelta::FromMicroseconds(200);
    TimeDelta initial_rto = TimeDelta::FromMilliseconds(20);
    TimeDelta max_rto = TimeDelta::FromMilliseconds(100);
    // rto_backoff: factor applied per consecutive timeout, >= 1.
    double rto_backoff = 2.0;

    // Validate: 0 < rto_floor <= initial_rto <= max_rto, rto_backoff in [1, 1000].
    // The message names the field ("rto_floor", ...).
    absl::Status Validate() const;
  };

  // DebugState: everything a test or a log line may want.
  struct DebugState {
    bool has_sample = false;
    TimeDelta latest_rtt;
    TimeDelta min_rtt;
    TimeDelta srtt;
    TimeDelta rttvar;
    TimeDelta rto;             // Rto() now, backoff included
    uint32_t timeouts = 0;     // consecutive timeouts since the last sample
    uint64_t samples = 0;
  };

  // `config` must be valid (Config::Validate).
  explicit RttEstimator(const Config& config);

  // OnSample: one measured round trip of a fragment sent once. Ignores
  // negative samples (a caller clock error). Resets the backoff.
  void OnSample(TimeDelta rtt);

  // OnProgress: the queue's lowest unacknowledged position advanced (any
  // acknowledgement, of a first transmission or of a resend): resets the
  // backoff, keeps the smoothed statistics.
  void OnProgress() { timeouts_ = 0; }

  // OnTimeout: the retransmission timer fired; the next Rto() is longer by
  // the backoff factor (up to max_rto).
  void OnTimeout();

  // Rto: the current retransmission timeout, in [rto_floor, max_rto].
  TimeDelta Rto() const;

  bool has_sample() const { return samples_ > 0; }
  TimeDelta srtt() const { return srtt_; }
  TimeDelta rttvar() const { return rttvar_; }
  DebugState debug_state() const;

 private:
  Config config_;
  TimeDelta latest_rtt_;
  TimeDelta min_rtt_ = TimeDelta::Infinite();
  TimeDelta srtt_;
  TimeDelta rttvar_;
  uint64_t samples_ = 0;
  uint32_t timeouts_ = 0;
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_RTT_ESTIMATOR_H_
