// atp/skip_reduce.h: SkipReduce's plan: which slices, steps and ranks'
// contributions an allreduce skips, as a pure, deterministic function of the
// options (seed, iteration, tensor, mode, steps) and the number of ranks.
//
// SkipReduce (the seed's section 4) speeds an allreduce up by not running
// some of its steps: on a ring of N ranks, skipping k of the N-1
// reduce-scatter steps leaves k of the N contributions out of every slice
// (they count as zero) and saves k / 2(N-1) of the steps. Nothing here does
// I/O: the ring over gloo (atp/collectives.h), the simulator's collectives
// and, later, ATP's Worker::PushPull and the PyTorch hook all ask the same
// SkipPlan, so every rank (and a PS) computes the same skipped set without
// talking.
//
//   atp::SkipPolicy policy;                 // job-wide, e.g. from a config
//   policy.mode = atp::SkipMode::kRandom;
//   policy.rate = 0.25;                     // a quarter of the contributions
//   policy.protected_tensors = {0};         // bucket 0 is never skipped
//   atp::SkipOptions skip = policy.ForTensor(/*tensor=*/3, iteration, ranks);
//   ATP_ASSIGN_OR_RETURN(atp::SkipPlan plan, atp::SkipPlan::Create(skip, ranks));
//   bool in = plan.ContributionIncluded(/*slice=*/2, /*contributor=*/5);
//
// Ring schedule (slices are numbered 0..N-1, SliceRange says where they are):
// in reduce-scatter step s (0..N-2) rank r sends slice (r - s + shift) mod N
// to rank r+1 and reduces slice (r - s - 1 + shift) mod N with what it gets
// from rank r-1; after the last step rank r holds slice (r + 1 + shift) mod N
// fully reduced (its "owned" slice). In all-gather step t (0..N-2) rank r
// sends slice (r + 1 + shift - t) and receives slice (r + shift - t).
// SkipReduce runs reduce-scatter steps k..N-2 only, so slice j holds the
// contributions of ranks j+k-shift .. j-1-shift (mod N): N-k of them.
// Skipping g all-gather steps drops the last g: each rank then lacks g slices
// (zero on that rank), and ranks no longer hold the same result.
#ifndef ATP_SKIP_REDUCE_H_
#define ATP_SKIP_REDUCE_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace atp {

// SkipMode: how the skipped slices are chosen.
enum class SkipMode : uint8_t {
  kNone,    // a plain allreduce
  kStatic,  // the same slices every iteration (shift 0): biased, cheapest
  kRandom,  // slice indices shifted by a number drawn from (seed, iteration, tensor)
};

// SkipDivisor: what an average divides by when contributions are skipped.
enum class SkipDivisor : uint8_t {
  kAllRanks,      // SkipReduce: a skipped contribution counts as zero; divide by N
  kContributors,  // DropReduce: a skipped contribution is removed; divide by N - k
};

// SkipVariant: what ATP's PushPull leaves out (docs/skipreduce.md, "Which
// variants ATP can speed up"). The ring always skips contributions; it
// ignores this field.
enum class SkipVariant : uint8_t {
  // kWholeFragments: every worker leaves out the same k/N of the fragments
  // (SliceDropped): nothing sent either way, those fragments zero.
  kWholeFragments,
  // kContributions: every fragment is aggregated, but each worker leaves its
  // contribution out of k/N of them (ContributionIncluded, as the ring):
  // fewer gradients upstream, every parameter packet still comes down. The
  // PS must accept declared fan-ins for the job
  // (ParameterServerJobOptions::contribution_skipping).
  kContributions,
};

// SkipOptions: the skipping of one collective (one tensor, one iteration).
// Every rank of the collective must pass the same values.
struct SkipOptions {
  SkipMode mode = SkipMode::kNone;
  // reduce_scatter_steps: k, the reduce-scatter steps skipped, 0..N-1. Each
  // slice then lacks k of the N contributions.
  int reduce_scatter_steps = 0;
  // all_gather_steps: g, the last all-gather steps skipped, 0..N-1. Each rank
  // then lacks g reduced slices (zero there): costlier than skipping
  // reduce-scatter steps (a skipped slice carries every rank's contribution)
  // and the ranks' results differ (the seed, section 5.2).
  int all_gather_steps = 0;
  SkipDivisor divisor = SkipDivisor::kAllRanks;
  // seed, iteration, tensor: random mode's shift is a hash of the three, so
  // it changes from iteration to iteration and from bucket to bucket.
  uint64_t seed = 0;
  uint64_t iteration = 0;
  uint64_t tensor = 0;
  // variant: ATP only: whole fragments or single contributions (see SkipVariant).
  SkipVariant variant = SkipVariant::kWholeFragments;

  // Validate: steps within 0..ranks-1, none with kNone, ranks >= 1, a known variant.
  // `field` prefixes the message.
  absl::Status Validate(int ranks, std::string_view field = "SkipOptions") const;
};

// SkipStepsForRate: k for skipping `rate` (0..1) of the contributions on
// `ranks` ranks: round(rate * ranks), at most ranks - 1.
int SkipStepsForRate(double rate, int ranks);

// SliceRange: where slice `slice` of `count` elements cut in `slices` nearly
// equal slices lies: the first count % slices slices have one element more.
struct ElementRange {
  size_t begin = 0;
  size_t size = 0;
};
ElementRange SliceRange(size_t count, int slices, int slice);
// SliceOf: the slice (of SliceRange's cut) that holds element `index` < count.
int SliceOf(size_t count, int slices, size_t index);

