#include "sim/random.h"

#include <cmath>
#include <limits>

namespace atp::sim {
namespace {

uint64_t SplitMix64(uint64_t& x) {
  x += 0x9E3779B97F4A7C15ull;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Random::Random(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& word : state_) word = SplitMix64(x);
}

uint64_t Random::DeriveSeed(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
  SplitMix64(x);
  return SplitMix64(x);
}

uint64_t ProbabilityThreshold(double p) {
  if (!(p > 0.0)) return 0;
  if (p >= 1.0) return std::numeric_limits<uint64_t>::max();
  // 2^64 * p, computed in long double to keep the low bits for tiny p.
  return static_cast<uint64_t>(std::ldexp(static_cast<long double>(p), 64));
}

}  // namespace atp::sim
