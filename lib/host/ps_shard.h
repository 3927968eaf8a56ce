// lib/host/ps_shard.h: one PsEngine and the frames its messages become:
// a parameter packet turns into one frame to the job's multicast group, or
// one frame per worker (ParameterDelivery). Used by both the threaded
// ParameterServer (a shard per thread) and EmbeddedParameterServer (a shard
// per lock).
//
//   ATP_ASSIGN_OR_RETURN(auto shard, PsShard::Create(options, /*shard=*/0, self));
//   shard->OnMessage(message, now, sink);   // frames to send go to sink
//
// Control frames (lib/wire/control_message.h) never reach the engine:
// OnMessage diverts them to OnControl, which switches on their type. The PS
// speaks control too: ReportWaiting multicasts a kStatus naming the workers
// a long-incomplete fragment waits for (lib/protocol/status_message.h), and
// LogAbandoned logs the partial state the orphan scan released.
//
// Runs and restarts (docs/protocol.md "Failures, runs and restarts"): a
// gradient outside the window (stale or ahead), a gradient or kOpBegin on a
// queue not every worker has joined since this PS started, and a waiting
// report
// (ReportWaiting) make the shard ask the job's workers to join that queue
// (kStatus kJoinRequest, at most once per kJoinRequestInterval per job and
// queue); a kJoin that answered another PS incarnation's request (a dead
// PS's, still queued when this one started) is ignored; each other kJoin is
// checked against the job (slots and layout against
// the PS's own, io_threads and scale against
// the first worker that joined: a difference is multicast as kMismatch), and
// fed to the job's RunTracker, whose decision rebuilds the queue's window
// (PsEngine::RebuildQueue) as its RecoveryPlan says (lib/ps/recovery_plan.h).
// Positions completed at some workers and not at others are asked of a
// worker that has them (kStatus kReplayRequest); its kReplay frames are
// joined (protocol::ReplayAssembler) and handed to PsEngine::OnReplay, which
// multicasts each as its position's result. A replay is taken only for a
// position asked for, from the worker asked (or any worker, when the joins
// could not say who has it), of the run that joined. The requests are
// repeated, at most once per kJoinRequestInterval per job and queue, while
// gradients for positions still waiting for a replay arrive (the workers that
// lack them resend them on their timers), so a lost request or replay costs
// a retransmission timeout.
//
// Not thread-safe: one thread at a time.
#ifndef ATP_LIB_HOST_PS_SHARD_H_
#define ATP_LIB_HOST_PS_SHARD_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/parameter_server.h"
#include "atp/time.h"
#include "atp/transport.h"
#include "atp/wire.h"
#include "lib/host/source_admission.h"
#include "lib/protocol/message_sink.h"
#include "lib/protocol/replay_message.h"
#include "lib/protocol/status_message.h"
#include "lib/ps/ps_engine.h"
#include "lib/ps/op_ledger.h"
#include "lib/ps/recovery_plan.h"
#include "lib/ps/run_tracker.h"
#include "lib/wire/control_message.h"

namespace atp::host {

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

  // OnMessage: a decoded message (a gradient, or a control frame, which goes
  // to OnControl); the frames it causes go to `sink` before it returns.
  void OnMessage(const wire::AtpMessage& message, TimePoint now, FrameSink& sink);

  // ReportWaiting: at most once per PsConfig::waiting_report_interval (call it
  // often; it returns at once in between): a kStatus "waiting for workers"
  // to every job and queue whose oldest incomplete fragment is older than
  // that interval, and a join request on it (RequestJoin). Returns how many
  // reports it sent.
  size_t ReportWaiting(TimePoint now, FrameSink& sink);

  // LogAbandoned: logs (warning) what the orphan scan released since the last
  // call, one line per job naming the workers that never contributed.
  void LogAbandoned();

  // incarnation: this PS's random identity in its control frames.
  uint64_t incarnation() const { return incarnation_; }

