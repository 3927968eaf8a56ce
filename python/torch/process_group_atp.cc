#include "python/torch/process_group_atp.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace atp::torch_backend {
namespace {

c10::intrusive_ptr<c10::ivalue::Future> TensorListFuture() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

// kWaitMargin: how much longer AtpWork::wait without a timeout waits than the
// group's timeout, which is also the Worker's JobOptions::stall_timeout
// (python/atp/rendezvous.py sets both). When nothing completes, the Worker
// fails the operation with the cause (the PS unreachable, the workers the PS
// waits for) once its I/O thread sees the stall deadline pass and OnDone
// completes the Work: a little after the timeout, later still on a loaded
// machine. A wait of exactly the timeout would often end first, with
// torch's bare "Operation timed out!"; the margin lets the cause arrive.
constexpr std::chrono::milliseconds kWaitMargin{2000};

std::chrono::milliseconds WithWaitMargin(std::chrono::milliseconds timeout) {
  if (timeout > std::chrono::milliseconds::max() - kWaitMargin) return timeout;
  return timeout + kWaitMargin;
}

// AtpWork: an allreduce (or barrier) of one tensor, one PushPull (a Work
// holds a list of handles: the last to finish completes the future and the
// Work).
// `timeout`: the group's; wait() without one waits it plus kWaitMargin.
class AtpWork : public ::c10d::Work {
 public:
  AtpWork(int rank, ::c10d::OpType type, std::vector<at::Tensor> tensors, size_t operations,
          std::chrono::milliseconds timeout)
      : Work(rank, type),
        tensors_(std::move(tensors)),
        remaining_(operations),
        default_timeout_(WithWaitMargin(timeout)),
        future_(TensorListFuture()) {}

  // OneFinished: called by each operation's OnDone (libatp's I/O thread).
  void OneFinished(const absl::Status& status, const char* what) {
    if (!status.ok()) {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (first_error_.empty()) {
        first_error_ = std::string("atp: ") + what + " failed: " + status.ToString();
      }
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::exception_ptr error;
    {
      std::lock_guard<std::mutex> lock(error_mu_);
      if (!first_error_.empty()) error = std::make_exception_ptr(std::runtime_error(first_error_));
    }
    if (error == nullptr) {
      future_->markCompleted(c10::IValue(tensors_));
    } else {
      future_->setError(error);
    }
    finish(error);
  }

  bool wait(std::chrono::milliseconds timeout) override {
    return Work::wait(timeout == kNoTimeout ? default_timeout_ : timeout);
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return tensors_; }

 private:
  const std::vector<at::Tensor> tensors_;  // kept alive: libatp writes into them
  std::atomic<size_t> remaining_;
  const std::chrono::milliseconds default_timeout_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex error_mu_;
  std::string first_error_;  // under error_mu_
};

const char* ReduceOpName(const ::c10d::ReduceOp& op) {
  switch (op.op_) {
    case ::c10d::ReduceOp::SUM: return "SUM";
    case ::c10d::ReduceOp::AVG: return "AVG";
    case ::c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case ::c10d::ReduceOp::MIN: return "MIN";
    case ::c10d::ReduceOp::MAX: return "MAX";
    case ::c10d::ReduceOp::BAND: return "BAND";
    case ::c10d::ReduceOp::BOR: return "BOR";
    case ::c10d::ReduceOp::BXOR: return "BXOR";
    default: return "PREMUL_SUM";
  }
}

void CheckAggregatable(const std::vector<at::Tensor>& tensors, const char* what) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    TORCH_CHECK(t.layout() == at::kStrided, "atp: ", what, ": tensor ", i,
                " is sparse; ATP aggregates dense float32 tensors");
    TORCH_CHECK(t.scalar_type() == at::kFloat, "atp: ", what, ": tensor ", i, " is ",
                t.scalar_type(), "; ATP aggregates float32 (cast with .float())");
    TORCH_CHECK(t.device().is_cpu(), "atp: ", what, ": tensor ", i, " is on ", t.device(),
                "; ATP reads CPU memory (.cpu())");
    TORCH_CHECK(t.is_contiguous(), "atp: ", what, ": tensor ", i,
                " is not contiguous (.contiguous())");
  }
}

[[noreturn]] void Unsupported(const char* collective) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "atp: ", collective,
                              " is not supported by the ATP backend (it has allreduce of float32 "
                              "with SUM or AVG, broadcast, allgather and barrier); run it on a gloo group "
                              "(torch.distributed.new_group(backend='gloo'))");
  std::abort();  // not reached: the check throws
}

}  // namespace

