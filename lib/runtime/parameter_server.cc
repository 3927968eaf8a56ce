// lib/runtime/parameter_server.cc: atp::ParameterServer (PsIoLoops on
// LoopThreads) and atp::EmbeddedParameterServer (PsShards behind locks).
#include "atp/parameter_server.h"

#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/status_macros.h"
#include "lib/host/clock.h"
#include "lib/host/ps_io_loop.h"
#include "lib/host/ps_shard.h"
#include "lib/host/worker_config.h"
#include "lib/runtime/loop_threads.h"
#include "lib/runtime/queue_claims.h"

namespace atp {
namespace {

void Accumulate(const ParameterServerStats& s, ParameterServerStats& total) {
  total.frames_received += s.frames_received;
  total.decode_errors += s.decode_errors;
  total.source_refused += s.source_refused;
  total.frames_sent += s.frames_sent;
  total.ce_to_ecn += s.ce_to_ecn;
  total.tx_dropped += s.tx_dropped;
  total.gradients += s.gradients;
  total.contributions += s.contributions;
  total.duplicates += s.duplicates;
  total.integer_on_float_path += s.integer_on_float_path;
  total.param_resent += s.param_resent;
  total.stale += s.stale;
  total.ahead += s.ahead;
  total.unknown_job += s.unknown_job;
  total.wrong_shard += s.wrong_shard;
  total.shape_mismatch += s.shape_mismatch;
  total.malformed += s.malformed;
  total.unexpected_ack += s.unexpected_ack;
  total.control += s.control;
  total.pulls_answered += s.pulls_answered;
  total.pulls_ignored += s.pulls_ignored;
  total.completed += s.completed;
  total.fp_completed += s.fp_completed;
  total.switch_completed += s.switch_completed;
  total.collisions_rehashed += s.collisions_rehashed;
  total.overflow_requests += s.overflow_requests;
  total.orphans_released += s.orphans_released;
  total.control_received += s.control_received;
  total.control_rejected += s.control_rejected;
  total.status_sent += s.status_sent;
  total.join_requests += s.join_requests;
  total.rebuilds += s.rebuilds;
  total.stale_joins += s.stale_joins;
  total.unsynchronized_gradients += s.unsynchronized_gradients;
  total.unsynchronized_declarations += s.unsynchronized_declarations;
  total.replay_requests += s.replay_requests;
  total.replays += s.replays;
  total.mismatches += s.mismatches;
  total.operations_confirmed += s.operations_confirmed;
}

}  // namespace

namespace internal {

class ParameterServerImpl {
 public:
  static absl::StatusOr<std::unique_ptr<ParameterServerImpl>> Start(
      ParameterServerOptions options, transport::Device& device,
      std::unique_ptr<transport::Device> owned) {
    ATP_RETURN_IF_ERROR(options.Validate());
    if (device.base_port() != options.base_port) {
      return absl::InvalidArgumentError(absl::StrCat("ParameterServerOptions.base_port: ",
                                                     options.base_port, " but the device uses ",
                                                     device.base_port()));
    }
    std::unique_ptr<ParameterServerImpl> impl(
        new ParameterServerImpl(std::move(options), std::move(owned)));
    const ParameterServerOptions& o = impl->options_;
    // Thread t owns the device queues its shard serves.
    std::vector<std::vector<transport::Queue*>> queues(o.io_threads);
    std::vector<uint32_t> served;
    for (uint32_t q = 0; q < device.num_queues(); ++q) {
      const int shard = host::ShardOfQueue(o, q);
      if (shard >= 0) {
        queues[static_cast<size_t>(shard)].push_back(&device.queue(q));
        served.push_back(q);
      }
    }
    ATP_ASSIGN_OR_RETURN(QueueClaim claim, QueueClaim::Take(device, served, "a ParameterServer"));
    impl->claim_ = std::move(claim);
    for (uint32_t t = 0; t < o.io_threads; ++t) {
      if (queues[t].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ParameterServerOptions.io_threads: thread ", t, " would serve no queue of the ",
            device.num_queues(), "-queue device (server ", o.server_index, " of ",
            o.server_count, ")"));
      }
      ATP_ASSIGN_OR_RETURN(std::unique_ptr<host::PsShard> shard,
                           host::PsShard::Create(o, t, device.address()));
      impl->loops_.push_back(std::make_unique<host::PsIoLoop>(
          std::move(shard), std::move(queues[t]), o.base_port, o.max_burst));
    }
    for (uint32_t t = 0; t < o.io_threads; ++t) {
      host::PsIoLoop* loop = impl->loops_[t].get();
      ATP_RETURN_IF_ERROR(impl->threads_.Run(absl::StrCat("atp-ps", o.server_index, "-t", t),
                                             loop->wait_fds(),
                                             [loop](TimePoint now) { return loop->Step(now); }));
    }
    return impl;
  }

