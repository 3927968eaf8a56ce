#include "sim/workload.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "atp/wire.h"
#include "sim/random.h"

namespace atp::sim {
namespace {

constexpr size_t kLanes = wire::kValuesPerFragment;
// kBlock: values per block of the loops written for the vectorizer.
constexpr size_t kBlock = 8;

bool SameBits(float a, float b) {
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

bool IsOverflowFragment(const WorkloadConfig& config, size_t fragment) {
  return config.overflow_every > 0 && fragment % config.overflow_every == config.overflow_every - 1;
}

double Amplitude(const WorkloadConfig& config, int workers) {
  return config.amplitude > 0 ? config.amplitude : 8.0 / std::max(workers, 1);
}

}  // namespace

void FillInput(const WorkloadConfig& config, uint8_t job, int worker, int workers, int iteration,
               std::span<float> out) {
  const float amplitude = static_cast<float>(Amplitude(config, workers));
  Random random(Random::DeriveSeed(config.seed, (uint64_t{job} << 48) ^
                                                    (static_cast<uint64_t>(worker) << 24) ^
                                                    static_cast<uint64_t>(iteration)));
  // Two values per 64 random bits: 24 bits each, exact in float, mapped to
  // [-1, 1) and scaled.
  constexpr float kUnit = 0x1.0p-23f;
  const size_t n = out.size();
  size_t i = 0;
  // Blocks of eight values (four Next()s), converted in a loop of fixed
  // length that the compiler vectorizes (at -O2 only such loops are): the
  // same values in the same order as the pairs below. 24 bits convert
  // exactly from int32 as from uint64.
  for (; i + kBlock <= n; i += kBlock) {
    uint32_t bits[kBlock];
    for (size_t k = 0; k < kBlock; k += 2) {
      const uint64_t x = random.Next();
      bits[k] = static_cast<uint32_t>(x);
      bits[k + 1] = static_cast<uint32_t>(x >> 32);
    }
    for (size_t k = 0; k < kBlock; ++k) {
      out[i + k] =
          (static_cast<float>(static_cast<int32_t>(bits[k] & 0xFFFFFF)) * kUnit - 1.0f) * amplitude;
    }
  }
  for (; i + 1 < n; i += 2) {
    const uint64_t x = random.Next();
    out[i] = (static_cast<float>(x & 0xFFFFFF) * kUnit - 1.0f) * amplitude;
    out[i + 1] = (static_cast<float>((x >> 32) & 0xFFFFFF) * kUnit - 1.0f) * amplitude;
  }
  if (i < n) out[i] = (static_cast<float>(random.Next() & 0xFFFFFF) * kUnit - 1.0f) * amplitude;
  if (config.overflow_every > 0) {
    for (size_t f = config.overflow_every - 1; f * kLanes < n; f += config.overflow_every) {
      for (size_t v = f * kLanes; v < std::min(n, (f + 1) * kLanes); ++v) {
        // 15 + [0, 1): one worker's value fits int32 at scale 1e8, two saturate it.
        out[v] = 15.0f + static_cast<float>(random.Next() & 0xFFFFFF) * 0x1.0p-24f;
      }
    }
  }
}

ExpectedResult::ExpectedResult(const WorkloadConfig& config, int workers)
    : config_(config),
      workers_(workers),
      fragments_((config.values + kLanes - 1) / kLanes),
      special_(fragments_, 0),
      special_index_(fragments_, 0) {
  // When |x| <= amplitude for every ordinary value and even the sum of every
  // worker's largest quantized value stays inside int32, an ordinary fragment
  // can only take the integer path and only its int sum matters. The others
  // ("special" fragments: all of them when the bound fails, the overflow
  // fragments otherwise) get the full treatment.
  const double bound = (Amplitude(config, workers) * config.scale + 1.0) * workers;
  const bool ordinary_is_integer = bound < 2147483000.0;
  for (size_t f = 0; f < fragments_; ++f) {
    special_[f] = !ordinary_is_integer || IsOverflowFragment(config, f);
    if (special_[f]) special_index_[f] = static_cast<uint32_t>(special_count_++);
  }
  const size_t n = config.values;
  sum_.resize(n);
  positive_.resize(special_count_ * kLanes);
  negative_.resize(special_count_ * kLanes);
  needs_float_.resize(fragments_);
  special_rows_.resize(static_cast<size_t>(workers) * special_count_ * kLanes);
  quantized_.resize(n);
  integer_result_.resize(n);
  if (special_count_ > 0) float_result_.resize(n);
  paths_.resize(fragments_);
  Reset();
}

ExpectedResult ExpectedResult::Compute(const WorkloadConfig& config, uint8_t job, int workers,
                                       int iteration) {
  ExpectedResult r(config, workers);
  std::vector<float> input(config.values);
  for (int w = 0; w < workers; ++w) {
    FillInput(config, job, w, workers, iteration, input);
    r.Add(w, input);
  }
  r.Finish();
  return r;
}

void ExpectedResult::Reset() {
  std::fill(sum_.begin(), sum_.end(), 0);
  std::fill(positive_.begin(), positive_.end(), 0);
  std::fill(negative_.begin(), negative_.end(), 0);
  std::fill(needs_float_.begin(), needs_float_.end(), 0);
  added_ = 0;
}

void ExpectedResult::Add(int worker, std::span<const float> input) {
  const size_t n = config_.values;
  Quantize(input.first(n), config_.scale, quantized_);
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {  // fixed-length blocks: vectorized
    for (size_t k = 0; k < kBlock; ++k) sum_[i + k] += quantized_[i + k];
  }
  for (; i < n; ++i) sum_[i] += quantized_[i];
  ++added_;
  if (special_count_ == 0) return;
  float* rows = special_rows_.data() + static_cast<size_t>(worker) * special_count_ * kLanes;
  for (size_t f = 0; f < fragments_; ++f) {
    if (!special_[f]) continue;
    const size_t first = f * kLanes;
    const size_t count = std::min(kLanes, n - first);
    const size_t row = special_index_[f] * kLanes;
    if (Quantize(input.subspan(first, count), config_.scale,
                 std::span<int32_t>(quantized_.data() + first, count)) ==
        QuantizeOutcome::kNeedsFloat) {
      needs_float_[f] = 1;
    }
    for (size_t v = 0; v < count; ++v) {
      const int32_t q = quantized_[first + v];
      (q > 0 ? positive_ : negative_)[row + v] += q;
      rows[row + v] = input[first + v];
    }
  }
}

void ExpectedResult::Finish() {
  const size_t n = config_.values;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
  for (size_t i = 0; i < n; ++i) {
    quantized_[i] = static_cast<int32_t>(std::clamp(sum_[i], kMin, kMax));
  }
  Dequantize(quantized_, config_.scale, integer_result_);
  std::fill(paths_.begin(), paths_.end(), Path::kInteger);
  const size_t stride = special_count_ * kLanes;
  for (size_t f = 0; f < fragments_; ++f) {
    if (!special_[f]) continue;
    const size_t first = f * kLanes;
    const size_t count = std::min(kLanes, n - first);
    const size_t row = special_index_[f] * kLanes;
    bool fits = true;          // the total is strictly inside int32
    bool partials_fit = true;  // no order of additions can reach the bounds
    for (size_t v = 0; v < count; ++v) {
      const size_t i = first + v;
      fits = fits && sum_[i] > kMin && sum_[i] < kMax;
      partials_fit = partials_fit && positive_[row + v] < kMax && negative_[row + v] > kMin;
      double total = 0.0;  // in worker order, as the PS sums
      for (int w = 0; w < workers_; ++w) {
        total += static_cast<double>(special_rows_[static_cast<size_t>(w) * stride + row + v]);
      }
      float_result_[i] = static_cast<float>(total);
    }
    if (needs_float_[f] || !fits) {
      paths_[f] = Path::kFloat;
    } else if (!partials_fit) {
      paths_[f] = Path::kEither;
    }
  }
}

bool ExpectedResult::Check(std::span<const float> output, std::string* why) const {
  if (output.size() != integer_result_.size()) {
    if (why) *why = absl::StrCat("size ", output.size(), " != ", integer_result_.size());
    return false;
  }
  if (float_result_.empty() &&
      std::memcmp(output.data(), integer_result_.data(), output.size() * sizeof(float)) == 0) {
    return true;  // the common case: every fragment on the integer path, all right
  }
  for (size_t i = 0; i < output.size(); ++i) {
    const Path path = paths_[i / kLanes];
    const bool int_ok = path != Path::kFloat && SameBits(output[i], integer_result_[i]);
    const bool float_ok = path != Path::kInteger && SameBits(output[i], float_result_[i]);
    if (!int_ok && !float_ok) {
      if (why) {
        *why = absl::StrCat("value ", i, " (fragment ", i / kLanes, "): got ", output[i],
                            ", expected ",
                            path == Path::kFloat ? float_result_[i] : integer_result_[i]);
      }
      return false;
    }
  }
  return true;
}

size_t ExpectedResult::fragments(Path path) const {
  return static_cast<size_t>(std::count(paths_.begin(), paths_.end(), path));
}

}  // namespace atp::sim
