// lib/host/adaptive_backoff.h: what an idle I/O thread does next: spin,
// yield the CPU, or sleep for a growing time (PollingOptions).
//
//   AdaptiveBackoff backoff(options);
//   for (;;) {
//     if (DidWork()) { backoff.OnWork(); continue; }
//     switch (backoff.OnIdle()) {
//       case Action::kSpin:  CpuRelax(); break;
//       case Action::kYield: sched_yield(); break;
//       case Action::kSleep: SleepAtMost(backoff.sleep()); break;
//     }
//   }
//
// Pure: it counts idle rounds and reads no clock; any thread owns its own.
#ifndef ATP_LIB_HOST_ADAPTIVE_BACKOFF_H_
#define ATP_LIB_HOST_ADAPTIVE_BACKOFF_H_

#include <cstdint>

#include "atp/options.h"
#include "atp/time.h"

namespace atp::host {

class AdaptiveBackoff {
 public:
  enum class Action : uint8_t { kSpin, kYield, kSleep };

  explicit AdaptiveBackoff(const PollingOptions& options);

  // OnWork: the loop did something: back to spinning, shortest sleep.
  void OnWork() {
    idle_rounds_ = 0;
    sleep_ = min_sleep_;
  }

  // OnIdle: one more idle round; returns what to do now. After a kSleep,
  // sleep() has doubled (up to max_sleep) for the next one.
  Action OnIdle();

  // sleep: how long the current kSleep should last at most.
  TimeDelta sleep() const { return current_sleep_; }

  uint64_t idle_rounds() const { return idle_rounds_; }

 private:
  uint64_t spin_rounds_;
  uint64_t yield_rounds_;
  TimeDelta min_sleep_;
  TimeDelta max_sleep_;
  uint64_t idle_rounds_ = 0;
  TimeDelta sleep_;          // the next sleep's length
  TimeDelta current_sleep_;  // the length OnIdle last returned kSleep with
};

// CpuRelax: the spin-wait hint (x86 PAUSE).
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace atp::host

#endif  // ATP_LIB_HOST_ADAPTIVE_BACKOFF_H_