ProcessGroupAtp::ProcessGroupAtp(c10::intrusive_ptr<::c10d::Store> store, int rank, int size,
                                 std::unique_ptr<Worker> worker, ProcessGroupAtpOptions options)
    : AtpBackendBase(rank, size),
      store_(std::move(store)),
      worker_(std::move(worker)),
      options_(options) {
  TORCH_CHECK(worker_ != nullptr, "atp: ProcessGroupAtp needs a Worker");
  const absl::Status skip = options_.skip.Validate("AtpOptions.skip");
  TORCH_CHECK_VALUE(skip.ok(), std::string(skip.message()));
}

ProcessGroupAtp::~ProcessGroupAtp() = default;

c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::AllreduceThroughAtp(
    std::vector<at::Tensor> tensors, Reduction reduction, const char* what,
    std::optional<uint64_t> call) {
  auto work = c10::make_intrusive<AtpWork>(getRank(), ::c10d::OpType::ALLREDUCE, tensors,
                                           tensors.size(), options_.timeout);
  if (tensors.empty()) return work;
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor& t = tensors[i];
    std::span<float> values(t.data_ptr<float>(), static_cast<size_t>(t.numel()));
    OpOptions op{.reduction = reduction};
    if (call.has_value() && options_.skip.enabled()) {
      op.skip = options_.skip.ForCall(*call, i, values.size(), getSize());
    }
    absl::StatusOr<Handle> handle = worker_->PushPull(values, values, op);
    // A refused call starts nothing: count it finished with its error so the
    // Work still completes (the operations already started do as well).
    if (!handle.ok()) {
      work->OneFinished(handle.status(), what);
      continue;
    }
    handle->OnDone([work, what](const absl::Status& status) { work->OneFinished(status, what); });
  }
  return work;
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::allreduce(std::vector<at::Tensor>& tensors,
                                                            const ::c10d::AllreduceOptions& opts) {
  CheckAggregatable(tensors, "allreduce");
  Reduction reduction = Reduction::kSum;
  if (opts.reduceOp == ::c10d::ReduceOp::AVG) {
    reduction = Reduction::kAverage;
  } else if (!(opts.reduceOp == ::c10d::ReduceOp::SUM)) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "atp: allreduce with ReduceOp.",
                                ReduceOpName(opts.reduceOp),
                                " is not supported by the ATP backend (SUM and AVG are)");
  }
  // c10d's list is one logical tensor on several devices: gloo sums all of
  // its tensors across all ranks into each. Reducing each tensor on its own
  // would return something else without a word, so a longer list is refused.
  TORCH_CHECK(!tensors.empty(), "atp: allreduce: the list of tensors is empty");
  TORCH_CHECK_NOT_IMPLEMENTED(tensors.size() == 1, "atp: allreduce of a list of ", tensors.size(),
                              " tensors is not supported by the ATP backend (c10d sums a list's "
                              "tensors together, as one tensor on several devices); pass one "
                              "tensor per call");
  // Numbered after the checks: a refused call (on every rank alike) starts
  // nothing and takes no number.
  const uint64_t call = allreduce_calls_.fetch_add(1, std::memory_order_relaxed);
  return AllreduceThroughAtp(tensors, reduction, "allreduce", call);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::barrier(const ::c10d::BarrierOptions&) {
  return AllreduceThroughAtp({at::zeros({1}, at::kFloat)}, Reduction::kSum, "barrier",
                             std::nullopt);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::broadcast(std::vector<at::Tensor>& tensors,
                                                            const ::c10d::BroadcastOptions& opts) {
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "atp: broadcast: root rank ",
              opts.rootRank, " is not in 0..", getSize() - 1);
  const std::string prefix = "atp/broadcast/" + std::to_string(store_sequence_++) + "/";
  for (size_t i = 0; i < tensors.size(); ++i) {
    at::Tensor& t = tensors[i];
    TORCH_CHECK(t.device().is_cpu() && t.is_contiguous() && t.layout() == at::kStrided,
                "atp: broadcast: tensor ", i, " must be a dense, contiguous CPU tensor");
    const size_t bytes = static_cast<size_t>(t.nbytes());
    const std::string key = prefix + std::to_string(i);
    if (getSize() == 1) continue;
    if (getRank() == opts.rootRank) {
      const auto* data = static_cast<const uint8_t*>(t.data_ptr());
      store_->set(key, std::vector<uint8_t>(data, data + bytes));
      continue;
    }
    const std::vector<uint8_t> value = store_->get(key);
    TORCH_CHECK(value.size() == bytes, "atp: broadcast: tensor ", i, " has ", bytes,
                " bytes here and ", value.size(), " at the root (shapes differ across ranks)");
    std::memcpy(t.data_ptr(), value.data(), bytes);
    // The last reader removes the key, so the store does not grow with every
    // broadcast.
    if (store_->add(key + "/read", 1) == getSize() - 1) {
      store_->deleteKey(key);
      store_->deleteKey(key + "/read");
    }
  }
  auto future = TensorListFuture();
  future->markCompleted(c10::IValue(tensors));
  return ::c10d::Work::create_from_future(future);
}

