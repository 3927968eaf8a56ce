// lib/runtime/queue_claims.h: which transport queues the Workers and
// ParameterServers of this process run on. Two endpoints on one queue would
// each take frames meant for the other; the second is refused instead,
// naming the queue and who holds it.
//
//   ATP_ASSIGN_OR_RETURN(QueueClaim claim, QueueClaim::Take(device, {0, 1}, "a Worker"));
//   ... the endpoint runs; destroying `claim` gives the queues back.
//
// Threads: any; the process-wide table is behind a mutex (touched at endpoint
// creation and destruction only).
#ifndef ATP_LIB_RUNTIME_QUEUE_CLAIMS_H_
#define ATP_LIB_RUNTIME_QUEUE_CLAIMS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/transport.h"

namespace atp::internal {

class QueueClaim {
 public:
  // Take: queues `queues` of `device` for `owner` (as the error names it:
  // "a Worker"), all or none. FailedPreconditionError when one is held.
  static absl::StatusOr<QueueClaim> Take(const transport::Device& device,
                                         std::span<const uint32_t> queues, std::string owner);

  QueueClaim(QueueClaim&& other) noexcept;
  QueueClaim& operator=(QueueClaim&& other) noexcept;
  QueueClaim(const QueueClaim&) = delete;
  QueueClaim& operator=(const QueueClaim&) = delete;
  ~QueueClaim();

 private:
  QueueClaim(const transport::Device* device, std::vector<uint32_t> queues)
      : device_(device), queues_(std::move(queues)) {}
  void Release();

  const transport::Device* device_ = nullptr;  // not owned; null once released or moved from
  std::vector<uint32_t> queues_;
};

}  // namespace atp::internal

#endif  // ATP_LIB_RUNTIME_QUEUE_CLAIMS_H_
