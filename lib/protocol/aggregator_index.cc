#include "lib/protocol/aggregator_index.h"

#include "atp/wire.h"

namespace atp::protocol {
namespace {

// Mix64: the SplitMix64 finalizer, a cheap well-spread 64-bit mix.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint16_t InitialAggregatorIndex(IndexPolicy policy, uint8_t job, uint32_t queue, uint32_t slot,
                                uint32_t slots) {
  if (policy == IndexPolicy::kSequential) {
    return static_cast<uint16_t>(queue * slots + slot);
  }
  // The run holds every queue a job may have; its base is chosen so that it
  // ends at or below 2^16 (no wrap). A run longer than the index space (more
  // than 4096 slots on 16 queues) wraps, like any index, modulo 2^16.
  constexpr uint64_t kIndexSpace = uint64_t{1} << 16;
  const uint64_t run = uint64_t{wire::kMaxQueues} * slots;
  const uint64_t bases = run < kIndexSpace ? kIndexSpace - run + 1 : 1;
  const uint64_t base = Mix64(uint64_t{job} << 40) % bases;
  return static_cast<uint16_t>(base + uint64_t{queue} * slots + slot);
}

uint16_t RehashAggregatorIndex(uint8_t job, uint32_t seq, uint16_t old_index) {
  uint64_t key = (uint64_t{1} << 63) | (uint64_t{job} << 48) | (uint64_t{seq} << 16) | old_index;
  auto index = static_cast<uint16_t>(Mix64(key) >> 48);
  return index == old_index ? static_cast<uint16_t>(index + 1) : index;
}

}  // namespace atp::protocol
