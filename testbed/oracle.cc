#include "testbed/oracle.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "atp/quantize.h"
#include "atp/wire.h"

namespace atp::testbed {

std::vector<float> ExpectedAggregate(std::span<const std::span<const float>> inputs, double scale,
                                     Reduction reduction) {
  const size_t n = inputs.empty() ? 0 : inputs[0].size();
  std::vector<float> out(n);
  constexpr size_t kF = wire::kValuesPerFragment;
  int32_t q[kF];
  int64_t sum[kF];
  int32_t sum32[kF];
  for (size_t first = 0; first < n; first += kF) {
    const size_t len = std::min(kF, n - first);
    std::fill(sum, sum + kF, 0);
    bool needs_float = false;
    for (std::span<const float> in : inputs) {
      if (Quantize(in.subspan(first, len), scale, q) == QuantizeOutcome::kNeedsFloat) {
        needs_float = true;
      }
      for (size_t i = 0; i < len; ++i) sum[i] += q[i];
    }
    for (size_t i = 0; i < len; ++i) {
      if (sum[i] >= std::numeric_limits<int32_t>::max() ||
          sum[i] <= std::numeric_limits<int32_t>::min()) {
        needs_float = true;
      }
      sum32[i] = static_cast<int32_t>(sum[i]);
    }
    if (needs_float) {
      for (size_t i = 0; i < len; ++i) {
        double d = 0;
        for (std::span<const float> in : inputs) d += static_cast<double>(in[first + i]);
        out[first + i] = static_cast<float>(d);
      }
    } else {
      Dequantize(std::span<const int32_t>(sum32, len), scale,
                 std::span<float>(out.data() + first, len));
    }
  }
  if (reduction == Reduction::kAverage) {
    const float workers = static_cast<float>(inputs.size());
    for (float& v : out) v /= workers;
  }
  return out;
}

bool BitIdentical(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace atp::testbed
