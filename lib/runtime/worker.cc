// lib/runtime/worker.cc: atp::Worker (atp/worker.h) and its implementation.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "atp/failure.h"
#include "atp/skip_reduce.h"
#include "atp/status_macros.h"
#include "atp/wire.h"
#include "atp/worker.h"
#include "lib/host/clock.h"
#include "lib/host/worker_config.h"
#include "lib/logging/log.h"
#include "lib/runtime/worker_impl.h"

namespace atp::internal {
namespace {

// Overlap: whether [a, a + a_size) and [b, b + b_size) share a byte.
bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// OperationCheckOff: ATP_BENCH_SKIP_OPERATION_CHECK=1 in the environment, for
// benchmarks only (bench/RESULTS.md measures the check's cost side by side):
// the Worker declares no operation to the PS (no kOpBegin) and delivers
// results without its confirmation, so a size mismatch between workers goes
// back to returning wrong values. Never an option of the API; said loudly.
bool OperationCheckOff() {
  static const bool off = [] {
    const char* value = std::getenv("ATP_BENCH_SKIP_OPERATION_CHECK");
    if (value == nullptr || absl::string_view(value) != "1") return false;
    Logger().warn(
        "ATP_BENCH_SKIP_OPERATION_CHECK=1: operations are not checked across workers (benchmarks "
        "only: a mismatch returns wrong values)");
    return true;
  }();
  return off;
}
}  // namespace

absl::StatusOr<std::unique_ptr<WorkerImpl>> WorkerImpl::Create(
    WorkerOptions options, transport::Device& device, std::unique_ptr<transport::Device> owned) {
  ATP_RETURN_IF_ERROR(options.Validate());
  if (device.num_queues() < options.job.io_threads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "WorkerOptions.job.io_threads: ", options.job.io_threads, " but the ",
        absl::string_view(device.backend().data(), device.backend().size()),
        " device has only ", device.num_queues(), " queues"));
  }
  if (device.base_port() != options.job.base_port) {
    return absl::InvalidArgumentError(absl::StrCat("WorkerOptions.job.base_port: ",
                                                   options.job.base_port, " but the device uses ",
                                                   device.base_port()));
  }
  scheduler::FragmentSchedulerConfig config;
  config.queues = options.job.io_threads;
  config.min_piece_fragments = options.job.scheduler.min_piece_fragments;
  config.max_piece_fragments = options.job.scheduler.max_piece_fragments;
  ATP_ASSIGN_OR_RETURN(scheduler::FragmentScheduler scheduler,
                       scheduler::FragmentScheduler::Create(config));
  std::vector<uint32_t> queues(options.job.io_threads);
  for (uint32_t q = 0; q < options.job.io_threads; ++q) queues[q] = q;
  ATP_ASSIGN_OR_RETURN(QueueClaim claim, QueueClaim::Take(device, queues, "a Worker"));
  std::unique_ptr<WorkerImpl> impl(
      new WorkerImpl(std::move(options), device, std::move(owned), std::move(scheduler)));
  impl->claim_ = std::move(claim);
  ATP_RETURN_IF_ERROR(impl->StartQueues());
  return impl;
}

WorkerImpl::WorkerImpl(WorkerOptions options, transport::Device& device,
                       std::unique_ptr<transport::Device> owned,
                       scheduler::FragmentScheduler scheduler)
    : options_(std::move(options)),
      owned_device_(std::move(owned)),
      device_(device),
      total_workers_(options_.job.layout.total_workers()),
      finished_(std::make_shared<std::atomic<uint64_t>>(0)),
      scheduler_(std::move(scheduler)),
      threads_(options_.shared_io_threads, options_.polling) {}

absl::Status WorkerImpl::StartQueues() {
  const int rank = options_.job.layout.RankOf(options_.rack, options_.worker_in_rack);
  for (uint32_t q = 0; q < options_.job.io_threads; ++q) {
    host::WorkerIoLoopConfig config;
    config.self = device_.address();
    config.ps = options_.parameter_servers[q % options_.parameter_servers.size()];
    config.parameter_source_check = options_.parameter_source_check;
    config.base_port = options_.job.base_port;
    config.max_burst = options_.max_burst;
    config.total_workers = total_workers_;
    config.stall_timeout = host::ToTimeDelta(options_.job.stall_timeout);
    config.failure = failure_;
    config.incarnation = incarnation_;
    config.io_threads = options_.job.io_threads;
    config.join_at_start = true;
    config.confirm_operations = !OperationCheckOff();
    ATP_ASSIGN_OR_RETURN(
        std::unique_ptr<host::WorkerIoLoop> loop,
        host::WorkerIoLoop::Create(config, host::ToWorkerQueueConfig(options_, q),
                                      device_.queue(q)));
    loops_.push_back(std::move(loop));
  }
  for (uint32_t q = 0; q < options_.job.io_threads; ++q) {
    host::WorkerIoLoop* loop = loops_[q].get();
    if (absl::Status s = threads_.Run(absl::StrCat("atp-w", rank, "-q", q), {loop->wait_fd()},
                                      [loop](TimePoint now) { return loop->Step(now); });
        !s.ok()) {
      Shutdown();
      return s;
    }
  }
  return absl::OkStatus();
}

