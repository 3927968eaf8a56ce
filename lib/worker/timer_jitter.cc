#include "lib/worker/timer_jitter.h"

#include <cstdint>

namespace atp::worker {
namespace {

// SplitMix64: one step of a well-spread 64-bit sequence (Steele et al. 2014).
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// kNarrowMaxNanoseconds: the largest rto whose product with a fraction
// (below 10^6 millionths) fits in int64.
constexpr int64_t kNarrowMaxNanoseconds = INT64_MAX / 1000000;

}  // namespace

TimerJitter::TimerJitter(uint64_t seed, uint64_t key, uint32_t percent)
    : state_(seed ^ (key * 0xD6E8FEB86659FD93ull)), percent_(percent > 100 ? 100 : percent) {
  // Decorrelate neighbouring keys before the first draw.
  SplitMix64(state_);
  Redraw();
}

void TimerJitter::Redraw() {
  // Uniform in [0, percent * 10^4) millionths; the modulo bias of 2^64 by at
  // most 10^6 is far below anything a timer can show.
  const uint64_t range = uint64_t{percent_} * 10000;
  fraction_millionths_ = range == 0 ? 0 : static_cast<uint32_t>(SplitMix64(state_) % range);
}

TimeDelta TimerJitter::Spread(TimeDelta span) {
  const uint64_t range = uint64_t{percent_} * 20000;  // millionths of span
  if (range == 0 || span <= TimeDelta::Zero() || span.IsInfinite()) return TimeDelta::Zero();
  const uint64_t millionths = SplitMix64(state_) % range;
  __extension__ using Wide = __int128;
  const Wide ns = static_cast<Wide>(span.ToNanoseconds()) * millionths / 1000000;
  return TimeDelta::FromNanoseconds(static_cast<int64_t>(ns));
}

TimeDelta TimerJitter::Stretch(TimeDelta rto) const {
  if (rto.IsInfinite()) return rto;
  // Every RTO the engine has (up to about 2.5 hours) times 10^6 fits in 64
  // bits, where the division by the constant 10^6 is a multiply; the
  // engine stretches a timer with every parameter packet, and a 128-bit
  // division is a library call. Both give the same quotient.
  const int64_t ns = rto.ToNanoseconds();
  if (ns >= 0 && ns <= kNarrowMaxNanoseconds) {
    return rto + TimeDelta::FromNanoseconds(ns * int64_t{fraction_millionths_} / 1000000);
  }
  // 128 bits: any finite rto times 10^6 fits.
  __extension__ using Wide = __int128;
  const Wide extra = static_cast<Wide>(rto.ToNanoseconds()) * fraction_millionths_ / 1000000;
  return rto + TimeDelta::FromNanoseconds(static_cast<int64_t>(extra));
}

}  // namespace atp::worker
