// lib/ps/ps_counters.h: what a PsEngine did with the messages it was given,
// one counter per reason, for stats, logs and tests.
//
// Every message handed to PsEngine::OnGradient is counted in `gradients` and in
// exactly one outcome counter, so that
//   gradients == contributions + duplicates + integer_on_float_path + param_resent
//                + stale + ahead + unknown_job + wrong_shard + shape_mismatch
//                + malformed + unexpected_ack + control
// (PsCounters::Outcomes). The other counters count events and sends.
#ifndef ATP_LIB_PS_PS_COUNTERS_H_
#define ATP_LIB_PS_PS_COUNTERS_H_

#include <cstdint>

namespace atp::ps {

struct PsCounters {
  // Every message given to OnGradient.
  uint64_t gradients = 0;

  // Outcomes (exactly one per message).
  uint64_t contributions = 0;          // accepted into a live seq (integer or fp)
  uint64_t duplicates = 0;             // overlapped what the seq already had; or a
                                       // non-resend copy for a completed seq
  uint64_t integer_on_float_path = 0;  // integer packet for a seq on the float path
                                       // (repeats the overflow request if needed)
  uint64_t param_resent = 0;           // resend for a completed seq: stored packet sent again
  uint64_t stale = 0;                  // position older than the slot's last completed one
  uint64_t ahead = 0;                  // position beyond the slot's next generation
  uint64_t unknown_job = 0;            // job not in PsConfig::jobs
  uint64_t wrong_shard = 0;            // queue owned by another shard
  uint64_t shape_mismatch = 0;         // valid header that disagrees with the job shape
  uint64_t malformed = 0;              // wire::ValidateHeader failed, or an fp packet
                                       // not from exactly one worker
  uint64_t unexpected_ack = 0;         // a parameter packet sent to the PS
  uint64_t control = 0;                // a control frame (lib/wire/control_message.h): the
                                       // host handles those, so the engine ignores one

  // Events and sends.
  uint64_t completed = 0;            // seqs completed (integer and float)
  uint64_t fp_completed = 0;         // of those, completed on the float path
  uint64_t switch_completed = 0;     // of those, integer seqs completed by one contribution
                                     // the switches had fully aggregated (edge set, the
                                     // first contribution covering every worker); the rest,
                                     // completed - fp_completed - switch_completed, the PS
                                     // summed from several contributions
  uint64_t param_sent = 0;           // parameter packets sent on completion
  uint64_t collisions_rehashed = 0;  // completions that carried a new aggregator index
  uint64_t overflows = 0;            // seqs that entered the float path
  uint64_t overflow_requests = 0;    // overflow requests sent (first and repeated)
  uint64_t orphans_released = 0;     // live generations (integer or float) released after
                                     // PsConfig::orphan_timeout without a message
  // kPull control frames (OnPull; not counted in `gradients`): answered with
  // a completed seq's stored parameter packet, or ignored (the seq is still
  // live, so its completion will reach the worker; or the pull named an
  // unknown job, another shard's queue, or a position never completed).
  uint64_t pulls_answered = 0;
  uint64_t pulls_ignored = 0;
  // Replayed parameter packets (OnReplay; not counted in `gradients`): taken
  // as the result of the position their slot waited for (and multicast), or
  // ignored (the slot does not wait for that position).
  uint64_t replays_applied = 0;
  uint64_t replays_ignored = 0;

  // Outcomes: the sum of the outcome counters; equals `gradients`.
  uint64_t Outcomes() const {
    return contributions + duplicates + integer_on_float_path + param_resent + stale + ahead +
           unknown_job + wrong_shard + shape_mismatch + malformed + unexpected_ack +
           control;
  }
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_PS_COUNTERS_H_
