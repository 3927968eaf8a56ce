// lib/runtime/worker_impl.h: what stands behind atp::Worker: the scheduler,
// one WorkerIoLoop per queue and the threads they run on (LoopThreads), and
// the table of pushed tensors waiting to be pulled.
#ifndef ATP_LIB_RUNTIME_WORKER_IMPL_H_
#define ATP_LIB_RUNTIME_WORKER_IMPL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "atp/handle.h"
#include "atp/options.h"
#include "atp/transport.h"
#include "atp/worker.h"
#include "lib/host/op_state.h"
#include "lib/host/worker_failure.h"
#include "lib/host/worker_io_loop.h"
#include "lib/runtime/loop_threads.h"
#include "lib/runtime/queue_claims.h"
#include "lib/scheduler/fragment_scheduler.h"

namespace atp::internal {

class WorkerImpl {
 public:
  // Create: `device` must outlive the result unless `owned` holds it.
  static absl::StatusOr<std::unique_ptr<WorkerImpl>> Create(
      WorkerOptions options, transport::Device& device, std::unique_ptr<transport::Device> owned);

  WorkerImpl(const WorkerImpl&) = delete;
  WorkerImpl& operator=(const WorkerImpl&) = delete;
  ~WorkerImpl();

  absl::StatusOr<Handle> PushPull(std::span<const float> input, std::span<float> output,
                                  OpOptions op_options);
  absl::StatusOr<Handle> Push(TensorKey key, std::span<const float> input, OpOptions op_options);
  absl::StatusOr<Handle> Pull(TensorKey key, std::span<float> output);
  absl::Status Discard(TensorKey key);
  WorkerStats stats() const;
  const WorkerOptions& options() const { return options_; }

 private:
  struct Pushed {
    std::shared_ptr<std::vector<float>> result;
    std::shared_ptr<OpState> op;
  };

  static uint64_t RandomIncarnation();
  WorkerImpl(WorkerOptions options, transport::Device& device,
             std::unique_ptr<transport::Device> owned, scheduler::FragmentScheduler scheduler);

  absl::Status StartQueues();
  // Submit: schedules one aggregating operation. mu_ held.
  std::shared_ptr<OpState> SubmitLocked(std::span<const float> input, std::span<float> output,
                                        const OpOptions& op_options);
  // CheckUsable: FailedPreconditionError naming the first failure (and
  // carrying its atp::Failure) once an operation failed (atp/failure.h).
  absl::Status CheckUsable() const;
  // ValidateOpOptions: InvalidArgumentError naming "OpOptions.<field>".
  absl::Status ValidateOpOptions(const OpOptions& op_options) const;
  void Shutdown();

  const WorkerOptions options_;
  std::unique_ptr<transport::Device> owned_device_;
  transport::Device& device_;
  std::optional<QueueClaim> claim_;  // queues 0..io_threads-1 of device_, while this runs
  const int total_workers_;
  const std::shared_ptr<std::atomic<uint64_t>> finished_;
  std::atomic<uint64_t> started_{0};
  // failure_: the first failure, shared with the loops.
  const std::shared_ptr<host::WorkerFailure> failure_ =
      std::make_shared<host::WorkerFailure>();
  // incarnation_: this Worker's random identity in its joins (a new Worker is
  // a new run, docs/protocol.md "Failures, runs and restarts").
  const uint64_t incarnation_ = RandomIncarnation();

  mutable std::mutex mu_;  // serializes submissions: the collective order
  scheduler::FragmentScheduler scheduler_;            // under mu_
  std::vector<scheduler::Piece> pieces_;              // under mu_ (scratch)
  uint64_t next_op_id_ = 1;                           // under mu_
  absl::flat_hash_map<TensorKey, Pushed> pushed_;     // under mu_

  std::vector<std::unique_ptr<host::WorkerIoLoop>> loops_;
  LoopThreads threads_;  // loop q runs as threads_'s loop q
};

}  // namespace atp::internal

#endif  // ATP_LIB_RUNTIME_WORKER_IMPL_H_
