// atp/parameter_server.h: the parameter server (PS) of ATP jobs: it finishes
// whatever aggregation the switches did not do and sends the parameter
// packets (results) to the jobs' workers (ATP-SPEC section 6).
//
// Two ways to run it:
//
// - ParameterServer: runs its own I/O threads on a transport device.
//
//     ATP_ASSIGN_OR_RETURN(std::unique_ptr<atp::ParameterServer> ps,
//                          atp::ParameterServer::Start(options, *device));
//     ... the jobs run ...
//     ps.reset();                                   // stops the threads
//
// - EmbeddedParameterServer: a framework that owns its threads and its
//   network I/O hands it the frames it received; the PS returns the frames to
//   send through a FrameSink. No thread, no transport, no clock of its own.
//
//     class Out : public atp::FrameSink {
//       void SendFrame(std::span<const uint8_t, atp::wire::kFrameBytes> f) override {
//         my_nic.Send(f);                            // copy it: the span dies after the call
//       }
//     };
//     ATP_ASSIGN_OR_RETURN(auto ps, atp::EmbeddedParameterServer::Create(options, self));
//     Out out;
//     for (auto& frame : received) ps->HandleFrame(frame, out);   // any framework thread
//
// Both serve the jobs in ParameterServerOptions; the workers' parameter
// packets come back to them through the network (kMulticast) or one frame per
// worker (kUnicast).
#ifndef ATP_PARAMETER_SERVER_H_
#define ATP_PARAMETER_SERVER_H_

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "atp/options.h"
#include "atp/transport.h"
#include "atp/wire.h"

namespace atp {

namespace internal {
class ParameterServerImpl;
class EmbeddedParameterServerImpl;
}  // namespace internal

// ParameterServerStats: counters since start, summed over threads or shards.
struct ParameterServerStats {
  // Frames.
  uint64_t frames_received = 0;  // frames handed to the PS
  uint64_t decode_errors = 0;    // rejected by wire::DecodeFrame / DecodeMessage
  uint64_t source_refused = 0;   // valid frames from a source the job does not name
                                 // (ParameterServerJobOptions::gradient_sources): dropped
  uint64_t frames_sent = 0;      // parameter packets and overflow requests, per copy
  uint64_t ce_to_ecn = 0;        // gradient frames marked CE on the way (by a switch
                                 // that only forwarded them): their ecn bit set
  uint64_t tx_dropped = 0;       // frames not sent: no transmit buffer or no room (the
                                 // workers' resends recover them)
  // Messages given to the engine, by outcome (see lib/ps/ps_counters.h): every
  // message counts in `gradients` and in exactly one outcome.
  uint64_t gradients = 0;
  uint64_t contributions = 0;
  uint64_t duplicates = 0;
  uint64_t integer_on_float_path = 0;
  uint64_t param_resent = 0;
  uint64_t stale = 0;
  uint64_t ahead = 0;
  uint64_t unknown_job = 0;
  uint64_t wrong_shard = 0;
  uint64_t shape_mismatch = 0;
  uint64_t malformed = 0;
  uint64_t unexpected_ack = 0;
  uint64_t control = 0;  // control frames the engine was given (the host normally takes them)
  // Control frames (docs/protocol.md "Control frames"), taken by the host.
  uint64_t control_received = 0;   // understood and acted on
  uint64_t control_rejected = 0;   // did not decode (magic, version, type, direction)
  uint64_t status_sent = 0;        // status messages sent (all kinds), per message
  uint64_t join_requests = 0;      // of those, asking a queue's workers to join (gradients
                                   // outside the window: a restart or a new run)
  uint64_t rebuilds = 0;           // queues rebuilt from the workers' joins (restart, new run)
  uint64_t stale_joins = 0;        // joins answering another PS's join request (the dead
                                   // PS's, read after a restart): ignored
  uint64_t unsynchronized_gradients = 0;  // gradients held back on a queue a new run was
                                          // joining (or a worker restarted alone had)
  uint64_t unsynchronized_declarations = 0;  // kOpBegins held back likewise: compared
                                             // only within one run, declared again
  uint64_t replay_requests = 0;    // of status_sent, asking a worker to replay parameter
                                   // packets some workers lost with a restarted PS
  uint64_t replays = 0;            // replayed parameter packets taken as their position's
                                   // result and multicast
  uint64_t mismatches = 0;         // joins or operations that disagreed with the job's
  uint64_t operations_confirmed = 0;  // pieces of operations every worker declared alike
  // kPull frames (SkipReduce's contribution variant; not in `gradients`):
  // answered with a completed fragment's parameter packet, or ignored.
  uint64_t pulls_answered = 0;
  uint64_t pulls_ignored = 0;
  // Events.
  uint64_t completed = 0;            // fragments completed (integer and float)
  uint64_t fp_completed = 0;         // of those, on the float32 overflow path
  uint64_t switch_completed = 0;     // of those, integer fragments that arrived whole from
                                     // the switches (one contribution, every rack summed);
                                     // completed - fp_completed - switch_completed: summed
                                     // here from several contributions
  uint64_t collisions_rehashed = 0;  // completions that carried a new aggregator index
  uint64_t overflow_requests = 0;
  uint64_t orphans_released = 0;  // partial fragments (integer or float32) dropped after
                                  // ParameterServerOptions::orphan_timeout without a
                                  // frame: their workers died or gave up
};

// FrameSink: where a PS puts the frames it wants sent.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // SendFrame: one whole 306-byte ATP frame (destination inside: a worker's
  // or the job's multicast group's IPv4 and MAC, UDP port base_port + queue).
  // Called synchronously; the span is valid during the call only. Must not
  // call back into the PS.
  virtual void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) = 0;
  // FrameBuffer (optional): 306 bytes the sink owns (a transmit buffer) where
  // the PS may write its next frame in place, then pass it to SendFrame,
  // which sends it without a copy; nullptr (the default): the PS writes into
  // its own buffer and SendFrame copies. Valid until that SendFrame; asked
  // again before it, the same buffer.
  virtual uint8_t* FrameBuffer() { return nullptr; }
};

