// lib/ps/job_layout.h: a job's shape precomputed for the PS datapath, and the
// parsing of a gradient header into the workers it speaks for (ATP-SPEC
// section 6, first rule).
//
//   JobLayout layout(shape);  // shape.Validate() must be ok
//   Contributors who;
//   if (layout.Parse(header, &who) != ParseOutcome::kOk) { drop and count; }
#ifndef ATP_LIB_PS_JOB_LAYOUT_H_
#define ATP_LIB_PS_JOB_LAYOUT_H_

#include <array>
#include <cstdint>

#include "atp/wire.h"
#include "lib/protocol/job_shape.h"

namespace atp::ps {

// Contributors: the workers one gradient packet carries the sum of.
struct Contributors {
  enum class Level : uint8_t {
    kRackWorkers,  // edge 0: workers `workers` of rack `rack`
    kWholeRacks,   // edge 1: every worker of each rack in `racks`
  };
  Level level = Level::kRackWorkers;
  int rack = 0;          // kRackWorkers only
  uint32_t workers = 0;  // kRackWorkers only: bit i = worker i of `rack`
  uint32_t racks = 0;    // kWholeRacks only: bit r = rack r
};

enum class ParseOutcome : uint8_t {
  kOk,
  kMalformed,      // breaks a wire rule (no contributor, ambiguous rack, fp not
                   // from exactly one worker)
  kShapeMismatch,  // well formed, but fan-ins or bitmaps disagree with the job
};

class JobLayout {
 public:
  // JobLayout: `shape` must be valid (JobShape::Validate() ok).
  explicit JobLayout(const protocol::JobShape& shape);

  uint8_t job() const { return job_; }
  int racks() const { return racks_; }
  int total_workers() const { return total_workers_; }
  int max_rack_workers() const { return max_rack_workers_; }
  // AllRacks: bit r for every rack r of the job.
  uint32_t all_racks() const { return all_racks_; }
  // RackBitmap: bit i for every worker i of `rack` (0 <= rack < racks()).
  uint32_t rack_bitmap(int rack) const { return rack_bitmap_[static_cast<size_t>(rack)]; }
  // WorkerIndex: the worker's place in worker order (rack-major, then worker
  // index in the rack), 0..total_workers()-1.
  int worker_index(int rack, int worker) const {
    return rack_offset_[static_cast<size_t>(rack)] + worker;
  }

  // Parse: who a gradient header of this job contributes. Level 1 (edge 0): the
  // workers bitmap0 of the one rack named by bitmap1; level 2 (edge 1): the
  // complete racks of bitmap1. The header's fanIn1 must equal racks() and, at
  // level 1, fanIn0 the rack's worker count. An fp packet must be level 1 with
  // one worker (switches never aggregate fp). Does not look at job or ack.
  ParseOutcome Parse(const wire::AtpHeader& header, Contributors* out) const;

 private:
  uint8_t job_ = 0;
  int racks_ = 0;
  int total_workers_ = 0;
  int max_rack_workers_ = 0;
  uint32_t all_racks_ = 0;
  std::array<uint32_t, wire::kMaxFanIn> rack_bitmap_{};
  std::array<int, wire::kMaxFanIn> rack_offset_{};
  std::array<uint8_t, wire::kMaxFanIn> rack_workers_{};
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_JOB_LAYOUT_H_
