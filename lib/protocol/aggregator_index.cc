#include "lib/protocol/aggregator_index.h"

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
  uint64_t key = (uint64_t{job} << 40) | (uint64_t{queue} << 32) | slot;
  return static_cast<uint16_t>(Mix64(key) >> 48);
}

uint16_t RehashAggregatorIndex(uint8_t job, uint32_t seq, uint16_t old_index) {
  uint64_t key = (uint64_t{1} << 63) | (uint64_t{job} << 48) | (uint64_t{seq} << 16) | old_index;
  auto index = static_cast<uint16_t>(Mix64(key) >> 48);
  return index == old_index ? static_cast<uint16_t>(index + 1) : index;
}

}  // namespace atp::protocol
