#include "lib/runtime/testbed/switch_fabric.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"

namespace atp::testbed {
namespace {

using switch_emulator::JobConfig;
using switch_emulator::JobLevels;
using switch_emulator::PipelineConfig;
using switch_emulator::SwitchPipeline;
using switch_emulator::Verdict;

uint32_t Load32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

constexpr size_t kSrcIpOffset = wire::kIpv4Offset + 12;
constexpr size_t kDstIpOffset = wire::kIpv4Offset + 16;
constexpr size_t kDstPortOffset = wire::kUdpOffset + 2;

uint64_t LossThreshold(double loss_rate) {
  if (!(loss_rate > 0)) return 0;
  return static_cast<uint64_t>(std::ldexp(std::min(loss_rate, 1.0), 64) - 1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SwitchFabric>> SwitchFabric::Create(
    const SwitchFabricOptions& options) {
  if (!(options.loss_rate >= 0 && options.loss_rate < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("SwitchFabricOptions.loss_rate: ", options.loss_rate, " is not in [0, 1)"));
  }
  size_t racks = 0;
  for (size_t j = 0; j < options.jobs.size(); ++j) {
    if (options.jobs[j].racks.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SwitchFabricOptions.jobs[", j, "].racks: needs at least one rack"));
    }
    racks = std::max(racks, options.jobs[j].racks.size());
  }
  std::vector<SwitchPipeline> switches;
  auto make_switch = [&](JobLevels levels, size_t rack) -> absl::Status {
    PipelineConfig config;
    config.aggregator_count = options.aggregator_count;
    config.orphan_timeout = options.orphan_timeout;
    config.ecn_threshold = options.ecn_threshold;
    config.base_port = options.base_port;
    for (const FabricJob& job : options.jobs) {
      if (levels == JobLevels::kLevel1 && rack >= job.racks.size()) continue;
      config.jobs.push_back(
          JobConfig{.job = job.job_id, .levels = levels, .multicast_group = job.job_id});
    }
    ATP_ASSIGN_OR_RETURN(SwitchPipeline pipeline, SwitchPipeline::Create(config));
    switches.push_back(std::move(pipeline));
    return absl::OkStatus();
  };
  switch (options.aggregation) {
    case FabricAggregation::kNone:
      break;
    case FabricAggregation::kSingleSwitch:
      ATP_RETURN_IF_ERROR(make_switch(JobLevels::kBoth, 0));
      break;
    case FabricAggregation::kTwoLevel:
      for (size_t r = 0; r < racks; ++r) ATP_RETURN_IF_ERROR(make_switch(JobLevels::kLevel1, r));
      ATP_RETURN_IF_ERROR(make_switch(JobLevels::kLevel2, 0));
      break;
  }
  return std::unique_ptr<SwitchFabric>(new SwitchFabric(options, std::move(switches)));
}

SwitchFabric::SwitchFabric(const SwitchFabricOptions& options,
                           std::vector<SwitchPipeline> switches)
    : options_(options),
      switches_(std::move(switches)),
      rng_(options.seed),
      loss_threshold_(LossThreshold(options.loss_rate)) {
  size_t workers = 0;
  for (const FabricJob& job : options.jobs) {
    by_group_[job.group.value] = JobRoute{job.racks};
    for (size_t r = 0; r < job.racks.size(); ++r) {
      for (const wire::Ipv4Address& ip : job.racks[r]) {
        rack_of_[ip.value] = static_cast<uint32_t>(r);
        ++workers;
      }
    }
  }
  endpoints_.reserve(workers);
}

void SwitchFabric::SetLossRate(double loss_rate) {
  std::lock_guard<std::mutex> lock(mu_);
  loss_threshold_ = LossThreshold(loss_rate);
}

bool SwitchFabric::Lose() {
  if (loss_threshold_ == 0) return false;
  // splitmix64
  uint64_t z = (rng_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  if (z >= loss_threshold_) return false;
  ++counters_.lost;
  return true;
}

SwitchPipeline* SwitchFabric::RackSwitch(size_t rack) {
  switch (options_.aggregation) {
    case FabricAggregation::kNone: return nullptr;
    case FabricAggregation::kSingleSwitch: return &switches_[0];
    case FabricAggregation::kTwoLevel: return &switches_[rack];
  }
  return nullptr;
}

SwitchPipeline* SwitchFabric::PsSwitch() {
  if (options_.aggregation != FabricAggregation::kTwoLevel) return nullptr;
  return &switches_.back();
}

bool SwitchFabric::Hop(SwitchPipeline& sw, std::span<uint8_t> frame, TimePoint now,
                       uint32_t depth) {
  const Verdict verdict = sw.Process(frame, now, depth).verdict;
  if (verdict == Verdict::kAbsorbed) {
    ++counters_.absorbed;
    return false;
  }
  if (verdict == Verdict::kMalformed) {
    ++counters_.malformed;
    return false;
  }
  return true;
}

uint32_t SwitchFabric::DepthToward(const transport::LoopbackWire& wire,
                                   const uint8_t* frame) const {
  const std::optional<transport::EndpointId> endpoint =
      wire.FindEndpoint(wire::Ipv4Address{Load32(frame + kDstIpOffset)});
  if (!endpoint) return 0;
  const uint32_t queue = uint32_t{Load16(frame + kDstPortOffset)} - options_.base_port;
  return static_cast<uint32_t>(wire.RxBacklog(*endpoint, queue));
}

transport::WireDecision SwitchFabric::Process(std::span<uint8_t, transport::kFrameBytes> frame,
                                              transport::EndpointId /*from*/, TimePoint now,
                                              const transport::LoopbackWire& wire) {
  using transport::WireAction;
  using transport::WireDecision;
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.frames;
  if (options_.wipe_every_frames > 0 && counters_.frames % options_.wipe_every_frames == 0) {
    for (SwitchPipeline& sw : switches_) sw.WipeState();
    ++counters_.wipes;
  }
  if (!wire::IsAtpFrame(frame, options_.base_port)) return WireDecision{WireAction::kRoute, {}};
  const uint8_t* bytes = frame.data();

  // A parameter packet: toward the job's group.
  if (auto group = by_group_.find(Load32(bytes + kDstIpOffset)); group != by_group_.end()) {
    if (Lose()) return WireDecision{WireAction::kDrop, {}};
    if (SwitchPipeline* ps_tor = PsSwitch(); ps_tor != nullptr && !Hop(*ps_tor, frame, now, 0)) {
      return WireDecision{WireAction::kDrop, {}};
    }
    if (options_.aggregation == FabricAggregation::kSingleSwitch &&
        !Hop(*RackSwitch(0), frame, now, 0)) {
      return WireDecision{WireAction::kDrop, {}};
    }
    endpoints_.clear();
    const JobRoute& route = group->second;
    for (size_t r = 0; r < route.racks.size(); ++r) {
      if (options_.aggregation == FabricAggregation::kTwoLevel) {
        if (Lose() || !Hop(*RackSwitch(r), frame, now, 0)) continue;
      }
      for (const wire::Ipv4Address& ip : route.racks[r]) {
        if (Lose()) continue;
        if (std::optional<transport::EndpointId> e = wire.FindEndpoint(ip)) endpoints_.push_back(*e);
      }
    }
    ++counters_.multicast;
    return WireDecision{WireAction::kSendTo, endpoints_};
  }

  // A gradient (or anything else) from a worker: up through the switches.
  if (auto rack = rack_of_.find(Load32(bytes + kSrcIpOffset)); rack != rack_of_.end()) {
    if (Lose()) return WireDecision{WireAction::kDrop, {}};
    if (SwitchPipeline* tor = RackSwitch(rack->second); tor != nullptr) {
      if (!Hop(*tor, frame, now, DepthToward(wire, bytes))) return WireDecision{WireAction::kDrop, {}};
    }
    if (SwitchPipeline* ps_tor = PsSwitch(); ps_tor != nullptr) {
      if (Lose() || !Hop(*ps_tor, frame, now, DepthToward(wire, bytes))) {
        return WireDecision{WireAction::kDrop, {}};
      }
    }
  }
  if (Lose()) return WireDecision{WireAction::kDrop, {}};
  return WireDecision{WireAction::kRoute, {}};
}

FabricStats SwitchFabric::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  FabricStats s = counters_;
  for (const SwitchPipeline& sw : switches_) s.switches.push_back(sw.counters());
  return s;
}

void SwitchFabric::WipeSwitches() {
  std::lock_guard<std::mutex> lock(mu_);
  for (SwitchPipeline& sw : switches_) sw.WipeState();
  ++counters_.wipes;
}

}  // namespace atp::testbed
