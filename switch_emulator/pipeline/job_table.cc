#include "switch_emulator/pipeline/job_table.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace atp::switch_emulator {

absl::StatusOr<JobTable> JobTable::Create(std::span<const JobConfig> jobs, PartitionMode mode,
                                          size_t aggregator_count) {
  if (aggregator_count < 1 || aggregator_count > kMaxAggregators) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregator_count: must be 1..", kMaxAggregators, ", got ", aggregator_count));
  }
  JobTable table;
  // Slices already placed, as (first, end, job index), for the overlap check.
  struct Placed {
    uint64_t first;
    uint64_t end;
    size_t index;
  };
  std::vector<Placed> placed;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobConfig& job = jobs[i];
    const std::string field = absl::StrCat("jobs[", i, "]");
    if (job.job == 0) return absl::InvalidArgumentError(field + ".job: must be 1..255, got 0");
    if (table.entries_[job.job].aggregated()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".job: job ", job.job, " is listed twice"));
    }
    const uint8_t levels = static_cast<uint8_t>(job.levels);
    if (levels < 1 || levels > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".levels: must be kLevel1, kLevel2 or kBoth, got ", levels));
    }
    JobEntry entry;
    entry.levels = levels;
    entry.multicast_group = job.multicast_group;
    if (mode == PartitionMode::kDynamic) {
      if (job.slice.first != 0 || job.slice.count != 0) {
        return absl::InvalidArgumentError(
            field + ".slice: only PartitionMode::kStatic takes a slice; leave it empty");
      }
      entry.first = 0;
      entry.count = static_cast<uint32_t>(aggregator_count);
    } else {
      const uint64_t first = job.slice.first;
      const uint64_t end = first + job.slice.count;
      if (job.slice.count == 0 || end > aggregator_count) {
        return absl::InvalidArgumentError(absl::StrCat(field, ".slice: [", first, ", ", end,
                                                       ") must be non-empty and inside [0, ",
                                                       aggregator_count, ")"));
      }
      for (const Placed& other : placed) {
        if (first < other.end && other.first < end) {
          return absl::InvalidArgumentError(absl::StrCat(
              field, ".slice: [", first, ", ", end, ") overlaps jobs[", other.index, "].slice"));
        }
      }
      placed.push_back({first, end, i});
      entry.first = job.slice.first;
      entry.count = job.slice.count;
    }
    entry.reciprocal = ReciprocalFor(entry.count);
    entry.mask = entry.count > 1 && (entry.count & (entry.count - 1)) == 0 ? entry.count - 1 : 0;
    table.entries_[job.job] = entry;
  }
  return table;
}

}  // namespace atp::switch_emulator
