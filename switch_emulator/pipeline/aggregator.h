// switch_emulator/pipeline/aggregator.h: the switch's aggregator array
// (ATP-SPEC section 4, "State").
//
// One aggregator is {value[62] int32 saturating, bitmap, counter, job, seq,
// level, timestamp, ecn}. The array keeps it as two parallel arrays, on purpose:
//
//   AggregatorState  32 bytes, two per cache line: everything a packet checks
//                    before it touches data (owner, bitmap, counter), and all
//                    the orphan scan ever reads. Dense, so the scan streams.
//   AggregatorValues 256 bytes, exactly four cache lines, 64-byte aligned: the
//                    62 values in host byte order plus 2 zero lanes, so vector
//                    code works on whole 32- or 64-byte rows with no tail
//                    straddling a line.
//
// A packet that aggregates touches 1 state line and 4 value lines; the orphan
// scan touches only state lines. Holding both in one 320-byte struct would cost
// the scan one line per aggregator and every packet a fifth value line.
//
//   AggregatorArray array(4096);
//   AggregatorState& s = array.state(i);
//   if (s.is_free()) { ... array.values(i).lanes ... }
#ifndef ATP_SWITCH_EMULATOR_PIPELINE_AGGREGATOR_H_
#define ATP_SWITCH_EMULATOR_PIPELINE_AGGREGATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "atp/time.h"
#include "atp/wire.h"

namespace atp::switch_emulator {

// Lanes of an AggregatorValues row: the 62 payload values, then 2 padding lanes
// that stay zero.
inline constexpr size_t kAggregatorLanes = 64;
static_assert(kAggregatorLanes >= wire::kValuesPerFragment);
static_assert(kAggregatorLanes * sizeof(int32_t) == 256);

// AggregationLevel: which bitmap and fan-in a packet aggregates with
// (ATP-SPEC section 2, `edge`).
enum class AggregationLevel : uint8_t {
  kLevel1 = 1,  // edge 0: a rack's workers, bitmap0 / fanIn0
  kLevel2 = 2,  // edge 1: the racks of a job, bitmap1 / fanIn1
};

// OwnerKey: (job, seq) packed as job << 24 | seq. Job 0 is never valid on the
// wire, so key 0 means "free".
constexpr uint32_t OwnerKey(uint8_t job, uint32_t seq) {
  return (static_cast<uint32_t>(job) << wire::kSeqBits) | (seq & wire::kSeqMask);
}

// AggregatorState: the control half of one aggregator.
//
// An aggregator belongs to one aggregation: (job, seq) as ATP-SPEC section 4
// says, and also the level, the fan-in and, at level 1, the rack. One switch
// may be level 1 and level 2 of a job at once; and contributions that disagree
// on fan-in or rack must never be summed (their bitmaps would not mean the
// same workers). A packet of the same (job, seq) that differs in any of these
// is a stranger (rule 5) and goes to the PS, which aggregates anything.
struct alignas(32) AggregatorState {
  // Identity: who may add to it. owner and rack share one 8-byte word, fan_in
  // and level the next 2 bytes, so Owns is two compares.
  uint32_t owner = 0;  // OwnerKey(job, seq); 0 = free
  uint32_t rack = 0;   // level 1: the contributions' bitmap1 (one rack bit); level 2: 0
  uint8_t fan_in = 0;  // contributors that complete it (1..32)
  AggregationLevel level = AggregationLevel::kLevel1;
  // Progress.
  uint8_t counter = 0;  // popcount(bitmap)
  bool ecn = false;     // OR of the contributions' ecn flags
  uint32_t bitmap = 0;  // contributors so far, at `level` (bitmap0 or bitmap1 bits)
  TimePoint timestamp;  // last time a packet added to (or claimed) it

  bool is_free() const { return owner == 0; }
  uint8_t job() const { return static_cast<uint8_t>(owner >> wire::kSeqBits); }
  uint32_t seq() const { return owner & wire::kSeqMask; }
  // Owns: whether this aggregator holds exactly that aggregation.
  bool Owns(uint32_t key, AggregationLevel at, uint8_t fan, uint32_t rack_bits) const {
    return ((owner ^ key) | (rack ^ rack_bits)) == 0 && fan_in == fan && level == at;
  }

  friend bool operator==(const AggregatorState&, const AggregatorState&) = default;
};
static_assert(sizeof(AggregatorState) == 32, "two states per cache line");

// AggregatorValues: the data half of one aggregator: value[i] is the running
// saturating int32 sum of payload value i, host byte order, meaningful while
// the aggregator is busy (a claim overwrites it; a completion may leave it
// as it was before the last add). Lanes 62 and 63 are padding and stay zero.
struct alignas(64) AggregatorValues {
  int32_t lanes[kAggregatorLanes] = {};
};
static_assert(sizeof(AggregatorValues) == 256, "exactly four cache lines");

// AggregatorArray: `size` aggregators, all free at construction. Allocates once,
// at construction; never afterwards. Not thread-safe. Movable, not copyable.
//
// Each of the two parallel arrays is 64-byte aligned; one of 1 MiB or more is
// 2 MiB aligned and, on Linux, advised for transparent huge pages
// (madvise(MADV_HUGEPAGE), a hint the kernel may ignore): packets touch the
// aggregators at random, and with 4 KiB pages an array of hundreds of
// megabytes would cost a TLB miss per array per packet.
class AggregatorArray {
 public:
  explicit AggregatorArray(size_t size);

  size_t size() const { return size_; }
  AggregatorState& state(size_t i) { return states_.get()[i]; }
  const AggregatorState& state(size_t i) const { return states_.get()[i]; }
  AggregatorValues& values(size_t i) { return values_.get()[i]; }
  const AggregatorValues& values(size_t i) const { return values_.get()[i]; }

  // FreeAll: every aggregator free (values are left as they are: a claim
  // overwrites them).
  void FreeAll();

 private:
  // Both element types are trivially destructible: freeing the memory is all.
  struct Free {
    void operator()(void* p) const;
  };
  size_t size_ = 0;
  std::unique_ptr<AggregatorState, Free> states_;
  std::unique_ptr<AggregatorValues, Free> values_;
};
static_assert(std::is_trivially_destructible_v<AggregatorState> &&
              std::is_trivially_destructible_v<AggregatorValues>);

}  // namespace atp::switch_emulator

#endif  // ATP_SWITCH_EMULATOR_PIPELINE_AGGREGATOR_H_