  ~ParameterServerImpl() {
    threads_.StopAll();
    loops_.clear();  // frames back to the device's pools before the device goes
  }

  ParameterServerStats stats() const {
    ParameterServerStats total;
    for (const auto& loop : loops_) Accumulate(loop->statistics(), total);
    return total;
  }

 private:
  ParameterServerImpl(ParameterServerOptions options, std::unique_ptr<transport::Device> owned)
      : options_(std::move(options)),
        owned_device_(std::move(owned)),
        threads_(options_.shared_io_threads, options_.polling) {}

  const ParameterServerOptions options_;
  std::unique_ptr<transport::Device> owned_device_;
  std::vector<std::unique_ptr<host::PsIoLoop>> loops_;
  internal::LoopThreads threads_;  // shard t's loop runs as threads_'s loop t
  std::optional<QueueClaim> claim_;  // the device queues the shards serve, while this runs
};

class EmbeddedParameterServerImpl {
 public:
  static absl::StatusOr<std::unique_ptr<EmbeddedParameterServerImpl>> Create(
      ParameterServerOptions options, const transport::DeviceAddress& self) {
    ATP_RETURN_IF_ERROR(options.Validate());
    std::unique_ptr<EmbeddedParameterServerImpl> impl(
        new EmbeddedParameterServerImpl(std::move(options)));
    for (uint32_t s = 0; s < impl->options_.io_threads; ++s) {
      auto shard = std::make_unique<Shard>();
      ATP_ASSIGN_OR_RETURN(shard->engine, host::PsShard::Create(impl->options_, s, self));
      impl->shards_.push_back(std::move(shard));
    }
    return impl;
  }

  wire::DecodeError HandleFrame(std::span<const uint8_t> frame, FrameSink& sink) {
    wire::FrameFields fields;
    wire::AtpMessage message;
    const wire::DecodeError error =
        wire::DecodeFrame(frame, options_.base_port, &fields, &message.payload);
    if (error != wire::DecodeError::kOk) return Reject(error);
    message.header = fields.header;
    Handle(message, sink, &fields);
    return error;
  }

  wire::DecodeError HandleMessage(std::span<const uint8_t> bytes, FrameSink& sink) {
    wire::AtpMessage message;
    const wire::DecodeError error = wire::DecodeMessage(bytes, &message);
    if (error != wire::DecodeError::kOk) return Reject(error);
    Handle(message, sink);
    return error;
  }

  size_t ReleaseOrphans() {
    const TimePoint now = host::MonotonicNow();
    size_t released = 0;
    for (const auto& shard : shards_) {
      std::lock_guard<std::mutex> lock(shard->mu);
      const ps::PsEngine& engine = shard->engine->engine();
      released += shard->engine->ScanOrphans(now, engine.total_slots());
      shard->engine->LogAbandoned();  // released here or while handling frames
    }
    return released;
  }

  ParameterServerStats stats() const {
    ParameterServerStats total;
    total.decode_errors = decode_errors_.load(std::memory_order_relaxed);
    total.frames_received = total.decode_errors;
    for (const auto& shard : shards_) {
      std::lock_guard<std::mutex> lock(shard->mu);
      total.frames_received += shard->frames_received;
      shard->engine->AddTo(total);
    }
    return total;
  }

