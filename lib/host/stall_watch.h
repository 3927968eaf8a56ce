// lib/host/stall_watch.h: decides when a worker queue has stalled and why
// (JobOptions::stall_timeout, atp/failure.h). Pure: the caller passes the
// time, so tests drive it with a fake clock.
//
//   StallWatch watch(stall_timeout);
//   watch.OnBusy(now);                    // the queue got work while idle
//   watch.OnFrameFromPs(now);             // any valid frame from the PS
//   watch.OnProgress(now);                // a fragment completed
//   watch.OnWaitingFor(now, position, missing);   // a PS status frame
//   if (auto stall = watch.Check(now, busy)) fail(stall->failure, stall->detail);
//
// A busy queue stalls when nothing completed for stall_timeout (the clock
// restarts with every completion and when it turns busy). The cause:
//   - no frame at all from the PS since the clock restarted: kPsUnreachable;
//   - else a status naming the workers the PS waits for since then:
//     kWaitingForWorkers with those workers;
//   - else kStalled (the PS answers, completes nothing and names no one).
#ifndef ATP_LIB_HOST_STALL_WATCH_H_
#define ATP_LIB_HOST_STALL_WATCH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "atp/failure.h"
#include "atp/time.h"
#include "lib/protocol/worker_set.h"

namespace atp::host {

class StallWatch {
 public:
  struct Stall {
    FailureKind kind = FailureKind::kStalled;
    protocol::WorkerSet workers;  // kWaitingForWorkers
    uint32_t position = 0;        // kWaitingForWorkers: the fragment the PS named
  };

  // `stall_timeout`: TimeDelta::Infinite() never stalls.
  explicit StallWatch(TimeDelta stall_timeout) : stall_timeout_(stall_timeout) {}

  void OnBusy(TimePoint now) { progress_at_ = now; }
  void OnProgress(TimePoint now) { progress_at_ = now; }
  void OnFrameFromPs(TimePoint now) { heard_at_ = now; }
  void OnWaitingFor(TimePoint now, uint32_t position, const protocol::WorkerSet& workers) {
    waiting_at_ = now;
    waiting_position_ = position;
    waiting_ = workers;
  }

  // Check: the stall, if the queue is `busy` and stalled at `now`.
  std::optional<Stall> Check(TimePoint now, bool busy) const {
    if (!busy || stall_timeout_.IsInfinite() || now - progress_at_ < stall_timeout_) {
      return std::nullopt;
    }
    Stall stall;
    if (heard_at_ < progress_at_) {
      stall.kind = FailureKind::kPsUnreachable;
    } else if (waiting_at_ >= progress_at_ && !waiting_.empty()) {
      stall.kind = FailureKind::kWaitingForWorkers;
      stall.workers = waiting_;
      stall.position = waiting_position_;
    }
    return stall;
  }

  // deadline: when a busy queue would stall if nothing happens.
  TimePoint deadline() const { return progress_at_ + stall_timeout_; }
  TimeDelta stall_timeout() const { return stall_timeout_; }

 private:
  const TimeDelta stall_timeout_;
  TimePoint progress_at_;
  // Before anything was heard: earlier than any progress_at_.
  TimePoint heard_at_ = TimePoint::FromNanoseconds(INT64_MIN);
  TimePoint waiting_at_ = TimePoint::FromNanoseconds(INT64_MIN);
  uint32_t waiting_position_ = 0;
  protocol::WorkerSet waiting_;
};

}  // namespace atp::host

#endif  // ATP_LIB_HOST_STALL_WATCH_H_
