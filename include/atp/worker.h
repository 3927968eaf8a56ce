// atp/worker.h: a worker of an ATP job: asynchronous aggregation of float32
// tensors through the network's switches and the job's parameter server(s).
//
//   atp::WorkerOptions options = ...;                  // see atp/options.h
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<atp::Worker> worker,
//                        atp::Worker::Create(options, *device));
//   std::vector<float> grad(1 << 20), sum(1 << 20);
//   ATP_ASSIGN_OR_RETURN(atp::Handle h, worker->PushPull(grad, sum));
//   ATP_RETURN_IF_ERROR(h.Wait(absl::Seconds(10)));  // sum = the job's aggregate
//
// Semantics. ATP aggregates collectively: every worker of a job issues the
// same sequence of aggregating operations (PushPull and Push), with the same
// sizes, in the same order; the k-th such operation of every worker forms one
// aggregation. Operations may be of any size (far beyond one window) and
// many may be outstanding at once; each returns a Handle at once. Workers
// that disagree on an operation's size fail it with kMismatch
// (atp/failure.h) instead of returning values: a worker delivers a result
// only once the PS confirmed that every worker declared the operation alike.
//
// - PushPull(input, output): contributes `input`; when the handle finishes,
//   `output` holds the aggregate of every worker's input of this operation,
//   bit-identical on every worker: per element, the exact sum of the workers'
//   quantized values (round(x * scale) as int32) divided by scale, or, for
//   every element of a fragment (62 values) in which a worker's value is
//   NaN or infinite or a value or the sum overflows the int32 range, the
//   float32 rounding of the sum of the float32 values (the fragment travels
//   as float32: ATP-SPEC section 8). With
//   Reduction::kAverage that result is then divided by the job's worker count.
// - Push(key, input): the same aggregation, with the result kept inside the
//   Worker under `key` instead of written to caller memory. Its handle
//   finishes when the aggregate has arrived.
// - Pull(key, output): local, sends nothing: copies the result of the earlier
//   Push(key) into `output` once that Push has finished (at once, on the
//   calling thread, if it has; else on the I/O thread that finishes it), and
//   releases `key`. Its handle finishes with the Push's status. Pull is not
//   part of the collective sequence: workers may Pull in any order, or
//   Discard instead.
//
// Ownership: `input` and `output` are the caller's; both must stay alive, and
// `input` unchanged, until the handle finishes (fragments are re-encoded from
// `input` when they are resent); a failed operation's handle, too, finishes
// only once no I/O thread touches either. `output` may be exactly `input`
// (in place); any other overlap is an error. A failed call (a Status instead
// of a Handle) starts nothing.
//
// Failures (atp/failure.h): an operation whose fragments stop completing for
// JobOptions::stall_timeout fails with a status naming the cause (the PS
// unreachable, the PS waiting for named workers, a stall) and a structured
// atp::Failure (atp::FailureOf). The Worker is then unusable: every other
// operation still running finishes with the same status, and later Push and
// PushPull calls fail with FailedPreconditionError naming the first failure.
// A caller's own deadline (Handle::Wait) is no failure: the operation goes
// on.
//
// Threads: the Worker runs JobOptions::io_threads I/O threads of its own.
// Its methods may be called from any thread; calls are serialized inside,
// and the collective order is the order in which the calls acquire that
// serialization, so a job whose workers call from several threads must order
// those calls itself. Destroying the Worker stops its threads; operations
// still running finish with CancelledError (their outputs are then
// unspecified).
#ifndef ATP_WORKER_H_
#define ATP_WORKER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "atp/failure.h"
#include "atp/handle.h"
#include "atp/options.h"
#include "atp/skip_reduce.h"
#include "atp/transport.h"

