// lib/worker/rtt_estimator.h: round-trip time statistics and the
// retransmission timeout of one worker queue (ATP-SPEC section 5, "Timeout").
//
// RFC 6298 smoothing: the first sample R sets srtt = R, rttvar = R / 2; later
// ones update rttvar = 3/4 rttvar + 1/4 |srtt - R| and srtt = 7/8 srtt + 1/8 R.
// The timeout is
//
//   rto = min(max_rto, max(floor, srtt + 4 * rttvar, slowest) * backoff^timeouts)
//
// `slowest` is the slowest recent round trip: the largest sample of the
// last one to two `slowest_window`s (a two-bucket windowed maximum, advanced
// by the samples' times). It is there for ATP's collective round trip: an
// aggregate completes when the last worker's fragment arrives, so a worker
// sees long round trips only in the rounds it waited for another
// (descheduled, waking from sleep) and short ones in the rounds the others
// waited for it. Smoothing averages the two and the variance term forgets
// the long ones within a few samples, so the next wait for another worker
// fired the timer spuriously (on a shared CPU, every few rounds:
// tests/unit/worker/collective_rto_test.cc). Once such a wait was measured,
// the RTO stays above it while such waits recur, and for at most two
// windows after the last one. Its price: a loss that reordering cannot
// detect waits for the job's slowest recent round trip, not the smoothed one.
//
// A timeout of this queue's own timer forgets `slowest`. On a lossy path the
// long waits a worker measures are mostly other workers' retransmission
// timers (a lost fragment completes its aggregate, for everyone, only when
// its sender's timer fires), and those timers include their own `slowest`,
// stretched by the jitter and doubled by the backoff: remembered, they lift
// every worker's RTO a little more with each loss, without bound. With 1%
// loss per link (atp-sim --scenario=loss-sweep) they held RTOs at 2-6 ms
// against a 10 us round trip and took the job from 0.8 to 13.5 simulated
// seconds. The timer firing also shows the remembered waits did not cover
// the present one; the backoff covers it. A worker whose long waits come
// from a slow peer still learns them between its timeouts and keeps them
// while it does not time out (tests/unit/worker/collective_rto_test.cc).
//
// The default floor is 200 us: the simulated round trip is ~10 us and a
// datacenter's is tens of microseconds, but a round trip here also waits for
// the job's slowest worker, and hosts add scheduling jitter of the order of
// 100 us; 200 us keeps a spurious timeout rare (and one costs little: the
// window collapses to one fragment, CongestionController::OnTimeout) while
// a real loss that reordering cannot detect costs 20 round trips, not 100
// (the former 1 ms floor).
//
// Each sample is first bounded to twice max(floor, srtt + 4 rttvar)
// (initial_rto before the first sample; not `slowest`, which the bounded
// samples feed) and to max_rto: a round trip that follows Karn's rule
// can still include seconds spent waiting for another worker's timeout and
// resend (its fragment was lost, this one was not), and one such sample
// would otherwise lift srtt, and every later timeout, by an eighth of it. A
// path that really got slower still lifts the RTO geometrically, doubling
// it in a few samples.
//
// The estimator owns no timer: the engine asks for Rto() and computes its own
// deadline. A round trip here is "gradient sent" to "parameter packet
// received", so it includes the wait for the slowest worker of the job. The
// caller must not feed samples from retransmitted fragments (Karn's rule).
//
//   RttEstimator rtt(config);
//   rtt.OnSample(now - round_trip_start, now);
//   TimePoint deadline = now + rtt.Rto();
#ifndef ATP_LIB_WORKER_RTT_ESTIMATOR_H_
#define ATP_LIB_WORKER_RTT_ESTIMATOR_H_

#include <algorithm>
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
    // slowest_window: how long the slowest round trip is remembered (between
    // one and two windows); positive and finite.
    TimeDelta slowest_window = TimeDelta::FromMilliseconds(200);

    // Validate: 0 < rto_floor <= initial_rto <= max_rto, rto_backoff in
    // [1, 1000], slowest_window positive and finite.
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
    TimeDelta slowest;         // the slowest recent round trip (windowed maximum)
    TimeDelta rto;             // Rto() now, backoff included
    uint32_t timeouts = 0;     // consecutive timeouts since the last sample
    uint64_t samples = 0;
  };

  // `config` must be valid (Config::Validate).
  explicit RttEstimator(const Config& config);

  // OnSample: one round trip of a fragment sent once, measured at `now`,
  // bounded as above. Ignores negative samples (a caller clock error).
  // Resets the backoff.
  void OnSample(TimeDelta rtt, TimePoint now);

  // OnProgress: the queue's lowest unacknowledged position advanced (any
  // acknowledgement, of a first transmission or of a resend): resets the
  // backoff, keeps the smoothed statistics.
  void OnProgress() { timeouts_ = 0; }

  // OnTimeout: the retransmission timer fired; the next Rto() is longer by
  // the backoff factor (up to max_rto), and the slowest recent round trip is
  // forgotten (see above).
  void OnTimeout();

  // Rto: the current retransmission timeout, in [rto_floor, max_rto].
  TimeDelta Rto() const;

  bool has_sample() const { return samples_ > 0; }
  TimeDelta srtt() const { return srtt_; }
  TimeDelta rttvar() const { return rttvar_; }
  TimeDelta slowest() const { return std::max(slowest_now_, slowest_before_); }
  DebugState debug_state() const;

 private:
  // SmoothedRto: max(floor, srtt + 4 rttvar), initial_rto before any
  // sample; UnbackedRto: that and `slowest`, before the backoff.
  TimeDelta SmoothedRto() const;
  TimeDelta UnbackedRto() const;

  Config config_;
  TimeDelta latest_rtt_;
  TimeDelta min_rtt_ = TimeDelta::Infinite();
  TimeDelta srtt_;
  TimeDelta rttvar_;
  // The windowed maximum: the current bucket began at slowest_since_.
  TimeDelta slowest_now_;
  TimeDelta slowest_before_;
  TimePoint slowest_since_;
  uint64_t samples_ = 0;
  uint32_t timeouts_ = 0;
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_RTT_ESTIMATOR_H_
