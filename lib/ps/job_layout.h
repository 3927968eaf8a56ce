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
  // Declared fan-ins only (JobLayout::declared_fan_ins()): what covers the
  // rack (kRackWorkers: LowBits(fanIn0)) and the seq (LowBits(fanIn1)). The
  // racks are then numbered among the contributing racks, the workers among
  // their rack's contributors.
  uint32_t rack_target = 0;
  uint32_t racks_target = 0;
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
  // `declared_fan_ins`: the job skips contributions (SkipVariant::kContributions,
  // PsConfig::contribution_skipping_jobs): packets may declare any fan-ins up
  // to the shape's, and Parse fills Contributors' targets from them.
  explicit JobLayout(const protocol::JobShape& shape, bool declared_fan_ins = false);

  uint8_t job() const { return job_; }
  bool declared_fan_ins() const { return declared_fan_ins_; }
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

  // FloatRow: the float-path row of worker `worker` of rack `rack` (as Parse
  // numbers them): rack-major in worker order; with declared fan-ins a grid of
  // max_rack_workers() per (contributing) rack.
  int float_row(int rack, int worker) const {
    return declared_fan_ins_ ? rack * max_rack_workers_ + worker : worker_index(rack, worker);
  }
  // float_rows: the rows a float-path buffer needs.
  int float_rows() const { return declared_fan_ins_ ? racks_ * max_rack_workers_ : total_workers_; }

  // Parse: who a gradient header of this job contributes. Level 1 (edge 0): the
  // workers bitmap0 of the one rack named by bitmap1; level 2 (edge 1): the
  // complete racks of bitmap1. The header's fanIn1 must equal racks() and, at
  // level 1, fanIn0 the rack's worker count. An fp packet must be level 1 with
  // one worker (switches never aggregate fp). Does not look at job or ack.
  // With declared fan-ins: fanIn1 in 1..racks() with bitmap1 below it and, at
  // level 1, fanIn0 in 1..max_rack_workers() with bitmap0 below it.
  ParseOutcome Parse(const wire::AtpHeader& header, Contributors* out) const;

 private:
  ParseOutcome ParseDeclared(const wire::AtpHeader& header, Contributors* out) const;

  uint8_t job_ = 0;
  bool declared_fan_ins_ = false;
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