WorkerImpl::~WorkerImpl() { Shutdown(); }

void WorkerImpl::Shutdown() {
  if (threads_.RunsOnCallingThread()) {
    // Stopping the I/O threads waits for the step in progress: the one that
    // called this. Said and stopped here rather than a silent hang.
    internal::Logger().critical(
        "atp::Worker destroyed on one of its own I/O threads (inside an OnDone callback?): "
        "it would wait for itself forever; destroy it from another thread (atp/handle.h)");
    std::abort();
  }
  threads_.StopAll();
  const absl::Status cancelled = absl::CancelledError("the Worker was destroyed");
  for (auto& loop : loops_) loop->Abandon(cancelled);
  // Loops return their frames to the device's pools: before the device goes.
  loops_.clear();
}

uint64_t WorkerImpl::RandomIncarnation() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

absl::Status WorkerImpl::CheckUsable() const {
  if (!failure_->failed()) return absl::OkStatus();
  const absl::Status first = failure_->first();
  absl::Status refused = absl::FailedPreconditionError(
      absl::StrCat("the Worker is unusable since an operation failed: ", first.message()));
  if (std::optional<Failure> failure = FailureOf(first)) {
    refused = WithFailure(std::move(refused), *failure);
  }
  return refused;
}

absl::Status WorkerImpl::ValidateOpOptions(const OpOptions& op_options) const {
  if (op_options.reduction != Reduction::kSum && op_options.reduction != Reduction::kAverage) {
    return absl::InvalidArgumentError(absl::StrCat("OpOptions.reduction: ",
                                                   static_cast<int>(op_options.reduction),
                                                   " is not a Reduction"));
  }
  ATP_RETURN_IF_ERROR(op_options.skip.Validate(total_workers_, "OpOptions.skip"));
  if (op_options.skip.all_gather_steps != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("OpOptions.skip.all_gather_steps: ", op_options.skip.all_gather_steps,
                     " but ATP has no all-gather steps to skip (must be 0; skip fragments with "
                     "reduce_scatter_steps)"));
  }
  return absl::OkStatus();
}

std::shared_ptr<OpState> WorkerImpl::SubmitLocked(std::span<const float> input,
                                                  std::span<float> output,
                                                  const OpOptions& op_options) {
  // SkipReduce: the same plan on every worker (validated by the caller).
  std::optional<SkipPlan> plan;
  if (op_options.skip.mode != SkipMode::kNone) {
    plan = *SkipPlan::Create(op_options.skip, total_workers_);
  }
  const uint64_t op_fragments =
      (input.size() + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
  pieces_.clear();
  scheduler_.Assign(input.size(), pieces_);
  auto op = std::make_shared<OpState>(next_op_id_++, static_cast<uint32_t>(pieces_.size()),
                                      finished_);
  started_.fetch_add(1, std::memory_order_relaxed);
  if (pieces_.empty()) {
    op->Finish(absl::OkStatus());
    return op;
  }
  for (const scheduler::Piece& piece : pieces_) {
    host::PieceRequest request;
    request.op = op;
    request.input = input.subspan(piece.first_value, piece.values);
    request.output = output.subspan(piece.first_value, piece.values);
    request.reduction = op_options.reduction;
    request.average_divisor = plan.has_value() ? plan->AverageDivisor() : total_workers_;
    request.fragments = piece.fragments;
    request.op_values = input.size();
    request.skip.plan = plan;
    request.skip.op_fragments = op_fragments;
    request.skip.first_fragment = piece.first_value / wire::kValuesPerFragment;
    loops_[piece.queue]->Submit(std::move(request));
  }
  for (const scheduler::Piece& piece : pieces_) threads_.Wake(piece.queue);
  return op;
}

absl::StatusOr<Handle> WorkerImpl::PushPull(std::span<const float> input, std::span<float> output,
                                            OpOptions op_options) {
  ATP_RETURN_IF_ERROR(CheckUsable());
  if (input.size() != output.size()) {
    return absl::InvalidArgumentError(absl::StrCat("PushPull: input has ", input.size(),
                                                   " values, output ", output.size()));
  }
  if (static_cast<const void*>(input.data()) != static_cast<const void*>(output.data()) &&
      Overlap(input.data(), input.size_bytes(), output.data(), output.size_bytes())) {
    return absl::InvalidArgumentError(
        "PushPull: input and output overlap (only exactly the same span is allowed)");
  }
  ATP_RETURN_IF_ERROR(ValidateOpOptions(op_options));
  std::lock_guard<std::mutex> lock(mu_);
  return HandleAccess::Make(SubmitLocked(input, output, op_options));
}

absl::StatusOr<Handle> WorkerImpl::Push(TensorKey key, std::span<const float> input,
                                        OpOptions op_options) {
  ATP_RETURN_IF_ERROR(CheckUsable());
  ATP_RETURN_IF_ERROR(ValidateOpOptions(op_options));
  std::lock_guard<std::mutex> lock(mu_);
  if (pushed_.contains(key)) {
    return absl::AlreadyExistsError(
        absl::StrCat("Push: key ", key, " holds a Push not yet pulled or discarded"));
  }
  auto result = std::make_shared<std::vector<float>>(input.size());
  std::shared_ptr<OpState> op = SubmitLocked(input, *result, op_options);
  op->set_keep_alive(result);
  pushed_.emplace(key, Pushed{result, op});
  return HandleAccess::Make(std::move(op));
}

absl::StatusOr<Handle> WorkerImpl::Pull(TensorKey key, std::span<float> output) {
  Pushed pushed;
  std::shared_ptr<OpState> pull;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pushed_.find(key);
    if (it == pushed_.end()) {
      return absl::NotFoundError(absl::StrCat("Pull: no Push holds key ", key));
    }
    if (it->second.result->size() != output.size()) {
      return absl::InvalidArgumentError(absl::StrCat("Pull: key ", key, " holds ",
                                                     it->second.result->size(),
                                                     " values, output has ", output.size()));
    }
    pushed = std::move(it->second);
    pushed_.erase(it);
    pull = std::make_shared<OpState>(next_op_id_++, 0, finished_);
    started_.fetch_add(1, std::memory_order_relaxed);
  }
  pushed.op->OnFinish([pull, result = pushed.result, output](const absl::Status& status) {
    if (status.ok()) std::copy(result->begin(), result->end(), output.begin());
    pull->Finish(status);
  });
  return HandleAccess::Make(std::move(pull));
}