namespace atp {

namespace internal {
class WorkerImpl;
}  // namespace internal

// Reduction: what an aggregating operation writes as its result.
enum class Reduction : uint8_t {
  kSum,      // the sum over the job's workers
  kAverage,  // the sum divided (float32 division) by the job's worker count
};

// OpOptions: per-operation choices. All workers must use the same ones for
// the same operation (kAverage is applied locally, so a mismatch only
// changes that worker's result; a mismatched `skip` leaves the job's
// fragment streams out of step and is not detected).
struct OpOptions {
  Reduction reduction = Reduction::kSum;
  // skip: SkipReduce on in-network aggregation (docs/skipreduce.md), in one
  // of two variants (skip.variant). kWholeFragments (the default): whole
  // fragments left out. The operation's F fragments are cut into N slices
  // (SliceRange(F, N, j), N = the job's workers) and the k =
  // skip.reduce_scatter_steps slices SkipPlan::SliceDropped names are left
  // out by every worker: nothing is sent for them, the switches and the PS
  // never see them, and their result is zero. Static mode drops slices
  // 0..k-1; random mode shifts them by RandomShift(seed, iteration, tensor),
  // so every worker computes the same set with no communication (pass the
  // same seed, iteration and tensor, e.g. the bucket index, on every
  // worker; SkipPolicy::ForTensor builds them, selective SkipReduce
  // included). With Reduction::kAverage the result is divided by
  // SkipPlan::AverageDivisor(): N, or N - k with SkipDivisor::kContributors
  // (DropReduce). kContributions: every fragment is aggregated, but only
  // N - k workers contribute to each (SkipPlan::ContributionIncluded, the
  // ring's rule: slice j lacks workers j - shift .. j - shift + k - 1); the
  // others send nothing for it and still receive its result. Upstream
  // traffic falls by k/N, downstream does not. The job's parameter servers
  // must accept it (ParameterServerJobOptions::contribution_skipping): a PS
  // that does not drops the packets (shape mismatches) and the operation
  // never completes. skip.all_gather_steps must be 0 (ATP has no all-gather
  // steps). Invalid options: InvalidArgumentError naming "OpOptions.skip.<field>".
  SkipOptions skip;
};

// TensorKey: names a Push's result until it is pulled.
using TensorKey = uint64_t;

// WorkerQueueStatistics: one I/O thread (queue) of a worker.
struct WorkerQueueStatistics {
  uint32_t queue = 0;
  uint64_t frames_sent = 0;         // frames the transport took (first sends + resends)
  uint64_t fragments_sent = 0;      // first transmissions
  uint64_t fragments_skipped = 0;   // left out by OpOptions::skip: never sent
  // OpOptions::skip with SkipVariant::kContributions: fragments this worker
  // did not contribute to (nothing sent; it waited for their results), and
  // the kPull frames it sent for lost results of those instead of resends.
  uint64_t fragments_not_contributed = 0;
  uint64_t pulls_sent = 0;
  uint64_t retransmissions = 0;     // resends: loss, timeout and overflow (fp) resends
  uint64_t timeouts = 0;            // retransmission timeouts
  uint64_t spurious_timeouts = 0;   // of those, whose resent position was answered twice:
                                    // spurious (or resent by another worker too)
  uint64_t loss_events = 0;         // fragments declared lost by reordering
  uint64_t collisions = 0;          // parameter packets carrying a new aggregator index
  uint64_t ecn_marks = 0;           // parameter packets with ECN set
  uint64_t window_reductions = 0;   // congestion window halvings (on ECN marks and losses,
                                    // at most one per round trip)
  uint64_t overflow_requests = 0;   // requests to resend as float32 (a repeated request
                                    // for one fragment counts again)
  uint64_t float_results = 0;       // parameter packets that completed a fragment on the
                                    // float32 path (an overflow: summed at the PS)
  uint64_t parameter_packets = 0;   // parameter packets that completed a fragment
  uint64_t frames_received = 0;     // frames the transport handed over
  uint64_t decode_errors = 0;       // frames wire::DecodeFrame rejected
  uint64_t control_frames = 0;      // control frames from the PS understood (status)
  uint64_t control_rejected = 0;    // control frames that did not decode or belong elsewhere
  uint64_t source_refused = 0;      // valid frames not from this queue's PS
                                    // (WorkerOptions::parameter_source_check)
  uint64_t ignored = 0;             // valid frames not for an in-flight fragment (stale,
                                    // duplicate, another job)
  uint64_t tx_backpressure = 0;     // bursts the transport took only in part
  uint32_t window = 0;              // congestion window now, fragments
  uint32_t ssthresh = 0;
  uint64_t in_flight = 0;           // fragments sent, not acknowledged
  uint64_t queued_fragments = 0;    // assigned to this queue, not yet sent
  uint64_t fragments_assigned = 0;  // by the scheduler, since Create
  absl::Duration srtt;              // smoothed round-trip time
  absl::Duration rto;               // retransmission timeout now
};

// WorkerStats: a snapshot. Each queue publishes its counters whenever it
// completes a piece of an operation, and at least every millisecond while it
// runs, so a snapshot taken after a handle finished includes that operation.
struct WorkerStats {
  // Sums over the queues (see WorkerQueueStatistics).
  uint64_t frames_sent = 0;
  uint64_t fragments_sent = 0;
  uint64_t fragments_skipped = 0;
  uint64_t fragments_not_contributed = 0;
  uint64_t pulls_sent = 0;
  uint64_t retransmissions = 0;
  uint64_t timeouts = 0;
  uint64_t spurious_timeouts = 0;
  uint64_t loss_events = 0;
  uint64_t collisions = 0;
  uint64_t ecn_marks = 0;
  uint64_t window_reductions = 0;
  uint64_t overflow_requests = 0;
  uint64_t float_results = 0;
  uint64_t parameter_packets = 0;
  uint64_t frames_received = 0;
  uint64_t decode_errors = 0;
  uint64_t source_refused = 0;
  uint64_t ignored = 0;
  uint32_t window = 0;  // sum of the queues' windows
  // Operations (Push, Pull and PushPull) started and finished.
  uint64_t operations_started = 0;
  uint64_t operations_finished = 0;
  std::vector<WorkerQueueStatistics> queues;
};

class Worker {
 public:
  // Create: validates `options` (InvalidArgumentError naming the field),
  // checks them against `device` (at least job.io_threads queues, the same
  // base_port), builds one engine per queue and starts the I/O threads, which
  // own device queues 0..io_threads-1 from then on (FailedPreconditionError
  // when another Worker or ParameterServer of this process runs on one of
  // them). `device` is not owned and must outlive the Worker; the second
  // form owns it.
  static absl::StatusOr<std::unique_ptr<Worker>> Create(WorkerOptions options,
                                                        transport::Device& device);
  static absl::StatusOr<std::unique_ptr<Worker>> Create(WorkerOptions options,
                                                        std::unique_ptr<transport::Device> device);

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker();

  // PushPull: see the header comment. InvalidArgumentError when the sizes
  // differ, the spans overlap other than exactly, or op_options.skip is
  // invalid for the job.
  absl::StatusOr<Handle> PushPull(std::span<const float> input, std::span<float> output,
                                  OpOptions op_options = {});

  // Push: see the header comment. AlreadyExistsError when `key` holds a Push
  // not yet pulled or discarded.
  absl::StatusOr<Handle> Push(TensorKey key, std::span<const float> input,
                              OpOptions op_options = {});

  // Pull: see the header comment. NotFoundError for a key with no Push;
  // InvalidArgumentError when output's size differs from the Push's input.
  absl::StatusOr<Handle> Pull(TensorKey key, std::span<float> output);

  // Discard: releases `key` without copying its result (a running Push goes
  // on; its result is dropped when it arrives). NotFoundError for an unknown key.
  absl::Status Discard(TensorKey key);

  // stats: any thread.
  WorkerStats stats() const;

  const WorkerOptions& options() const;

 private:
  explicit Worker(std::unique_ptr<internal::WorkerImpl> impl);

  std::unique_ptr<internal::WorkerImpl> impl_;
};

}  // namespace atp

#endif  // ATP_WORKER_H_
