// lib/scheduler/fragment_scheduler.h: the per-worker centralized scheduler:
// cuts each aggregating operation into pieces (ranges of whole fragments) and
// gives each piece to an I/O thread (queue) by load (ARCHITECTURE.md,
// "Runtime"; ATP-SPEC section 3).
//
//   ATP_ASSIGN_OR_RETURN(FragmentScheduler s, FragmentScheduler::Create(4, {}));
//   std::vector<Piece> pieces;
//   s.Assign(/*values=*/1 << 20, pieces);   // pieces[i]: queue, first value, values
//
// Determinism: the assignment is a pure function of the sequence of operation
// sizes given to Assign (and of the queue count and options). Every worker of
// a job issues the same operations in the same order, so every worker cuts
// them the same way and puts the same fragments on the same queues, in the
// same order on each queue: fragment k of a queue's stream is the same
// gradient fragment on every worker, so (job, seq) names it everywhere and
// its parameter packet arrives on the queue that sent it.
//
// Load: the fragments assigned to a queue so far (a count over the whole
// history, which every worker computes identically, unlike anything measured
// at run time). An operation of F fragments is cut into
//   n = max(ceil(F / max_piece), min(queues, floor(F / min_piece)))
// pieces (at least one), piece i covering fragments [F*i/n, F*(i+1)/n); each
// piece in turn goes to the queue with the least load (the lowest index among
// equals). So one huge operation spreads over every queue, small ones go
// whole to whichever queue is behind, and the most and least loaded queues
// never differ by more than one piece (max_piece fragments).
//
// Not thread-safe; the Worker calls it under its submission lock.
#ifndef ATP_LIB_SCHEDULER_FRAGMENT_SCHEDULER_H_
#define ATP_LIB_SCHEDULER_FRAGMENT_SCHEDULER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace atp::scheduler {

// Piece: values [first_value, first_value + values) of an operation, on
// `queue`. first_value is a multiple of 62 (whole fragments).
struct Piece {
  uint32_t queue = 0;
  size_t first_value = 0;
  size_t values = 0;
  uint64_t fragments = 0;

  friend bool operator==(const Piece&, const Piece&) = default;
};

struct FragmentSchedulerConfig {
  uint32_t queues = 1;                // 1..16
  uint32_t min_piece_fragments = 64;  // >= 1
  uint32_t max_piece_fragments = 1024;  // >= min_piece_fragments

  // Validate: the message names the field ("FragmentSchedulerConfig.queues: ...").
  absl::Status Validate() const;
};

class FragmentScheduler {
 public:
  static absl::StatusOr<FragmentScheduler> Create(const FragmentSchedulerConfig& config);

  // Assign: appends the pieces of an operation of `values` floats to `out`
  // (none for 0 values), in increasing first_value order, and adds them to
  // the loads. Returns how many pieces it appended.
  size_t Assign(size_t values, std::vector<Piece>& out);

  // loads: fragments assigned to each queue so far.
  std::span<const uint64_t> loads() const { return loads_; }
  const FragmentSchedulerConfig& config() const { return config_; }

 private:
  explicit FragmentScheduler(const FragmentSchedulerConfig& config);

  uint32_t LeastLoadedQueue() const;

  FragmentSchedulerConfig config_;
  std::vector<uint64_t> loads_;
};

}  // namespace atp::scheduler

#endif  // ATP_LIB_SCHEDULER_FRAGMENT_SCHEDULER_H_
