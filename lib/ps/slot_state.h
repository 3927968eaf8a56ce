// lib/ps/slot_state.h: the PS's state for one window slot of one job and queue
// (ATP-SPEC section 6): the live generation being aggregated, and which
// generation completed last. The last completed parameter packet lives beside
// it, in a separate (cold) array of the job.
#ifndef ATP_LIB_PS_SLOT_STATE_H_
#define ATP_LIB_PS_SLOT_STATE_H_

#include <cstdint>

#include "lib/ps/coverage.h"
#include "lib/ps/fp_buffer_pool.h"
#include "lib/ps/sums.h"

namespace atp::ps {

// SlotMode: how the live generation is being aggregated.
enum class SlotMode : uint8_t {
  kIdle,     // nothing received for the live generation yet
  kInteger,  // int64 sums of int32 contributions
  kFloat,    // overflow path: one float32 row per worker in `fp_rows`
};

struct SlotState {
  // completed_position: the slot's last completed 20-bit position (initially
  // InitialCompletedPosition); the live generation is completed_position + slots.
  uint32_t completed_position = 0;
  // has_completed_packet: the job's stored packet for this slot is valid.
  bool has_completed_packet = false;

  // The live generation (reset when it completes).
  SlotMode mode = SlotMode::kIdle;
  bool ecn = false;              // OR of every contribution's ecn
  bool collision = false;        // some contribution reported a collision
  uint16_t aggregator = 0;       // the index the fragment used (first contribution's)
  Coverage coverage;             // kInteger: integer contributors; kFloat: fp rows present
  IntSums sums{};                // kInteger only
  FpBufferPool::Buffer fp_rows;  // kFloat only: 62 floats per worker, worker order
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_SLOT_STATE_H_
