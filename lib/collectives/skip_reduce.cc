// lib/collectives/skip_reduce.cc: SkipPlan and SkipPolicy (atp/skip_reduce.h).
#include "atp/skip_reduce.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace atp {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool ValidRate(double rate) { return rate >= 0.0 && rate <= 1.0; }

}  // namespace

absl::Status SkipOptions::Validate(int ranks, std::string_view field) const {
  if (ranks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", ranks, " ranks (at least 1)"));
  }
  if (reduce_scatter_steps < 0 || reduce_scatter_steps > ranks - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".reduce_scatter_steps: ", reduce_scatter_steps, " is outside 0..",
                     ranks - 1, " (", ranks, " ranks)"));
  }
  if (all_gather_steps < 0 || all_gather_steps > ranks - 1) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".all_gather_steps: ", all_gather_steps,
                                                   " is outside 0..", ranks - 1, " (", ranks,
                                                   " ranks)"));
  }
  if (mode != SkipMode::kNone && mode != SkipMode::kStatic && mode != SkipMode::kRandom) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".mode: ",
                                                   static_cast<int>(mode), " is not a SkipMode"));
  }
  if (divisor != SkipDivisor::kAllRanks && divisor != SkipDivisor::kContributors) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(field), ".divisor: ", static_cast<int>(divisor), " is not a SkipDivisor"));
  }
  if (mode == SkipMode::kNone && (reduce_scatter_steps != 0 || all_gather_steps != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".mode: kNone with steps to skip (set kStatic or kRandom)"));
  }
  if (variant != SkipVariant::kWholeFragments && variant != SkipVariant::kContributions) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".variant: ",
                                                   static_cast<int>(variant), " is not a SkipVariant"));
  }
  return absl::OkStatus();
}

int SkipStepsForRate(double rate, int ranks) {
  if (ranks <= 1 || !(rate > 0.0)) return 0;
  const int k = static_cast<int>(std::lround(std::min(rate, 1.0) * ranks));
  return std::clamp(k, 0, ranks - 1);
}

ElementRange SliceRange(size_t count, int slices, int slice) {
  const size_t n = static_cast<size_t>(slices);
  const size_t s = static_cast<size_t>(slice);
  const size_t base = count / n;
  const size_t extra = count % n;
  return ElementRange{.begin = s * base + std::min(s, extra), .size = base + (s < extra ? 1 : 0)};
}

int SliceOf(size_t count, int slices, size_t index) {
  const size_t n = static_cast<size_t>(slices);
  const size_t base = count / n;
  const size_t extra = count % n;
  // The first `extra` slices hold base + 1 elements, the others base.
  const size_t long_part = extra * (base + 1);
  if (index < long_part) return static_cast<int>(index / (base + 1));
  return static_cast<int>(extra + (index - long_part) / base);
}

int RandomShift(uint64_t seed, uint64_t iteration, uint64_t tensor, int ranks) {
  const uint64_t h = SplitMix64(seed ^ SplitMix64(iteration ^ SplitMix64(tensor)));
  // 64-bit hash mod N: the bias is below N / 2^64.
  return static_cast<int>(h % static_cast<uint64_t>(ranks));
}

absl::StatusOr<SkipPlan> SkipPlan::Create(const SkipOptions& options, int ranks) {
  if (absl::Status status = options.Validate(ranks); !status.ok()) return status;
  SkipPlan plan;
  plan.ranks_ = ranks;
  plan.k_ = options.reduce_scatter_steps;
  plan.g_ = options.all_gather_steps;
  plan.divisor_ = options.divisor;
  plan.variant_ = options.variant;
  plan.shift_ = options.mode == SkipMode::kRandom
                    ? RandomShift(options.seed, options.iteration, options.tensor, ranks)
                    : 0;
  return plan;
}

bool SkipPlan::ContributionIncluded(int slice, int contributor) const {
  // Slice j's chain starts at rank j + k - shift (its first reduce-scatter
  // step that runs) and ends at its owner j - 1 - shift: distance d from
  // rank j - shift, included when d >= k.
  return Mod(contributor - slice + shift_) >= k_;
}

bool SkipPlan::SliceArrives(int slice, int rank) const {
  if (rank == OwnerOf(slice)) return true;
  return AllGatherStepRuns(Mod(rank + shift_ - slice));
}

double SkipPlan::TheoreticalSpeedup() const {
  if (steps_total() == 0) return 1.0;
  return static_cast<double>(steps_total()) / static_cast<double>(steps_run());
}

absl::Status SkipPolicy::Validate(std::string_view field) const {
  if (!ValidRate(rate)) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".rate: ", rate, " is outside 0..1"));
  }
  if (!ValidRate(all_gather_rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".all_gather_rate: ", all_gather_rate, " is outside 0..1"));
  }
  for (const auto& [tensor, tensor_rate] : tensor_rates) {
    if (!ValidRate(tensor_rate)) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".tensor_rates[", tensor,
                                                     "]: ", tensor_rate, " is outside 0..1"));
    }
  }
  if (mode == SkipMode::kNone && (rate > 0.0 || all_gather_rate > 0.0 || !tensor_rates.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".mode: kNone with rates set (set kStatic or kRandom)"));
  }
  if (variant != SkipVariant::kWholeFragments && variant != SkipVariant::kContributions) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".variant: ",
                                                   static_cast<int>(variant), " is not a SkipVariant"));
  }
  return absl::OkStatus();
}

SkipOptions SkipPolicy::ForTensor(uint64_t tensor, uint64_t iteration, int ranks) const {
  SkipOptions none;
  none.iteration = iteration;
  none.tensor = tensor;
  none.variant = variant;
  if (mode == SkipMode::kNone || iteration < warmup_iterations || ranks <= 1) return none;
  if (std::find(protected_tensors.begin(), protected_tensors.end(), tensor) !=
      protected_tensors.end()) {
    return none;
  }
  double tensor_rate = rate;
  for (const auto& [t, r] : tensor_rates) {
    if (t == tensor) tensor_rate = r;
  }
  SkipOptions options = none;
  options.reduce_scatter_steps = SkipStepsForRate(tensor_rate, ranks);
  options.all_gather_steps = std::clamp(
      static_cast<int>(std::lround(all_gather_rate * (ranks - 1))), 0, ranks - 1);
  if (options.reduce_scatter_steps == 0 && options.all_gather_steps == 0) return none;
  options.mode = mode;
  options.divisor = divisor;
  options.seed = seed;
  return options;
}

}  // namespace atp
