// lib/protocol/aggregator_index.h: which switch aggregator a fragment uses
// (ATP-SPEC section 3). Workers and the PS must compute the same indices, so
// both take them from here.
//
// A window slot's index starts as InitialAggregatorIndex(job, queue, slot) and
// is replaced by RehashAggregatorIndex when a parameter packet reports a
// collision. Indices are 16 bits; a switch uses them modulo its aggregator count.
#ifndef ATP_LIB_PROTOCOL_AGGREGATOR_INDEX_H_
#define ATP_LIB_PROTOCOL_AGGREGATOR_INDEX_H_

#include <cstdint>

namespace atp::protocol {

enum class IndexPolicy : uint8_t {
  kHashed,      // hash of (job, queue, slot): jobs spread over the whole array
  kSequential,  // queue * slots + slot, the same for every job: the bad case
};

uint16_t InitialAggregatorIndex(IndexPolicy policy, uint8_t job, uint32_t queue, uint32_t slot,
                                uint32_t slots);

// RehashAggregatorIndex: the PS's choice after a collision on (job, seq) at
// `old_index`: a fresh hash, never equal to old_index.
uint16_t RehashAggregatorIndex(uint8_t job, uint32_t seq, uint16_t old_index);

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_AGGREGATOR_INDEX_H_
