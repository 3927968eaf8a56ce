// lib/worker/keep_alive_runs.h: which workers send a position under
// SkipReduce's contribution variant once the liveness bound is applied
// (lib/protocol/skipped_generations.h): a worker the plan leaves out of a
// fragment still sends it, as a keep-alive contribution of zeros, when it
// left out the kMaxSkippedGenerations previous generations of the same window
// slot.
//
// Every worker of the job keeps the same table for every worker, fed with
// the same positions in the same order (positions are dense and identical on
// all workers), so all declare the same contributor set for a position
// without talking. One engine (one queue) owns one table; it is allocated
// with the first contribution-skipping operation: slots x workers bytes.
//
//   KeepAliveRuns runs(slots, workers);
//   runs.Next(position, [&](int w) { return plan.ContributionIncluded(slice, w); });
//   if (runs.sends(me)) { /* contribution, or zeros if the plan left me out */ }
//   runs.AllSend(position);  // a position of an operation without contribution skipping
#ifndef ATP_LIB_WORKER_KEEP_ALIVE_RUNS_H_
#define ATP_LIB_WORKER_KEEP_ALIVE_RUNS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/protocol/skipped_generations.h"

namespace atp::worker {

class KeepAliveRuns {
 public:
  KeepAliveRuns(uint32_t slots, int workers)
      : slot_mask_(slots - 1),
        workers_(static_cast<size_t>(workers)),
        left_out_(static_cast<size_t>(slots) * workers_, 0),
        sends_(workers_, 0) {}

  // Next: the next position (every position passes once, in order). `included`
  // (int worker -> bool, rack-major numbering) is the plan's contributor set;
  // afterwards sends(w) says whether worker w sends this position.
  template <typename Included>
  void Next(uint64_t position, const Included& included) {
    uint8_t* run = Row(position);
    for (size_t w = 0; w < workers_; ++w) {
      const bool sends =
          included(static_cast<int>(w)) || run[w] >= protocol::kMaxSkippedGenerations;
      sends_[w] = sends ? 1 : 0;
      run[w] = sends ? 0 : static_cast<uint8_t>(run[w] + 1);
    }
  }

  // AllSend: the next position belongs to an operation every worker sends.
  void AllSend(uint64_t position) {
    std::fill_n(Row(position), workers_, uint8_t{0});
    std::fill(sends_.begin(), sends_.end(), uint8_t{1});
  }

  bool sends(int worker) const { return sends_[static_cast<size_t>(worker)] != 0; }

 private:
  uint8_t* Row(uint64_t position) {
    return left_out_.data() + static_cast<size_t>(position & slot_mask_) * workers_;
  }

  uint64_t slot_mask_;
  size_t workers_;
  // left_out_[slot * workers + w]: consecutive generations of the slot, up to
  // the last position passed, that worker w left out.
  std::vector<uint8_t> left_out_;
  std::vector<uint8_t> sends_;  // of the last position passed
};

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_KEEP_ALIVE_RUNS_H_
