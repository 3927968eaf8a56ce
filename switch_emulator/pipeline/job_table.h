// switch_emulator/pipeline/job_table.h: which jobs a switch aggregates, at
// which level, toward which multicast group, and which aggregators each job
// may use (ATP-SPEC sections 4 and 7).
//
//   JobConfig job{.job = 3, .levels = JobLevels::kBoth, .multicast_group = 30};
//   absl::StatusOr<JobTable> table = JobTable::Create({job}, PartitionMode::kDynamic, 4096);
//   const JobEntry* entry = table->Find(3);           // null: not aggregated here
//   const JobEntry& e = table->Entry(3);               // the datapath's branch-free form
//   size_t i = entry->AggregatorFor(header_index);   // index into the AggregatorArray
#ifndef ATP_SWITCH_EMULATOR_PIPELINE_JOB_TABLE_H_
#define ATP_SWITCH_EMULATOR_PIPELINE_JOB_TABLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "atp/wire.h"
#include "switch_emulator/pipeline/aggregator.h"

namespace atp::switch_emulator {

// JobLevels: where this switch sits on a job's aggregation path.
enum class JobLevels : uint8_t {
  kLevel1 = 1,  // ToR of one of the job's worker racks
  kLevel2 = 2,  // ToR of the PS's rack
  kBoth = 3,    // both at once: a level-1 completion is fed straight into level 2
};

// PartitionMode: how jobs share the aggregator array (ATP-SPEC section 7).
enum class PartitionMode : uint8_t {
  kDynamic,  // every job uses the whole array: aggregator = index % array size
  kStatic,   // each job only its slice: aggregator = first + index % count
};

// AggregatorSlice: [first, first + count) of the array. Only in kStatic mode.
struct AggregatorSlice {
  uint32_t first = 0;
  uint32_t count = 0;
};

// JobConfig: one job this switch aggregates.
struct JobConfig {
  uint8_t job = 0;  // 1..255, unique in the table
  JobLevels levels = JobLevels::kLevel1;
  // Handed back with Verdict::kMulticast; the binding maps it to ports.
  uint32_t multicast_group = 0;
  AggregatorSlice slice;  // kStatic: required (count >= 1); kDynamic: must stay empty
};

// JobEntry: a job as the datapath sees it. 32 bytes, so that the table
// indexes with a shift.
struct alignas(32) JobEntry {
  uint8_t levels = 0;  // bit 0: level 1, bit 1: level 2; 0 = not aggregated here
  uint32_t multicast_group = 0;
  uint32_t first = 0;  // the job's slice of the array
  uint32_t count = 0;
  uint64_t reciprocal = 0;  // ModuloOf's multiplier for `count`
  uint32_t mask = 0;        // count - 1 when count is a power of two > 1, else 0

  bool aggregated() const { return levels != 0; }
  bool AggregatesAt(AggregationLevel level) const {
    return (levels & static_cast<uint8_t>(level)) != 0;
  }
  // AggregatorFor: the array index of header aggregator index `index`:
  // first + index % count, without a division (a mask for a power of two).
  size_t AggregatorFor(uint16_t index) const;
};
static_assert(sizeof(JobEntry) == 32);

// The largest array a JobTable can map into (ModuloOf's precondition).
inline constexpr size_t kMaxAggregators = size_t{1} << 24;

// Division-free modulo for 16-bit dividends and divisors up to kMaxAggregators:
// ModuloOf(a, d, ReciprocalFor(d)) == a % d. With M = floor(2^40 / d) + 1, the
// quotient floor(a * M / 2^40) is exact while a * d < 2^40, and a * M < 2^64.
inline constexpr int kReciprocalShift = 40;
static_assert(uint64_t{1} << 16 << 24 <= uint64_t{1} << kReciprocalShift);
constexpr uint64_t ReciprocalFor(uint32_t divisor) {
  return (uint64_t{1} << kReciprocalShift) / divisor + 1;
}
constexpr uint32_t ModuloOf(uint16_t a, uint32_t divisor, uint64_t reciprocal) {
  uint64_t quotient = (uint64_t{a} * reciprocal) >> kReciprocalShift;
  return static_cast<uint32_t>(a - quotient * divisor);
}

inline size_t JobEntry::AggregatorFor(uint16_t index) const {
  if (mask != 0) return first + (index & mask);
  return first + ModuloOf(index, count, reciprocal);
}

// JobTable: the jobs of one switch, looked up by job id in O(1).
class JobTable {
 public:
  // Create: validates `jobs` against `mode` and an array of `aggregator_count`
  // aggregators: job ids 1..255 and unique, levels valid, slices inside the
  // array and not overlapping (kStatic) or empty (kDynamic). The message names
  // the offending field ("jobs[2].slice ...").
  static absl::StatusOr<JobTable> Create(std::span<const JobConfig> jobs, PartitionMode mode,
                                         size_t aggregator_count);

  // Find: the entry of `job`, or nullptr when this switch does not aggregate it.
  const JobEntry* Find(uint8_t job) const {
    const JobEntry& e = entries_[job];
    return e.aggregated() ? &e : nullptr;
  }
  // Entry: the entry of `job`, whatever it is: one load, no branch. A job this
  // switch does not aggregate has !aggregated().
  const JobEntry& Entry(uint8_t job) const { return entries_[job]; }

 private:
  JobTable() = default;
  std::array<JobEntry, wire::kMaxJobId + 1> entries_{};  // entries_[0] never aggregated
};

}  // namespace atp::switch_emulator

#endif  // ATP_SWITCH_EMULATOR_PIPELINE_JOB_TABLE_H_