// SkipPlan: the skipped steps, slices and contributions of one collective.
// Cheap to copy; every query is O(1).
class SkipPlan {
 public:
  static absl::StatusOr<SkipPlan> Create(const SkipOptions& options, int ranks);

  int ranks() const { return ranks_; }
  // shift: the offset added to every slice index (0 unless random).
  int shift() const { return shift_; }
  int skipped_reduce_scatter_steps() const { return k_; }
  int skipped_all_gather_steps() const { return g_; }
  SkipDivisor divisor() const { return divisor_; }
  SkipVariant variant() const { return variant_; }

  // --- the ring schedule -------------------------------------------------
  bool ReduceScatterStepRuns(int step) const { return step >= k_; }
  bool AllGatherStepRuns(int step) const { return step < ranks_ - 1 - g_; }
  int ReduceScatterSendSlice(int rank, int step) const { return Mod(rank - step + shift_); }
  int ReduceScatterRecvSlice(int rank, int step) const { return Mod(rank - step - 1 + shift_); }
  int AllGatherSendSlice(int rank, int step) const { return Mod(rank + 1 + shift_ - step); }
  int AllGatherRecvSlice(int rank, int step) const { return Mod(rank + shift_ - step); }
  // OwnedSlice: the slice rank `rank` holds fully reduced after reduce-scatter.
  int OwnedSlice(int rank) const { return Mod(rank + 1 + shift_); }
  // OwnerOf: the rank that owns `slice`.
  int OwnerOf(int slice) const { return Mod(slice - 1 - shift_); }
  // steps_run / steps_total: steps of the ring that run, of 2(N-1).
  int steps_run() const { return 2 * (ranks_ - 1) - k_ - g_; }
  int steps_total() const { return 2 * (ranks_ - 1); }

  // --- what the result holds ----------------------------------------------
  // ContributionIncluded: whether rank `contributor`'s values are summed into
  // slice `slice` (before all-gather).
  bool ContributionIncluded(int slice, int contributor) const;
  // Contributors: how many ranks' values each slice sums (N - k).
  int Contributors() const { return ranks_ - k_; }
  // SliceArrives: whether rank `rank` ends up with slice `slice` reduced
  // (false: the all-gather step carrying it was skipped; it is zero there).
  bool SliceArrives(int slice, int rank) const;
  // AverageDivisor: what an average divides each slice's sum by.
  int AverageDivisor() const {
    return divisor_ == SkipDivisor::kContributors ? Contributors() : ranks_;
  }
  // SliceDropped: the whole-slice variant, for aggregation paths without a
  // ring (ATP's fragments, docs/skipreduce.md): every rank leaves out the
  // same k of the N slices, (shift + i) mod N for i < k, so nothing is sent
  // for them at all and they are zero everywhere. The same k/N of the
  // gradient as ContributionIncluded skips, but whole slices.
  bool SliceDropped(int slice) const { return Mod(slice - shift_) < k_; }
  // SkippedFraction: contributions left out of the result, k / N.
  double SkippedFraction() const { return static_cast<double>(k_) / ranks_; }
  // TheoreticalSpeedup: 2(N-1) / (2(N-1) - k - g), for a ring whose steps
  // all take the same time (1 for a single rank).
  double TheoreticalSpeedup() const;

 private:
  SkipPlan() = default;
  int Mod(int value) const { return ((value % ranks_) + ranks_) % ranks_; }

  int ranks_ = 1;
  int shift_ = 0;
  int k_ = 0;
  int g_ = 0;
  SkipDivisor divisor_ = SkipDivisor::kAllRanks;
  SkipVariant variant_ = SkipVariant::kWholeFragments;
};

// RandomShift: random mode's shift, uniform on 0..ranks-1, from
// (seed, iteration, tensor): a SplitMix64 chain, so every rank and host
// computes the same number with no communication. ranks >= 1.
int RandomShift(uint64_t seed, uint64_t iteration, uint64_t tensor, int ranks);

// SkipPolicy: a job's SkipReduce setting over all its tensors (buckets) and
// iterations; ForTensor turns it into the SkipOptions of one collective.
// Selective SkipReduce (the seed's section 4.4) is a policy with protected
// tensors and/or per-tensor rates.
struct SkipPolicy {
  SkipMode mode = SkipMode::kNone;
  // rate: fraction of the contributions skipped in an unprotected tensor
  // (k = SkipStepsForRate(rate, N)), 0..1.
  double rate = 0.0;
  // all_gather_rate: fraction of the all-gather steps skipped (g =
  // round(all_gather_rate * (N-1))), 0..1. Usually 0.
  double all_gather_rate = 0.0;
  SkipDivisor divisor = SkipDivisor::kAllRanks;
  uint64_t seed = 0;
  // warmup_iterations: iterations 0..warmup_iterations-1 skip nothing.
  uint64_t warmup_iterations = 0;
  // protected_tensors: tensor (bucket) indices never skipped.
  std::vector<uint64_t> protected_tensors;
  // tensor_rates: (tensor, rate) pairs that replace `rate` for one tensor.
  std::vector<std::pair<uint64_t, double>> tensor_rates;
  // variant: ATP only (SkipOptions::variant), copied into every tensor's options.
  SkipVariant variant = SkipVariant::kWholeFragments;

  absl::Status Validate(std::string_view field = "SkipPolicy") const;
  // ForTensor: the options of the collective on `tensor` in `iteration` over
  // `ranks` ranks (mode kNone when protected, in warm-up or at rate 0).
  SkipOptions ForTensor(uint64_t tensor, uint64_t iteration, int ranks) const;
};

}  // namespace atp

#endif  // ATP_SKIP_REDUCE_H_
