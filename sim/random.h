// sim/random.h: the simulator's pseudo-random numbers: small, fast, and
// the same sequence on every platform and standard library (which
// std::uniform_real_distribution does not promise).
//
// Every source of randomness in a simulation (each packet filter, each
// workload generator) owns its own Random, seeded with
// Random::DeriveSeed(run_seed, stream): adding a filter to one link never
// changes the draws another link sees, and the same run seed replays the
// same run bit for bit.
//
//   atp::sim::Random random(atp::sim::Random::DeriveSeed(seed, /*stream=*/17));
//   if (random.Chance(0.01)) drop();
#ifndef ATP_SIM_RANDOM_H_
#define ATP_SIM_RANDOM_H_

#include <cstdint>

namespace atp::sim {

// Random: xoshiro256** seeded through SplitMix64. Not thread-safe (one per
// owner); copyable (a copy continues the same sequence independently).
class Random {
 public:
  explicit Random(uint64_t seed);

  // DeriveSeed: a seed for the independent stream `stream` of a run seeded
  // with `seed`. Distinct streams give unrelated sequences.
  static uint64_t DeriveSeed(uint64_t seed, uint64_t stream);

  // Next: 64 uniformly distributed bits.
  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // NextDouble: uniform in [0, 1), 53 bits of precision.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Below: uniform in [0, bound); bound > 0. (Lemire's multiply-shift; the
  // tiny bias for bounds near 2^64 does not matter here.)
  uint64_t Below(uint64_t bound) {
    __extension__ using Wide = unsigned __int128;
    return static_cast<uint64_t>((static_cast<Wide>(Next()) * bound) >> 64);
  }

  // Chance: true with probability p (p <= 0: never; p >= 1: always).
  bool Chance(double p) { return NextDouble() < p; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t state_[4];
};

// ProbabilityThreshold: a probability as a 64-bit threshold, so that a hot
// path can test `random.Next() < threshold` with one comparison.
// p <= 0 gives 0 (never); p >= 1 gives UINT64_MAX (all but 1 in 2^64).
uint64_t ProbabilityThreshold(double p);

}  // namespace atp::sim

#endif  // ATP_SIM_RANDOM_H_
