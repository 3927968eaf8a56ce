// examples/common/inputs.h: the inputs of the endpoint processes' workers,
// a deterministic function of (seed, job, rank, iteration, index), so that
// every worker computes, alone, the exact aggregate of all ranks' inputs and
// checks what it received against it.
//
// Each value is k / 256 for an integer k in [-A, A], A = min(256, 5120 /
// workers): x * kDefaultScale (1e8) is the integer k * 390625, so
// quantization is exact; the sum of any number of such values stays below 20
// in magnitude (inside int32 at scale 1e8) and is exactly representable as a
// float, and dequantization (a correctly rounded division) returns exactly
// (sum of k) / 256.
#ifndef ATP_EXAMPLES_COMMON_INPUTS_H_
#define ATP_EXAMPLES_COMMON_INPUTS_H_

#include <algorithm>
#include <cstdint>
#include <span>

namespace atp::examples {

// InputAmplitude: A for a job of `workers` workers (at least 1).
inline int32_t InputAmplitude(int workers) {
  return std::max<int32_t>(1, std::min<int32_t>(256, 5120 / std::max(workers, 1)));
}

// InputNumerator: k for (seed, job, rank, iteration, index), in [-A, A].
inline int32_t InputNumerator(uint64_t seed, uint32_t job, uint32_t rank, uint32_t iteration,
                              uint64_t index, int32_t amplitude) {
  // splitmix64 over the packed key.
  uint64_t z = seed * 0x9e3779b97f4a7c15ull ^ (uint64_t{job} << 56) ^ (uint64_t{rank} << 40) ^
               (uint64_t{iteration} << 20) ^ index * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  // The high 32 bits scaled to [0, span) by a multiply, not a 64-bit
  // division: the inputs of a 64 MiB tensor and its expected sum took longer
  // than the operation they check.
  const uint64_t span = 2 * static_cast<uint64_t>(amplitude) + 1;
  return static_cast<int32_t>(((z >> 32) * span) >> 32) - amplitude;
}

// FillInput: out[i] = InputNumerator(...) / 256 for this rank.
inline void FillInput(uint64_t seed, uint32_t job, uint32_t rank, uint32_t iteration, int workers,
                      std::span<float> out) {
  const int32_t a = InputAmplitude(workers);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(InputNumerator(seed, job, rank, iteration, i, a)) / 256.0f;
  }
}

// FillExpectedSum: out[i] = the exact sum over ranks 0..workers-1.
inline void FillExpectedSum(uint64_t seed, uint32_t job, uint32_t iteration, int workers,
                            std::span<float> out) {
  const int32_t a = InputAmplitude(workers);
  for (size_t i = 0; i < out.size(); ++i) {
    int32_t k = 0;
    for (int r = 0; r < workers; ++r) {
      k += InputNumerator(seed, job, static_cast<uint32_t>(r), iteration, i, a);
    }
    out[i] = static_cast<float>(k) / 256.0f;
  }
}

}  // namespace atp::examples

#endif  // ATP_EXAMPLES_COMMON_INPUTS_H_