absl::Status WorkerImpl::Discard(TensorKey key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (pushed_.erase(key) == 0) {
    return absl::NotFoundError(absl::StrCat("Discard: no Push holds key ", key));
  }
  return absl::OkStatus();
}

WorkerStats WorkerImpl::stats() const {
  WorkerStats s;
  for (const auto& loop : loops_) {
    WorkerQueueStatistics q = loop->statistics();
    s.frames_sent += q.frames_sent;
    s.fragments_sent += q.fragments_sent;
    s.fragments_skipped += q.fragments_skipped;
    s.fragments_not_contributed += q.fragments_not_contributed;
    s.pulls_sent += q.pulls_sent;
    s.retransmissions += q.retransmissions;
    s.timeouts += q.timeouts;
    s.spurious_timeouts += q.spurious_timeouts;
    s.loss_events += q.loss_events;
    s.collisions += q.collisions;
    s.ecn_marks += q.ecn_marks;
    s.window_reductions += q.window_reductions;
    s.overflow_requests += q.overflow_requests;
    s.float_results += q.float_results;
    s.parameter_packets += q.parameter_packets;
    s.frames_received += q.frames_received;
    s.decode_errors += q.decode_errors;
    s.source_refused += q.source_refused;
    s.ignored += q.ignored;
    s.window += q.window;
    s.queues.push_back(q);
  }
  // Read finished before started: a snapshot never shows more finished than started.
  s.operations_finished = finished_->load(std::memory_order_relaxed);
  s.operations_started = started_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace atp::internal

namespace atp {

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(WorkerOptions options,
                                                       transport::Device& device) {
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<internal::WorkerImpl> impl,
                       internal::WorkerImpl::Create(std::move(options), device, nullptr));
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(WorkerOptions options,
                                                       std::unique_ptr<transport::Device> device) {
  if (device == nullptr) return absl::InvalidArgumentError("Worker::Create: null device");
  transport::Device& ref = *device;
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<internal::WorkerImpl> impl,
                       internal::WorkerImpl::Create(std::move(options), ref, std::move(device)));
  return std::unique_ptr<Worker>(new Worker(std::move(impl)));
}

Worker::Worker(std::unique_ptr<internal::WorkerImpl> impl) : impl_(std::move(impl)) {}
Worker::~Worker() = default;

absl::StatusOr<Handle> Worker::PushPull(std::span<const float> input, std::span<float> output,
                                        OpOptions op_options) {
  return impl_->PushPull(input, output, op_options);
}

absl::StatusOr<Handle> Worker::Push(TensorKey key, std::span<const float> input,
                                    OpOptions op_options) {
  return impl_->Push(key, input, op_options);
}

absl::StatusOr<Handle> Worker::Pull(TensorKey key, std::span<float> output) {
  return impl_->Pull(key, output);
}

absl::Status Worker::Discard(TensorKey key) { return impl_->Discard(key); }

WorkerStats Worker::stats() const { return impl_->stats(); }

const WorkerOptions& Worker::options() const { return impl_->options(); }

}  // namespace atp
