// lib/protocol/aggregator_index.h: which switch aggregator a fragment uses
// (ATP-SPEC section 3). Workers and the PS must compute the same indices, so
// both take them from here.
//
// A window slot's index starts as InitialAggregatorIndex(job, queue, slot) and
// is replaced by RehashAggregatorIndex when a parameter packet reports a
// collision. Indices are 16 bits; a switch uses them modulo its aggregator count.
//
// kHashed places a job's slots as one run of consecutive indices,
// queue * slots + slot, from a base hashed from the job. So a job never
// collides with itself at a switch that has an aggregator for each of its
// slots (queues x slots <= aggregators; any count, power of two or not: the
// run never wraps at 2^16, and consecutive integers are distinct modulo any
// count at least as long as the run), while jobs still land at spread-out
// places of the array. Hashing each slot on its own, as before, put two of
// a job's own slots on one aggregator by the birthday bound (8 pairs for 256
// slots in 4096 aggregators, 497 for 2048): each such pair sent a fragment
// to the PS on every pass while the other slot held the aggregator, split
// its aggregate between the switch and the PS, and cost a loss detection or
// a timeout to recover in a run with no loss at all.
#ifndef ATP_LIB_PROTOCOL_AGGREGATOR_INDEX_H_
#define ATP_LIB_PROTOCOL_AGGREGATOR_INDEX_H_

#include <cstdint>

namespace atp::protocol {

enum class IndexPolicy : uint8_t {
  kHashed,      // a run per job from a hash of the job: jobs spread over the whole array,
                // a job's own slots never share an aggregator (see above)
  kSequential,  // queue * slots + slot, the same for every job: the bad case
};

uint16_t InitialAggregatorIndex(IndexPolicy policy, uint8_t job, uint32_t queue, uint32_t slot,
                                uint32_t slots);

// RehashAggregatorIndex: the PS's choice after a collision on (job, seq) at
// `old_index`: a fresh hash, never equal to old_index.
uint16_t RehashAggregatorIndex(uint8_t job, uint32_t seq, uint16_t old_index);

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_AGGREGATOR_INDEX_H_