  // kJoinRequestInterval: the least time between two join requests for the
  // same job and queue.
  static constexpr TimeDelta kJoinRequestInterval = TimeDelta::FromMilliseconds(20);

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

  PsShard(ps::PsEngine engine, bool scans_orphans, TimeDelta waiting_report_interval,
          PsDestinations destinations, const transport::DeviceAddress& self, uint16_t base_port,
          PsSources sources);

  // OnControl: a control frame from a worker, by type.
  void OnControl(const wire::AtpMessage& message, TimePoint now, FrameSink& sink);
  void OnJoin(const wire::AtpMessage& message, const wire::ControlMessage& control,
              TimePoint now);
  void OnOpBegin(const wire::AtpMessage& message, const wire::ControlMessage& control,
                 TimePoint now);
  void OnReplay(const wire::AtpMessage& message, const wire::ControlMessage& control);
  // Rebuild: applies a RunTracker decision to `job`'s `queue`.
  void Rebuild(uint8_t job, uint32_t queue, const ps::RebuildDecision& decision);
  // SendReplayRequests: the queue's outstanding replay requests, rate-limited
  // (force: now, whatever the last one).
  void SendReplayRequests(uint8_t job, uint32_t queue, TimePoint now, bool force);
  // OnGradientWhileReplaying: a gradient of a queue that waits for replays:
  // asks again if it is for a position still waiting.
  void OnGradientWhileReplaying(const wire::AtpHeader& header, TimePoint now);
  // PruneReplays: drops the positions of the queue's requests whose slots no
  // longer wait for them; false when none is left.
  bool PruneReplays(uint8_t job, uint32_t queue);
  // SenderOf: the sender's global index, if the header's bitmaps name the
  // worker the control message says, of a job and queue served here.
  std::optional<int> SenderOf(const wire::AtpMessage& message,
                              const wire::ControlMessage& control) const;
  // RequestJoins: a join request for each job and queue that saw gradients
  // outside the window, rate-limited.
  void RequestJoins(TimePoint now);
  // RequestJoin: a join request on `job`'s `queue` unless one went less than
  // kJoinRequestInterval ago (nothing for a job or queue not served here).
  void RequestJoin(uint8_t job, uint32_t queue, TimePoint now);
  // Synchronized: `job`'s `queue` was rebuilt from its workers' joins at
  // least once since this PS started (every worker joined it).
  bool Synchronized(uint8_t job, uint32_t queue) const {
    return (synchronized_queues_[job] >> (queue & (wire::kMaxQueues - 1)) & 1u) != 0;
  }
  // Unsynchronized: `job`'s `queue` was rebuilt before, and a worker has
  // since joined, or sent a kOpBegin, as another run
  // (ps::RunTracker::Unsynchronized): its gradients are held back.
  bool Unsynchronized(uint8_t job, uint32_t queue) const {
    return (unsynchronized_queues_[job] >> (queue & (wire::kMaxQueues - 1)) & 1u) != 0;
  }
  // ReportJoinMismatch: multicasts a kMismatch naming `worker` and `field`
  // on `queue` (and queue 0), counts and logs it.
  void ReportJoinMismatch(uint8_t job, uint32_t queue, int worker, protocol::MismatchField field,
                          uint64_t expected, uint64_t received);
  // CheckNewRun: a new run's joins (`decision`) agree on io_threads and
  // scale (else a mismatch naming the first worker that differs from worker
  // 0), and their values become the job's reference.
  void CheckNewRun(uint8_t job, uint32_t queue, const ps::RebuildDecision& decision);
  // NoteSynchronization: after `worker`'s join or kOpBegin on `job`'s
  // `queue`, whether the queue is Unsynchronized (logged when it becomes so).
  void NoteSynchronization(uint8_t job, uint32_t queue, int worker, bool unsynchronized);
  // SendStatus: multicasts `status` to `job`'s workers on `queue` (encoder_.out set).
  void SendStatus(uint8_t job, uint32_t queue, const protocol::StatusBody& status);

