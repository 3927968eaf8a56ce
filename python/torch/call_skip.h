// python/torch/call_skip.h: SkipReduce in the c10d backend, per allreduce
// call (docs/skipreduce.md, "In the c10d backend").
//
// A c10d allreduce carries one tensor list and nothing else: no DDP bucket
// index, no iteration. So the backend does what the original's patched NCCL
// does per call (NCCL_SKIPS, NCCL_SHIFT, NCCL_RANDOM_ID, NCCL_PROTECT_SIZE_0):
// it numbers its allreduce calls, 0, 1, 2, ... per process group (ranks issue
// collectives in the same order, so call c is the same collective on every
// rank) and uses the number as the iteration of the random shift. Protection
// is by size (a tensor of at most protect_size elements) or by the call's
// place in a cycle the user names (call mod call_cycle in protected_calls,
// e.g. DDP's bucket order within an iteration); warm-up is the first
// policy.warmup_iterations calls.
#ifndef ATP_PYTHON_TORCH_CALL_SKIP_H_
#define ATP_PYTHON_TORCH_CALL_SKIP_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "atp/skip_reduce.h"

namespace atp::torch_backend {

struct CallSkipOptions {
  // policy: mode, rate, divisor, seed as on the hooks; warmup_iterations
  // counts allreduce calls here; protected_tensors and tensor_rates name a
  // tensor's index within one call's list (usually 0: one tensor per call).
  SkipPolicy policy;
  // protect_size: tensors of at most this many elements are never skipped
  // (0: none protected by size).
  uint64_t protect_size = 0;
  // call_cycle: the number of allreduce calls in one cycle (e.g. DDP's
  // buckets per iteration); call c is protected when c mod call_cycle is in
  // protected_calls. 0: no cycle (protected_calls must be empty).
  uint64_t call_cycle = 0;
  std::vector<uint64_t> protected_calls;

  bool enabled() const { return policy.mode != SkipMode::kNone; }
  // Validate: InvalidArgumentError naming `field`.<member>.
  absl::Status Validate(std::string_view field) const;
  // ForCall: the SkipOptions of tensor `tensor` (its index in the call's
  // list) of allreduce call `call` (0-based, per process group), holding
  // `elements` floats, over `ranks` ranks. Mode kNone when protected or in
  // warm-up; iteration = call either way.
  SkipOptions ForCall(uint64_t call, uint64_t tensor, size_t elements, int ranks) const;
};

}  // namespace atp::torch_backend

#endif  // ATP_PYTHON_TORCH_CALL_SKIP_H_
