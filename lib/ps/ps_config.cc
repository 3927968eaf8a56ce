#include "lib/ps/ps_config.h"

#include <array>
#include <bit>

#include "absl/strings/str_cat.h"

namespace atp::ps {

absl::Status PsConfig::Validate() const {
  if (jobs.empty()) return absl::InvalidArgumentError("PsConfig.jobs: needs at least one job");
  std::array<bool, wire::kMaxJobId + 1> seen{};
  for (size_t i = 0; i < jobs.size(); ++i) {
    absl::Status status = jobs[i].Validate();
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("PsConfig.jobs[", i, "]: ", status.message()));
    }
    if (seen[jobs[i].job]) {
      return absl::InvalidArgumentError(
          absl::StrCat("PsConfig.jobs[", i, "].job: job ", jobs[i].job, " appears twice"));
    }
    seen[jobs[i].job] = true;
  }
  if (!std::has_single_bit(slots) || slots > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("PsConfig.slots: needs a power of two in 1..", kMaxSlots, ", got ", slots));
  }
  if (shard_count < 1 || shard_count > static_cast<uint32_t>(wire::kMaxQueues)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PsConfig.shard_count: needs 1..", wire::kMaxQueues, ", got ", shard_count));
  }
  if (shard_index >= shard_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("PsConfig.shard_index: needs 0..", shard_count - 1, ", got ", shard_index));
  }
  if (contribution_history < protocol::kContributionHistoryNeeded || contribution_history > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("PsConfig.contribution_history: needs ", protocol::kContributionHistoryNeeded,
                     "..64 (the workers' keep-alive bound), got ", contribution_history));
  }
  for (size_t i = 0; i < contribution_skipping_jobs.size(); ++i) {
    if (!seen[contribution_skipping_jobs[i]]) {
      return absl::InvalidArgumentError(
          absl::StrCat("PsConfig.contribution_skipping_jobs[", i, "]: job ",
                       contribution_skipping_jobs[i], " is not in PsConfig.jobs"));
    }
  }
  if (orphan_timeout <= TimeDelta::Zero()) {
    return absl::InvalidArgumentError(absl::StrCat("PsConfig.orphan_timeout: needs > 0, got ",
                                                   orphan_timeout.ToNanoseconds(), " ns"));
  }
  if (waiting_report_interval <= TimeDelta::Zero()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PsConfig.waiting_report_interval: needs > 0, got ",
                     waiting_report_interval.ToNanoseconds(), " ns"));
  }
  return absl::OkStatus();
}

uint32_t PsConfig::ServedQueues() const {
  // Queues q in [0, 16) with q mod shard_count == shard_index.
  return (static_cast<uint32_t>(wire::kMaxQueues) - shard_index + shard_count - 1) / shard_count;
}

}  // namespace atp::ps
