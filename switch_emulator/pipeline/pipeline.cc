// switch_emulator/pipeline/pipeline.cc: SwitchPipeline's construction and
// control operations. The per-packet path is in pipeline_datapath.cc.
#include "switch_emulator/pipeline/pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace atp::switch_emulator {
namespace {

// CpuHasBmiPopcnt: what the vector datapaths need besides AVX2 / AVX-512.
bool CpuHasBmiPopcnt() {
  static const bool has = __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                          __builtin_cpu_supports("popcnt");
  return has;
}

}  // namespace

std::string_view VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAbsorbed:
      return "absorbed";
    case Verdict::kToPs:
      return "to_ps";
    case Verdict::kMulticast:
      return "multicast";
    case Verdict::kForward:
      return "forward";
    case Verdict::kMalformed:
      return "malformed";
  }
  return "unknown";
}

absl::StatusOr<SwitchPipeline> SwitchPipeline::Create(const PipelineConfig& config) {
  if (config.aggregator_count < 1 || config.aggregator_count > kMaxAggregators) {
    return absl::InvalidArgumentError(absl::StrCat("PipelineConfig.aggregator_count: must be 1..",
                                                   kMaxAggregators, ", got ",
                                                   config.aggregator_count));
  }
  if (config.orphan_timeout <= TimeDelta::Zero()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineConfig.orphan_timeout: must be > 0, got ",
                     config.orphan_timeout.ToNanoseconds(), " ns"));
  }
  if (config.base_port > 65536 - wire::kMaxQueues) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineConfig.base_port: must leave room for ", wire::kMaxQueues,
                     " ports (<= ", 65536 - wire::kMaxQueues, "), got ", config.base_port));
  }
  absl::StatusOr<JobTable> jobs =
      JobTable::Create(config.jobs, config.partition, config.aggregator_count);
  if (!jobs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("PipelineConfig.", jobs.status().message()));
  }
  absl::StatusOr<ValueKernels> kernels = SelectValueKernels(config.kernel);
  if (!kernels.ok()) {
    return absl::Status(kernels.status().code(),
                        absl::StrCat("PipelineConfig.kernel: ", kernels.status().message()));
  }
  return SwitchPipeline(config, *std::move(jobs), *kernels);
}

SwitchPipeline::SwitchPipeline(const PipelineConfig& config, JobTable&& jobs, ValueKernels kernels)
    : aggregators_(config.aggregator_count),
      jobs_(std::move(jobs)),
      kernels_(kernels),
      orphan_timeout_(config.orphan_timeout),
      ecn_threshold_(config.ecn_threshold),
      base_port_(config.base_port),
      scan_per_packet_(static_cast<uint32_t>(
          std::min<size_t>(config.orphan_scan_per_packet, config.aggregator_count))),
      datapath_(DatapathFor(kernels.kind)),
      prefetch_in_bursts_(config.aggregator_count *
                              (sizeof(AggregatorState) + sizeof(AggregatorValues)) >=
                          kPrefetchFromBytes),
      aggregator_count_(config.aggregator_count) {}

SwitchPipeline::Datapath SwitchPipeline::DatapathFor(ValueKernel kernel) {
  // SelectValueKernels has checked AVX2 / AVX-512 for these kernels.
  if (!CpuHasBmiPopcnt()) return Datapath::kDynamic;
  if (kernel == ValueKernel::kAvx512) return Datapath::kAvx512;
  if (kernel == ValueKernel::kAvx2) return Datapath::kAvx2;
  return Datapath::kDynamic;
}

void SwitchPipeline::WipeState() {
  aggregators_.FreeAll();
  in_use_ = 0;
  ++counters_.wipes;
}

}  // namespace atp::switch_emulator