 private:
  struct Shard {
    std::mutex mu;
    std::unique_ptr<host::PsShard> engine;  // under mu
    uint64_t frames_received = 0;              // under mu
  };

  explicit EmbeddedParameterServerImpl(ParameterServerOptions options)
      : options_(std::move(options)) {}

  wire::DecodeError Reject(wire::DecodeError error) {
    decode_errors_.fetch_add(1, std::memory_order_relaxed);
    return error;
  }

  // Handle: `fields`, when the message came in a frame, carries its IPv4 TOS.
  void Handle(wire::AtpMessage& message, FrameSink& sink,
              const wire::FrameFields* fields = nullptr) {
    // A queue another PS serves goes to shard 0, whose engine counts it
    // (wrong_shard).
    const int index = host::ShardOfQueue(options_, message.header.queue());
    Shard& shard = *shards_[index < 0 ? 0 : static_cast<size_t>(index)];
    const TimePoint now = host::MonotonicNow();
    std::lock_guard<std::mutex> lock(shard.mu);
    ++shard.frames_received;
    if (fields != nullptr) {
      if (!shard.engine->Admits(*fields)) return;
      shard.engine->CarryCongestion(*fields, message);
    }
    shard.engine->OnMessage(message, now, sink);
    // Name the workers that long-incomplete fragments wait for, as the
    // threaded PS does from its loop (rate-limited inside). Live workers keep
    // resending what is incomplete, so frames keep coming while there is
    // anything to report.
    if (shard.engine->engine().live_slots() > 0) shard.engine->ReportWaiting(now, sink);
  }

  const ParameterServerOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> decode_errors_{0};
};

}  // namespace internal

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Start(
    ParameterServerOptions options, transport::Device& device) {
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<internal::ParameterServerImpl> impl,
                       internal::ParameterServerImpl::Start(std::move(options), device, nullptr));
  return std::unique_ptr<ParameterServer>(new ParameterServer(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Start(
    ParameterServerOptions options, std::unique_ptr<transport::Device> device) {
  if (device == nullptr) return absl::InvalidArgumentError("ParameterServer::Start: null device");
  transport::Device& ref = *device;
  ATP_ASSIGN_OR_RETURN(
      std::unique_ptr<internal::ParameterServerImpl> impl,
      internal::ParameterServerImpl::Start(std::move(options), ref, std::move(device)));
  return std::unique_ptr<ParameterServer>(new ParameterServer(std::move(impl)));
}

ParameterServer::ParameterServer(std::unique_ptr<internal::ParameterServerImpl> impl)
    : impl_(std::move(impl)) {}
ParameterServer::~ParameterServer() = default;

ParameterServerStats ParameterServer::stats() const { return impl_->stats(); }

absl::StatusOr<std::unique_ptr<EmbeddedParameterServer>> EmbeddedParameterServer::Create(
    ParameterServerOptions options, transport::DeviceAddress self) {
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<internal::EmbeddedParameterServerImpl> impl,
                       internal::EmbeddedParameterServerImpl::Create(std::move(options), self));
  return std::unique_ptr<EmbeddedParameterServer>(new EmbeddedParameterServer(std::move(impl)));
}

EmbeddedParameterServer::EmbeddedParameterServer(
    std::unique_ptr<internal::EmbeddedParameterServerImpl> impl)
    : impl_(std::move(impl)) {}
EmbeddedParameterServer::~EmbeddedParameterServer() = default;

wire::DecodeError EmbeddedParameterServer::HandleFrame(std::span<const uint8_t> frame,
                                                       FrameSink& sink) {
  return impl_->HandleFrame(frame, sink);
}

wire::DecodeError EmbeddedParameterServer::HandleMessage(std::span<const uint8_t> message,
                                                         FrameSink& sink) {
  return impl_->HandleMessage(message, sink);
}

size_t EmbeddedParameterServer::ReleaseOrphans() { return impl_->ReleaseOrphans(); }

ParameterServerStats EmbeddedParameterServer::stats() const { return impl_->stats(); }

}  // namespace atp
