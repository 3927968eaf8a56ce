// sim/workload.h: the tensors a simulated job reduces, and the exact
// answer they must produce, computed independently of the network.
//
// Worker w of a job fills its input for iteration i from a Random seeded with
// (seed, job, w, i): any party can regenerate any input. ExpectedResult
// accumulates the workers' inputs (in any order) and computes the result
// ATP-SPEC section 8 demands, fragment by fragment (62 values, as the engines
// cut them):
//  - integer path: Dequantize(exact int64 sum of every worker's Quantize(x)),
//    when that sum fits int32 and no worker's fragment needed float;
//  - float path: float32(double sum of the inputs in worker order), when a
//    worker's fragment needed float (NaN, infinity, saturation) or the sum
//    leaves int32;
//  - either, when the sum fits but a partial sum (a switch adds in any order)
//    could saturate: the protocol may take either path.
//
//   ExpectedResult expected(config, workers);
//   for (int w = 0; w < workers; ++w) expected.Add(w, input_of[w]);
//   expected.Finish();
//   if (!expected.Check(output, &why)) ...
#ifndef ATP_SIM_WORKLOAD_H_
#define ATP_SIM_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "atp/quantize.h"
#include "atp/time.h"

namespace atp::sim {

struct WorkloadConfig {
  // values: float32 values per tensor (per worker, per iteration).
  size_t values = 65536;
  int iterations = 1;
  // amplitude: inputs are uniform in [-amplitude, amplitude); 0 picks
  // 8 / workers, so sums stay far inside the int32 range at scale 1e8.
  double amplitude = 0.0;
  // overflow_every: if k > 0, every k-th fragment holds large positive values
  // whose sum over two or more workers saturates int32 (the float path).
  uint32_t overflow_every = 0;
  uint64_t seed = 1;
  double scale = kDefaultScale;
  // start_jitter: each worker starts each iteration after a random delay in
  // [0, start_jitter) (its compute time varies), so workers are not in
  // lockstep and an aggregator stays claimed while it waits for stragglers,
  // as in a real job. Zero: every worker starts at once.
  TimeDelta start_jitter;
};

// FillInput: worker `worker` (index in worker order) of a job of `workers`
// workers, iteration `iteration`: out[i] for i < out.size().
void FillInput(const WorkloadConfig& config, uint8_t job, int worker, int workers, int iteration,
               std::span<float> out);

// ExpectedResult: the correct output of one iteration of one job.
class ExpectedResult {
 public:
  enum class Path : uint8_t { kInteger, kFloat, kEither };

  // Allocates for `workers` inputs of config.values values.
  ExpectedResult(const WorkloadConfig& config, int workers);

  // Compute: generates every worker's input of `iteration` and finishes.
  static ExpectedResult Compute(const WorkloadConfig& config, uint8_t job, int workers,
                                int iteration);

  // Reset: ready for another iteration's inputs (keeps the memory).
  void Reset();
  // Add: worker `worker`'s input (config.values values); each worker once, in
  // any order.
  void Add(int worker, std::span<const float> input);
  // Finish: after every worker's Add; computes the results.
  void Finish();
  int added() const { return added_; }

  // Check: whether `output` is exactly right (bit for bit, per fragment path).
  // On failure, `why` (if not null) says where.
  bool Check(std::span<const float> output, std::string* why) const;

  size_t fragments(Path path) const;

 private:
  WorkloadConfig config_;
  int workers_;
  size_t fragments_;
  // special_[f]: fragment f may leave the integer path, so it keeps every
  // worker's row for the ordered float sum.
  std::vector<uint8_t> special_;
  std::vector<uint32_t> special_index_;  // fragment -> row index among specials
  size_t special_count_ = 0;
  std::vector<int64_t> sum_;
  std::vector<int64_t> positive_;  // specials only: sum of positive contributions
  std::vector<int64_t> negative_;
  std::vector<uint8_t> needs_float_;
  std::vector<float> special_rows_;  // [worker][special row][62]
  std::vector<int32_t> quantized_;   // scratch
  int added_ = 0;

  std::vector<float> integer_result_;  // Dequantize(int sum)
  std::vector<float> float_result_;    // float(double sum), specials only (else empty)
  std::vector<Path> paths_;            // per fragment
};

}  // namespace atp::sim

#endif  // ATP_SIM_WORKLOAD_H_