class ParameterServer {
 public:
  // Start: validates `options`, checks them against `device` (the same
  // base_port; the queues served must exist: see ParameterServerOptions) and
  // starts options.io_threads threads, which own the device's served queues
  // from then on (FailedPreconditionError when another Worker or
  // ParameterServer of this process runs on one of them). `device` is not
  // owned and must outlive the server; the second form owns it.
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Start(ParameterServerOptions options,
                                                                transport::Device& device);
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Start(
      ParameterServerOptions options, std::unique_ptr<transport::Device> device);

  ParameterServer(const ParameterServer&) = delete;
  ParameterServer& operator=(const ParameterServer&) = delete;
  // Stops the threads (frames still in flight are dropped; workers resend).
  ~ParameterServer();

  // stats: any thread. Each thread publishes its counters after every burst
  // of frames it handled (so a snapshot may lag the frames it just sent by
  // that one burst) and every millisecond when idle.
  ParameterServerStats stats() const;

 private:
  explicit ParameterServer(std::unique_ptr<internal::ParameterServerImpl> impl);
  std::unique_ptr<internal::ParameterServerImpl> impl_;
};

class EmbeddedParameterServer {
 public:
  // Create: validates `options` (polling and max_burst are not used;
  // io_threads is the number of lock shards: frames of queues in different
  // shards are handled in parallel). `self` is the source address of the
  // frames it sends.
  static absl::StatusOr<std::unique_ptr<EmbeddedParameterServer>> Create(
      ParameterServerOptions options, transport::DeviceAddress self);

  EmbeddedParameterServer(const EmbeddedParameterServer&) = delete;
  EmbeddedParameterServer& operator=(const EmbeddedParameterServer&) = delete;
  ~EmbeddedParameterServer();

  // HandleFrame: one received 306-byte frame. Returns wire::DecodeError::kOk
  // when it was a valid ATP frame and went to the engine (which may still
  // count it as a duplicate, stale, another PS's queue, ...) or was refused
  // for its source (stats().source_refused), or why it was rejected. The
  // frames it causes go to `sink` before it returns, from the calling thread,
  // under the lock of the frame's shard: parameter packets, answers to
  // control frames, and at most once per waiting_report_interval per shard a
  // "waiting for workers" status naming the workers a long-incomplete
  // fragment lacks (as ParameterServer sends; docs/protocol.md "Failures,
  // runs and restarts"). Any thread.
  wire::DecodeError HandleFrame(std::span<const uint8_t> frame, FrameSink& sink);

  // HandleMessage: the same for a 264-byte ATP message, as a UDP socket
  // delivers it (a framework with its own sockets). Output is still whole
  // frames: the UDP payload to send is the frame from byte 42 on
  // (wire::kAtpOffset), to the socket of the destination's queue.
  wire::DecodeError HandleMessage(std::span<const uint8_t> message, FrameSink& sink);

  // ReleaseOrphans: releases the partial fragments no frame has touched for
  // longer than ParameterServerOptions::orphan_timeout (their workers died or
  // gave up; ATP-SPEC invariant 5), reading the monotonic clock. HandleFrame
  // already does this a little at a time, so call it only when frames may
  // have stopped: every orphan_timeout / 4 or so from an idle timer. Logs
  // (warning) what was released, naming the workers that never contributed.
  // Returns how many it released. Any thread (takes each shard's lock in turn).
  size_t ReleaseOrphans();

  // stats: any thread (takes each shard's lock briefly).
  ParameterServerStats stats() const;

 private:
  explicit EmbeddedParameterServer(std::unique_ptr<internal::EmbeddedParameterServerImpl> impl);
  std::unique_ptr<internal::EmbeddedParameterServerImpl> impl_;
};

}  // namespace atp

#endif  // ATP_PARAMETER_SERVER_H_
