#include "python/torch/call_skip.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace atp::torch_backend {

absl::Status CallSkipOptions::Validate(std::string_view field) const {
  if (absl::Status status = policy.Validate(field); !status.ok()) return status;
  for (const uint64_t call : protected_calls) {
    if (call >= call_cycle) {
      return absl::InvalidArgumentError(absl::StrCat(
          std::string(field), ".protected_calls: ", call, " is not below call_cycle (",
          call_cycle, ")"));
    }
  }
  return absl::OkStatus();
}

SkipOptions CallSkipOptions::ForCall(uint64_t call, uint64_t tensor, size_t elements,
                                     int ranks) const {
  const bool small = elements <= protect_size;
  const bool protected_call =
      call_cycle > 0 && std::find(protected_calls.begin(), protected_calls.end(),
                                  call % call_cycle) != protected_calls.end();
  if (small || protected_call) {
    SkipOptions none;
    none.iteration = call;
    none.tensor = tensor;
    return none;
  }
  return policy.ForTensor(tensor, call, ranks);
}

}  // namespace atp::torch_backend
