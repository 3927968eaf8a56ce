// lib/host/ps_shard.h: one PsEngine and the frames its messages become:
// a parameter packet turns into one frame to the job's multicast group, or
// one frame per worker (ParameterDelivery). Used by both the threaded
// ParameterServer (a shard per thread) and EmbeddedParameterServer (a shard
// per lock).
//
//   ATP_ASSIGN_OR_RETURN(auto shard, PsShard::Create(options, /*shard=*/0, self));
//   shard->OnMessage(message, now, sink);   // frames to send go to sink
//
// Not thread-safe: one thread at a time.
#ifndef ATP_LIB_HOST_PS_SHARD_H_
#define ATP_LIB_HOST_PS_SHARD_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/parameter_server.h"
#include "atp/time.h"
#include "atp/transport.h"
#include "atp/wire.h"
#include "lib/host/source_admission.h"
#include "lib/protocol/message_sink.h"
#include "lib/ps/ps_engine.h"

namespace atp::runtime {

// PsDestinations: where a parameter packet of each job goes, by job id: the
// job's multicast group, or each of its workers.
using PsDestinations = std::array<std::vector<transport::DeviceAddress>, wire::kMaxJobId + 1>;
// PsSources: whose frames each job accepts, by job id (default: anyone's).
using PsSources = std::array<SourceAdmission, wire::kMaxJobId + 1>;

class PsShard {
 public:
  // Create: the engine of shard `shard` of `options` (see ToPsConfig);
  // `self` is the source of every frame. `options` must be valid.
  static absl::StatusOr<std::unique_ptr<PsShard>> Create(const ParameterServerOptions& options,
                                                         uint32_t shard,
                                                         const transport::DeviceAddress& self);
  // Create: the engine `engine_config` describes, sending parameter packets
  // of job j to destinations[j] on UDP ports base_port + queue (the
  // simulator's PS, whose configuration is the engine's), accepting job j's
  // frames from sources[j] (default: any source).
  static absl::StatusOr<std::unique_ptr<PsShard>> Create(ps::PsConfig engine_config,
                                                         PsDestinations destinations,
                                                         const transport::DeviceAddress& self,
                                                         uint16_t base_port,
                                                         PsSources sources = {});

  PsShard(const PsShard&) = delete;
  PsShard& operator=(const PsShard&) = delete;

  // Admits: whether a decoded frame's source may send its job's frames
  // (ParameterServerJobOptions::gradient_sources); counts the refused ones
  // (source_refused). Call it between decoding a frame and OnMessage.
  bool Admits(const wire::FrameFields& fields) {
    if (sources_[fields.header.job].Admits(fields)) [[likely]] return true;
    ++source_refused_;
    return false;
  }

  // OnMessage: a decoded gradient message; the frames it causes go to `sink`
  // before it returns.
  void OnMessage(const wire::AtpMessage& message, TimePoint now, FrameSink& sink);

  // CarryCongestion: a gradient frame marked CE by a switch that only
  // forwarded it (the IPv4 TOS of `fields`) sets the ATP ecn bit of its
  // message, as the switch pipeline sets it on what it aggregates, so the
  // parameter packet tells the workers' congestion control either way
  // (ATP-SPEC 7). Call it between decoding a frame and OnMessage.
  void CarryCongestion(const wire::FrameFields& fields, wire::AtpMessage& message) {
    if (fields.ip_tos == wire::kTosCe && !message.header.ecn) {
      message.header.ecn = true;
      ++ce_to_ecn_;
    }
  }

  // ScanOrphans: the engine's orphan scan (ps::PsEngine::ScanOrphans): frees
  // partial state untouched for longer than the orphan timeout. Sends nothing.
  size_t ScanOrphans(TimePoint now, size_t budget) { return engine_.ScanOrphans(now, budget); }
  // WantsOrphanScans: whether a scan could release anything: the engine holds
  // partial state and its orphan timeout is finite.
  bool WantsOrphanScans() const { return scans_orphans_ && engine_.live_slots() > 0; }

  // AddTo: adds the engine's counters and frames_sent to `stats`.
  void AddTo(ParameterServerStats& stats) const;

  const ps::PsEngine& engine() const { return engine_; }

 private:
  // Encoder: the engine's MessageSink; turns messages into frames for `out`.
  class Encoder final : public protocol::MessageSink {
   public:
    explicit Encoder(PsShard* shard) : shard_(shard) {}
    void Send(const wire::AtpMessage& message) override;
    FrameSink* out = nullptr;

   private:
    PsShard* shard_;
  };

  PsShard(ps::PsEngine engine, bool scans_orphans, PsDestinations destinations,
          const transport::DeviceAddress& self, uint16_t base_port, PsSources sources);

  ps::PsEngine engine_;
  const bool scans_orphans_;
  const uint16_t base_port_;
  // destinations_[job]: where a parameter packet of `job` goes.
  std::array<std::vector<transport::DeviceAddress>, wire::kMaxJobId + 1> destinations_;
  const PsSources sources_;  // sources_[job]: whose frames it accepts
  wire::FrameFields fields_;
  alignas(64) std::array<uint8_t, wire::kFrameBytes> frame_{};
  Encoder encoder_{this};
  uint64_t frames_sent_ = 0;
  uint64_t ce_to_ecn_ = 0;
  uint64_t source_refused_ = 0;
};

}  // namespace atp::runtime

#endif  // ATP_LIB_HOST_PS_SHARD_H_
