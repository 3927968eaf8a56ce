// python/torch/process_group_atp.h: the c10d backend "atp" (torch 1.13: a
// c10d::ProcessGroup) over one atp::Worker.
//
//   allreduce   one float32, contiguous CPU tensor, ReduceOp SUM or AVG: one
//               Worker::PushPull, in place (a list of several tensors, which
//               c10d sums together, is refused); the Work's future is
//               completed by the last handle's OnDone callback (libatp's I/O
//               thread), no waiting thread. With SkipReduce
//               (ProcessGroupAtpOptions::skip), the PushPull skips what
//               CallSkipOptions::ForCall says for the call's number.
//   broadcast   through the job's c10d::Store (the root sets the bytes, the
//               others get them): the plain path DDP's parameter sync at start
//               uses; not for bulk traffic.
//   allgather   through the store likewise (DDP's start-up check of the
//               parameters' shapes uses it).
//   barrier     a one-float allreduce through ATP (every rank must reach it).
//   the rest    NotImplementedError naming the collective.
//
// Collective order: ATP pairs the k-th aggregating call of every rank, so
// ranks must call allreduce/barrier in the same order (as DDP does).
#ifndef ATP_PYTHON_TORCH_PROCESS_GROUP_ATP_H_
#define ATP_PYTHON_TORCH_PROCESS_GROUP_ATP_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atp/worker.h"
#include "python/torch/call_skip.h"
#include "python/torch/torch_compat.h"

namespace atp::torch_backend {

// ProcessGroupAtpOptions: the backend's own settings (atp.AtpOptions in
// Python fills them; add new ones here and in python/atp/options.py).
struct ProcessGroupAtpOptions {
  // timeout: the Worker's JobOptions::stall_timeout too; Work::wait without
  // a timeout waits a margin longer, so that the Worker's error naming the
  // cause comes first (process_group_atp.cc, kWaitMargin).
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  CallSkipOptions skip;  // SkipReduce per allreduce call (mode kNone: off)
};

class ProcessGroupAtp : public AtpBackendBase {
 public:
  ProcessGroupAtp(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
                  std::unique_ptr<Worker> worker, ProcessGroupAtpOptions options);
  ~ProcessGroupAtp() override;

  const std::string getBackendName() const override { return "atp"; }

  c10::intrusive_ptr<::c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const ::c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const ::c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> barrier(const ::c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs,
                                             const ::c10d::AllgatherOptions& opts) override;

  // Refused with NotImplementedError naming the collective.
  c10::intrusive_ptr<::c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                          const ::c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const ::c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const ::c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                           std::vector<std::vector<at::Tensor>>& inputs,
                                           const ::c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const ::c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& output_split_sizes,
                                                 std::vector<int64_t>& input_split_sizes,
                                                 const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs,
                                            const ::c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<::c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                        int tag) override;
  c10::intrusive_ptr<::c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                                 int tag) override;

  // stats: the Worker's counters (the Python side turns them into a dict).
  WorkerStats stats() const { return worker_->stats(); }
  // allreduce_calls: the allreduce calls this group has started (barriers
  // not counted); the next call's number, SkipReduce's iteration.
  uint64_t allreduce_calls() const { return allreduce_calls_.load(std::memory_order_relaxed); }

 private:
  // AllreduceThroughAtp: one PushPull per tensor; `call` numbers an
  // allreduce for SkipReduce (nullopt: a barrier, never skipped).
  c10::intrusive_ptr<::c10d::Work> AllreduceThroughAtp(std::vector<at::Tensor> tensors,
                                                       Reduction reduction, const char* what,
                                                       std::optional<uint64_t> call);

  c10::intrusive_ptr<::c10d::Store> store_;
  std::unique_ptr<Worker> worker_;
  ProcessGroupAtpOptions options_;
  uint64_t store_sequence_ = 0;  // names the store keys of the next broadcast / allgather
  std::atomic<uint64_t> allreduce_calls_{0};  // allreduce calls started (allreduce_calls())
};

}  // namespace atp::torch_backend

#endif  // ATP_PYTHON_TORCH_PROCESS_GROUP_ATP_H_
