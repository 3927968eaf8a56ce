// libFuzzer target for atp-switchd's configuration (YAML): arbitrary text is
// parsed and validated (ParseSwitchdConfig). A refusal must be the error the
// daemon prints ("<path>:<line>: <reason>", line >= 1); an accepted
// configuration must hold everything the parser promises (unique names and
// resources, references that resolve, slices inside the array and disjoint)
// and must build the switch pipeline, since atp-switchd reports a pipeline
// that refuses a parsed configuration as a bug of the parser.
//
//   build-fuzz/tests/fuzz/switchd_config_fuzzer -max_total_time=60 WORK_DIR \
//       tests/fuzz/seeds/switchd_config_fuzzer
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "switch_emulator/daemon/config.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "tests/fuzz/fuzz_check.h"

namespace atp::switchd {
namespace {

constexpr char kTarget[] = "switchd_config_fuzzer";
// Real configurations are a few KiB; a bound keeps each run short.
constexpr size_t kMaxInputBytes = 16 * 1024;
// Pipelines are built only up to this many aggregators (a full 2^24 array
// is gigabytes: valid, but not what this target is about).
constexpr size_t kMaxBuiltAggregators = 1 << 16;

void Check(bool ok, const char* what) { fuzz::FuzzCheck(ok, kTarget, what); }

void CheckRefusal(const absl::Status& status) {
  const absl::string_view message = status.message();
  Check(absl::StartsWith(message, "fuzz.yaml:"), "an error that does not start with the path");
  const absl::string_view rest = message.substr(absl::string_view("fuzz.yaml:").size());
  const size_t colon = rest.find(':');
  int line = 0;
  Check(colon != absl::string_view::npos && absl::SimpleAtoi(rest.substr(0, colon), &line) &&
            line >= 1,
        "an error without a line number >= 1");
}

void CheckAccepted(const SwitchdConfig& config) {
  Check(!config.ports.empty(), "accepted without ports");
  for (size_t i = 0; i < config.ports.size(); ++i) {
    const PortConfig& p = config.ports[i];
    Check(p.queues >= 1 && p.queues <= 16, "a port's queues outside 1..16");
    for (size_t j = 0; j < i; ++j) {
      Check(config.ports[j].name != p.name, "two ports with one name");
    }
  }
  for (const RouteConfig& r : config.routes) {
    Check(r.port_index < config.ports.size(), "a route to a port index out of range");
    Check(config.ports[r.port_index].name == r.port, "a route whose port name and index disagree");
    Check(r.length <= 32, "a route prefix longer than 32 bits");
  }
  for (const MulticastConfig& m : config.multicast) {
    Check(!m.port_indices.empty(), "a group without ports");
    for (uint32_t index : m.port_indices) {
      Check(index < config.ports.size(), "a group port index out of range");
      Check(std::count(m.port_indices.begin(), m.port_indices.end(), index) == 1,
            "a group listing a port twice");
    }
  }
  for (size_t i = 0; i < config.jobs.size(); ++i) {
    const JobEntryConfig& job = config.jobs[i];
    Check(job.id >= 1, "job id 0");
    Check(std::any_of(config.multicast.begin(), config.multicast.end(),
                      [&](const MulticastConfig& m) { return m.group == job.group; }),
          "a job whose group is not in the multicast table");
    Check(job.slice.has_value() == (config.partition == switch_emulator::PartitionMode::kStatic),
          "a slice without static partition, or static partition without a slice");
    if (job.slice) {
      Check(job.slice->count >= 1 && job.slice->first + job.slice->count <= config.aggregators,
            "a slice outside the aggregator array");
    }
    for (size_t j = 0; j < i; ++j) {
      const JobEntryConfig& other = config.jobs[j];
      Check(other.id != job.id, "two jobs with one id");
      if (job.slice && other.slice) {
        Check(job.slice->first + job.slice->count <= other.slice->first ||
                  other.slice->first + other.slice->count <= job.slice->first,
              "two slices overlap");
      }
    }
  }
  if (config.aggregators <= kMaxBuiltAggregators) {
    absl::StatusOr<switch_emulator::SwitchPipeline> pipeline =
        switch_emulator::SwitchPipeline::Create(config.ToPipelineConfig());
    Check(pipeline.ok(), "the pipeline refuses a configuration the parser accepted");
  }
}

}  // namespace
}  // namespace atp::switchd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > atp::switchd::kMaxInputBytes) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<atp::switchd::SwitchdConfig> config =
      atp::switchd::ParseSwitchdConfig(text, "fuzz.yaml");
  if (config.ok()) {
    atp::switchd::CheckAccepted(*config);
  } else {
    atp::switchd::CheckRefusal(config.status());
  }
  return 0;
}