  // JobControl: what the shard knows of a job's runs (created on its first join).
  struct JobControl {
    explicit JobControl(int workers, uint32_t served_queues)
        : tracker(workers, served_queues), ledger(workers, served_queues), replays(served_queues) {}
    ps::RunTracker tracker;
    ps::OpLedger ledger;
    // Reference: the io_threads and scale every worker of the run the queues
    // serve must have: the first joiner's, or a new run's worker 0's
    // (CheckNewRun).
    struct Reference {
      bool set = false;
      uint32_t io_threads = 0;
      uint64_t scale_bits = 0;
    };
    Reference reference;  // the run the queues serve (or the first to join)
    std::array<TimePoint, wire::kMaxQueues> next_join_request{};
    // Replays asked for after a restart, per served queue, until their
    // positions no longer wait (lib/ps/recovery_plan.h).
    std::vector<std::vector<ps::ReplayRange>> replays;
    std::array<TimePoint, wire::kMaxQueues> next_replay_request{};
    protocol::ReplayAssembler assembler;
  };
  JobControl& Control(uint8_t job);

  ps::PsEngine engine_;
  const bool scans_orphans_;
  const uint16_t base_port_;
  // destinations_[job]: where a parameter packet of `job` goes.
  std::array<std::vector<transport::DeviceAddress>, wire::kMaxJobId + 1> destinations_;
  const PsSources sources_;  // sources_[job]: whose frames it accepts
  // l2l4_templates_[job][d]: the Ethernet, IPv4 and UDP headers of every
  // frame to destinations_[job][d], made once: a frame then takes them whole
  // and only its UDP ports (base_port_ + the message's queue) are written.
  std::array<std::vector<std::array<uint8_t, wire::kL2L4HeaderBytes>>, wire::kMaxJobId + 1>
      l2l4_templates_;
  alignas(64) std::array<uint8_t, wire::kFrameBytes> frame_{};
  Encoder encoder_{this};
  uint64_t frames_sent_ = 0;
  uint64_t ce_to_ecn_ = 0;

  // Control.
  const uint64_t incarnation_;
  const TimeDelta waiting_report_interval_;
  TimePoint next_waiting_report_;
  std::vector<ps::WaitingReport> waiting_;    // scratch
  std::vector<ps::AbandonReport> abandoned_;  // scratch
  std::vector<ps::PsEngine::OutOfWindow> out_of_window_;  // scratch
  std::array<std::unique_ptr<JobControl>, wire::kMaxJobId + 1> control_;  // by job id
  // By job id: bit q = queue q had a RunTracker decision (Synchronized; a
  // bit mask, as every gradient reads it).
  std::array<uint16_t, wire::kMaxJobId + 1> synchronized_queues_{};
  // By job id: bit q = queue q is Unsynchronized (read by every gradient).
  std::array<uint16_t, wire::kMaxJobId + 1> unsynchronized_queues_{};
  uint64_t unsynchronized_gradients_ = 0;  // held back while Unsynchronized
  uint64_t unsynchronized_declarations_ = 0;  // kOpBegins held back while Unsynchronized
  uint64_t join_requests_sent_ = 0;
  uint64_t replay_requests_sent_ = 0;
  size_t queues_replaying_ = 0;  // (job, queue) pairs with replays outstanding
  uint64_t rebuilds_ = 0;
  uint64_t stale_joins_ = 0;  // joins answering another PS incarnation's request
  uint64_t mismatches_ = 0;
  uint64_t ops_confirmed_ = 0;
  uint64_t control_received_ = 0;   // control frames understood
  uint64_t control_rejected_ = 0;   // control frames that did not decode or belong to the PS
  uint64_t status_sent_ = 0;        // kStatus messages sent (before replication)
  uint64_t source_refused_ = 0;
};

}  // namespace atp::host

#endif  // ATP_LIB_HOST_PS_SHARD_H_
