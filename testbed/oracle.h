// testbed/oracle.h: what every worker of a job must receive
// (ATP-SPEC section 8), computed independently of the protocol code, from
// atp::Quantize and plain arithmetic. For tests, examples and benchmarks
// that verify every result.
#ifndef ATP_TESTBED_ORACLE_H_
#define ATP_TESTBED_ORACLE_H_

#include <span>
#include <vector>

#include "atp/worker.h"

namespace atp::testbed {

// ExpectedAggregate: per fragment of 62 values, the dequantized exact int32
// sum of the workers' quantized inputs; or, when a worker's fragment needs
// float32 (NaN, infinity, saturation) or the sum leaves the open int32 range,
// the float32 rounding of the double sum in worker order. `inputs` are the
// workers' inputs in rank (rack-major) order, all of one size. With
// kAverage, each value is then divided by the worker count. (The float case
// assumes no partial sum saturated at a switch first: same-sign values.)
std::vector<float> ExpectedAggregate(std::span<const std::span<const float>> inputs, double scale,
                                     Reduction reduction = Reduction::kSum);

// BitIdentical: the same float bit patterns (NaN included).
bool BitIdentical(std::span<const float> a, std::span<const float> b);

}  // namespace atp::testbed

#endif  // ATP_TESTBED_ORACLE_H_
