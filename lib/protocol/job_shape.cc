#include "lib/protocol/job_shape.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "atp/wire.h"

namespace atp::protocol {

JobShape JobShape::Uniform(uint8_t job, int racks, int workers) {
  JobShape shape;
  shape.job = job;
  shape.workers_per_rack.assign(static_cast<size_t>(racks), static_cast<uint8_t>(workers));
  return shape;
}

int JobShape::total_workers() const {
  return std::accumulate(workers_per_rack.begin(), workers_per_rack.end(), 0);
}

absl::Status JobShape::Validate() const {
  if (job == 0) return absl::InvalidArgumentError("JobShape.job: must be 1..255, got 0");
  if (workers_per_rack.empty() || workers_per_rack.size() > wire::kMaxFanIn) {
    return absl::InvalidArgumentError(absl::StrCat("JobShape.workers_per_rack: needs 1..",
                                                   wire::kMaxFanIn, " racks, got ",
                                                   workers_per_rack.size()));
  }
  for (size_t r = 0; r < workers_per_rack.size(); ++r) {
    int w = workers_per_rack[r];
    if (w < 1 || w > wire::kMaxFanIn) {
      return absl::InvalidArgumentError(absl::StrCat("JobShape.workers_per_rack[", r,
                                                     "]: needs 1..", wire::kMaxFanIn,
                                                     " workers, got ", w));
    }
  }
  return absl::OkStatus();
}

}  // namespace atp::protocol
