// lib/worker/timer_jitter.h: the random stretch of one worker queue's
// retransmission timer (ATP-SPEC section 5, "Timeout"; section 8, liveness).
//
// Every worker of a job restarts its timer when the same multicast parameter
// packet arrives, and every worker's RTT estimator sees the same ACK stream,
// so without jitter their timers fire in the same nanosecond. Their resends
// then reach the shared egress port towards the PS together (resends are not
// aggregated: ATP-SPEC section 4, rule 4), a tail-drop queue keeps the same
// one of them every round (arrival order at equal times is deterministic),
// and a queue smaller than the fan-in loses the others forever: the job
// never finishes (atp-sim --queue_frames=1). Stretching each timer by a
// fraction drawn afresh at every timeout, from a stream of its own, spreads
// the resends over a quarter of an RTO (tens of microseconds at the 200 us
// floor, thousands of frame times) and makes every round an independent
// trial, so a round that gets every resend through comes with probability 1
// (the argument of Ethernet's randomized backoff).
//
// Deterministic: the stream is seeded from (seed, job, rack, worker, queue),
// so a simulation with the same seed repeats bit for bit while two workers of
// one job never share a stream.
//
//   TimerJitter jitter(config.timer_seed, key, config.rto_jitter_percent);
//   deadline = now + jitter.Stretch(rtt.Rto());
//   ... on a timeout: jitter.Redraw();
//   ... resends a multicast triggered: hold them for jitter.Spread(srtt).
//
// The same reasoning holds for resends that a parameter packet triggers
// (three out-of-order ones declaring a loss, an overflow request, the next
// fragment of a timeout's recovery): every worker gets that packet in the
// same instant and would resend in the same instant, an unaggregated incast
// of fan-in frames into the PS's port per position. Spread() gives each
// worker a fresh random wait of up to half a smoothed round trip first.
#ifndef ATP_LIB_WORKER_TIMER_JITTER_H_
#define ATP_LIB_WORKER_TIMER_JITTER_H_

#include <cstdint>

#include "atp/time.h"

namespace atp::worker {

class TimerJitter {
 public:
  // `seed`: the run's seed; `key`: what tells this timer apart from every
  // other of the seed (job, rack, worker, queue packed by the caller);
  // `percent`: the largest stretch, in percent of the timeout, 0..100 (0:
  // no jitter).
  TimerJitter(uint64_t seed, uint64_t key, uint32_t percent);

  // Stretch: `rto` lengthened by the current draw, in [rto, rto * (1 + percent/100)).
  TimeDelta Stretch(TimeDelta rto) const;

  // Redraw: a fresh draw (after each timeout, so rounds are independent).
  void Redraw();

  // Spread: a fresh uniform draw in [0, span * 2 * percent / 100) (with the
  // default 25%: up to half of `span`); does not change the timer's draw.
  TimeDelta Spread(TimeDelta span);

  // fraction_millionths: the current stretch, in millionths of the timeout.
  uint32_t fraction_millionths() const { return fraction_millionths_; }

 private:
  uint64_t state_;
  uint32_t percent_;
  uint32_t fraction_millionths_ = 0;
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_TIMER_JITTER_H_
