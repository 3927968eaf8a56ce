// lib/host/clock.h: the runtime's clock and the conversions between
// absl::Duration (the public API's unit) and atp::TimeDelta (the engines').
//
// Only the runtime reads a clock; it passes `now` to the pure engines.
#ifndef ATP_LIB_HOST_CLOCK_H_
#define ATP_LIB_HOST_CLOCK_H_

#include <time.h>

#include "absl/time/time.h"
#include "atp/time.h"

namespace atp::host {

// MonotonicNow: CLOCK_MONOTONIC (the epoch of std::chrono::steady_clock on
// Linux, which the loopback wire uses too). About 20 ns via the vDSO.
inline TimePoint MonotonicNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return TimePoint::FromNanoseconds(int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec);
}

// ToTimeDelta: an infinite duration maps to TimeDelta::Infinite().
inline TimeDelta ToTimeDelta(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return TimeDelta::Infinite();
  return TimeDelta::FromNanoseconds(absl::ToInt64Nanoseconds(d));
}

inline absl::Duration ToDuration(TimeDelta d) {
  if (d.IsInfinite()) return absl::InfiniteDuration();
  return absl::Nanoseconds(d.ToNanoseconds());
}

}  // namespace atp::host

#endif  // ATP_LIB_HOST_CLOCK_H_
