#include "lib/host/ps_shard.h"

#include <utility>

#include "atp/status_macros.h"
#include "lib/host/worker_config.h"
#include "lib/wire/control_message.h"

namespace atp::runtime {
namespace {

// IsPull: a well-formed kPull control frame (SkipReduce's contribution
// variant: a non-contributor asking for a lost parameter packet).
bool IsPull(const wire::AtpMessage& message) {
  if (!wire::IsControl(message.header) ||
      wire::ValidateHeader(message.header) != wire::DecodeError::kOk) {
    return false;
  }
  wire::ControlMessage control;
  return wire::DecodeControl(message, &control) == wire::ControlError::kOk &&
         control.type == wire::ControlType::kPull;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Create(const ParameterServerOptions& options,
                                                         uint32_t shard,
                                                         const transport::DeviceAddress& self) {
  PsDestinations destinations;
  for (const ParameterServerJobOptions& job : options.jobs) {
    if (job.delivery == ParameterDelivery::kMulticast) {
      destinations[job.job_id] = {job.multicast_group};
    } else {
      destinations[job.job_id] = job.workers;
    }
  }
  return Create(ToPsConfig(options, shard), std::move(destinations), self, options.base_port);
}

absl::StatusOr<std::unique_ptr<PsShard>> PsShard::Create(ps::PsConfig engine_config,
                                                         PsDestinations destinations,
                                                         const transport::DeviceAddress& self,
                                                         uint16_t base_port) {
  const bool scans_orphans = !engine_config.orphan_timeout.IsInfinite();
  ATP_ASSIGN_OR_RETURN(ps::PsEngine engine, ps::PsEngine::Create(std::move(engine_config)));
  return std::unique_ptr<PsShard>(
      new PsShard(std::move(engine), scans_orphans, std::move(destinations), self, base_port));
}

PsShard::PsShard(ps::PsEngine engine, bool scans_orphans, PsDestinations destinations,
                 const transport::DeviceAddress& self, uint16_t base_port)
    : engine_(std::move(engine)),
      scans_orphans_(scans_orphans),
      base_port_(base_port),
      destinations_(std::move(destinations)) {
  fields_.src_ip = self.ipv4;
  fields_.src_mac = self.mac;
  fields_.ip_tos = wire::kTosEct0;
}

void PsShard::OnMessage(const wire::AtpMessage& message, TimePoint now, FrameSink& sink) {
  encoder_.out = &sink;
  if (IsPull(message)) {
    engine_.OnPull(message, encoder_);  // SkipReduce's contribution variant
  } else {
    engine_.OnGradient(message, now, encoder_);
  }
  encoder_.out = nullptr;
}

void PsShard::Encoder::Send(const wire::AtpMessage& message) {
  PsShard& s = *shard_;
  s.fields_.header = message.header;
  for (const transport::DeviceAddress& to : s.destinations_[message.header.job]) {
    s.fields_.dst_ip = to.ipv4;
    s.fields_.dst_mac = to.mac;
    wire::EncodeFrame(s.fields_, message.payload, s.base_port_, s.frame_);
    out->SendFrame(s.frame_);
    ++s.frames_sent_;
  }
}

void PsShard::AddTo(ParameterServerStats& stats) const {
  const ps::PsCounters& c = engine_.counters();
  stats.frames_sent += frames_sent_;
  stats.ce_to_ecn += ce_to_ecn_;
  stats.gradients += c.gradients;
  stats.contributions += c.contributions;
  stats.duplicates += c.duplicates;
  stats.integer_on_float_path += c.integer_on_float_path;
  stats.param_resent += c.param_resent;
  stats.stale += c.stale;
  stats.ahead += c.ahead;
  stats.unknown_job += c.unknown_job;
  stats.wrong_shard += c.wrong_shard;
  stats.shape_mismatch += c.shape_mismatch;
  stats.malformed += c.malformed;
  stats.unexpected_ack += c.unexpected_ack;
  stats.control += c.control;
  stats.pulls_answered += c.pulls_answered;
  stats.pulls_ignored += c.pulls_ignored;
  stats.completed += c.completed;
  stats.fp_completed += c.fp_completed;
  stats.switch_completed += c.switch_completed;
  stats.collisions_rehashed += c.collisions_rehashed;
  stats.overflow_requests += c.overflow_requests;
  stats.orphans_released += c.orphans_released;
}

}  // namespace atp::runtime
