// lib/protocol/job_shape.h: the shape of a job (racks and workers per rack),
// which every worker, the PS and the switches share as configuration
// (ATP-SPEC section 2, "A job's shape").
#ifndef ATP_LIB_PROTOCOL_JOB_SHAPE_H_
#define ATP_LIB_PROTOCOL_JOB_SHAPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace atp::protocol {

struct JobShape {
  uint8_t job = 0;                         // 1..255
  std::vector<uint8_t> workers_per_rack;   // one entry per rack (1..32 racks), each 1..32

  // Uniform: `racks` racks of `workers` workers each.
  static JobShape Uniform(uint8_t job, int racks, int workers);

  int racks() const { return static_cast<int>(workers_per_rack.size()); }
  int workers_in_rack(int rack) const { return workers_per_rack[static_cast<size_t>(rack)]; }
  int total_workers() const;
  // RackBitmap: bit i set for every worker i of `rack` (a complete level-1 bitmap0).
  uint32_t RackBitmap(int rack) const { return LowBits(workers_in_rack(rack)); }
  // AllRacksBitmap: bit r set for every rack (a complete level-2 bitmap1).
  uint32_t AllRacksBitmap() const { return LowBits(racks()); }

  // Validate: job 1..255, 1..32 racks of 1..32 workers; the message names the field.
  absl::Status Validate() const;

  static constexpr uint32_t LowBits(int n) {
    return n >= 32 ? 0xFFFFFFFFu : ((1u << n) - 1u);
  }
};

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_JOB_SHAPE_H_
