// atp/time.h: strong time types for the protocol core.
//
// The protocol engines never read a clock: callers pass `now` in and engines
// return the deadline at which they want to be called again. Both types hold
// signed 64-bit nanoseconds; `absl::Duration` appears only at the public API
// edge (job options, waits).
//
//   atp::TimePoint now = clock.Now();
//   atp::TimePoint deadline = now + atp::TimeDelta::FromMicroseconds(50);
//   if (deadline <= now) { ... }
#ifndef ATP_TIME_H_
#define ATP_TIME_H_

#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace atp {

// TimeDelta: a signed span of time in nanoseconds.
class TimeDelta {
 public:
  constexpr TimeDelta() = default;
  static constexpr TimeDelta FromNanoseconds(int64_t ns) { return TimeDelta(ns); }
  static constexpr TimeDelta FromMicroseconds(int64_t us) { return TimeDelta(us * 1000); }
  static constexpr TimeDelta FromMilliseconds(int64_t ms) { return TimeDelta(ms * 1000000); }
  static constexpr TimeDelta FromSeconds(int64_t s) { return TimeDelta(s * 1000000000); }
  static constexpr TimeDelta Zero() { return TimeDelta(0); }
  static constexpr TimeDelta Infinite() { return TimeDelta(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ToNanoseconds() const { return ns_; }
  constexpr double ToMicroseconds() const { return static_cast<double>(ns_) / 1e3; }
  constexpr double ToSeconds() const { return static_cast<double>(ns_) / 1e9; }
  constexpr bool IsInfinite() const { return ns_ == std::numeric_limits<int64_t>::max(); }

  constexpr TimeDelta operator+(TimeDelta o) const { return TimeDelta(ns_ + o.ns_); }
  constexpr TimeDelta operator-(TimeDelta o) const { return TimeDelta(ns_ - o.ns_); }
  constexpr TimeDelta operator*(int64_t k) const { return TimeDelta(ns_ * k); }
  constexpr TimeDelta operator/(int64_t k) const { return TimeDelta(ns_ / k); }
  constexpr TimeDelta& operator+=(TimeDelta o) { ns_ += o.ns_; return *this; }
  constexpr TimeDelta& operator-=(TimeDelta o) { ns_ -= o.ns_; return *this; }
  constexpr auto operator<=>(const TimeDelta&) const = default;

 private:
  constexpr explicit TimeDelta(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

// TimePoint: an instant, in nanoseconds since an arbitrary epoch chosen by the
// clock that produced it (a monotonic clock, or a simulator's virtual clock).
class TimePoint {
 public:
  constexpr TimePoint() = default;
  static constexpr TimePoint FromNanoseconds(int64_t ns) { return TimePoint(ns); }
  static constexpr TimePoint Zero() { return TimePoint(0); }
  // Infinite: "no deadline".
  static constexpr TimePoint Infinite() { return TimePoint(std::numeric_limits<int64_t>::max()); }

  constexpr int64_t ToNanoseconds() const { return ns_; }
  constexpr bool IsInfinite() const { return ns_ == std::numeric_limits<int64_t>::max(); }

  // Adding to an infinite point, or an infinite delta, stays infinite.
  constexpr TimePoint operator+(TimeDelta d) const {
    if (IsInfinite() || d.IsInfinite()) return Infinite();
    return TimePoint(ns_ + d.ToNanoseconds());
  }
  constexpr TimePoint operator-(TimeDelta d) const { return TimePoint(ns_ - d.ToNanoseconds()); }
  constexpr TimeDelta operator-(TimePoint o) const {
    return TimeDelta::FromNanoseconds(ns_ - o.ns_);
  }
  constexpr TimePoint& operator+=(TimeDelta d) { *this = *this + d; return *this; }
  constexpr auto operator<=>(const TimePoint&) const = default;

 private:
  constexpr explicit TimePoint(int64_t ns) : ns_(ns) {}
  int64_t ns_ = 0;
};

constexpr TimePoint Earliest(TimePoint a, TimePoint b) { return a < b ? a : b; }

// ShareOfPass: how many of `total` items a sweep `since` after its previous
// one visits so that every item is visited once per `pass` (the engines'
// orphan scans): total * since / pass rounded up, at least 1, at most total;
// total once `since` reaches `pass`.
constexpr size_t ShareOfPass(size_t total, TimeDelta since, TimeDelta pass) {
  if (since >= pass) return total;
  const double share = static_cast<double>(total) * static_cast<double>(since.ToNanoseconds()) /
                       static_cast<double>(pass.ToNanoseconds());
  const auto rounded = static_cast<size_t>(share);
  const size_t up = static_cast<double>(rounded) < share ? rounded + 1 : rounded;
  return up < 1 ? 1 : (up > total ? total : up);
}

}  // namespace atp

#endif  // ATP_TIME_H_