c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::allreduce_coalesced(
    std::vector<at::Tensor>&, const ::c10d::AllreduceCoalescedOptions&) {
  Unsupported("allreduce_coalesced");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::reduce(std::vector<at::Tensor>&,
                                                         const ::c10d::ReduceOptions&) {
  Unsupported("reduce");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions&) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1 &&
                  outputs[0].size() == static_cast<size_t>(getSize()),
              "atp: allgather: one input tensor and one list of ", getSize(), " outputs");
  const at::Tensor& in = inputs[0];
  TORCH_CHECK(in.device().is_cpu() && in.is_contiguous() && in.layout() == at::kStrided,
              "atp: allgather: the input must be a dense, contiguous CPU tensor");
  const size_t bytes = static_cast<size_t>(in.nbytes());
  const std::string prefix = "atp/allgather/" + std::to_string(store_sequence_++) + "/";
  const auto* data = static_cast<const uint8_t*>(in.data_ptr());
  store_->set(prefix + std::to_string(getRank()), std::vector<uint8_t>(data, data + bytes));
  for (int r = 0; r < getSize(); ++r) {
    at::Tensor& out = outputs[0][static_cast<size_t>(r)];
    TORCH_CHECK(out.is_contiguous() && static_cast<size_t>(out.nbytes()) == bytes &&
                    out.scalar_type() == in.scalar_type(),
                "atp: allgather: output ", r, " must match the input's type and size");
    const std::vector<uint8_t> value = store_->get(prefix + std::to_string(r));
    TORCH_CHECK(value.size() == bytes, "atp: allgather: rank ", r, " sent ", value.size(),
                " bytes, this rank expects ", bytes, " (shapes differ across ranks)");
    std::memcpy(out.data_ptr(), value.data(), bytes);
  }
  if (store_->add(prefix + "read", 1) == getSize()) {  // the last reader cleans up
    for (int r = 0; r < getSize(); ++r) store_->deleteKey(prefix + std::to_string(r));
    store_->deleteKey(prefix + "read");
  }
  auto future = TensorListFuture();
  future->markCompleted(c10::IValue(outputs[0]));
  return ::c10d::Work::create_from_future(future);
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::_allgather_base(at::Tensor&, at::Tensor&,
                                                                  const ::c10d::AllgatherOptions&) {
  Unsupported("_allgather_base");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::gather(std::vector<std::vector<at::Tensor>>&,
                                                         std::vector<at::Tensor>&,
                                                         const ::c10d::GatherOptions&) {
  Unsupported("gather");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::scatter(std::vector<at::Tensor>&,
                                                          std::vector<std::vector<at::Tensor>>&,
                                                          const ::c10d::ScatterOptions&) {
  Unsupported("scatter");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::reduce_scatter(
    std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&,
    const ::c10d::ReduceScatterOptions&) {
  Unsupported("reduce_scatter");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::alltoall_base(at::Tensor&, at::Tensor&,
                                                                std::vector<int64_t>&,
                                                                std::vector<int64_t>&,
                                                                const ::c10d::AllToAllOptions&) {
  Unsupported("alltoall_base");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::alltoall(std::vector<at::Tensor>&,
                                                           std::vector<at::Tensor>&,
                                                           const ::c10d::AllToAllOptions&) {
  Unsupported("alltoall");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::send(std::vector<at::Tensor>&, int, int) {
  Unsupported("send");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::recv(std::vector<at::Tensor>&, int, int) {
  Unsupported("recv");
}
c10::intrusive_ptr<::c10d::Work> ProcessGroupAtp::recvAnysource(std::vector<at::Tensor>&, int) {
  Unsupported("recvAnysource");
}

}  // namespace atp::torch_backend
