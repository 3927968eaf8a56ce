#include "lib/runtime/queue_claims.h"

#include <mutex>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace atp::internal {
namespace {

using QueueKey = std::pair<const transport::Device*, uint32_t>;

// The table of held queues, and who holds each. Leaked on purpose: endpoints
// destroyed during static destruction still find it.
struct ClaimTable {
  std::mutex mu;
  absl::flat_hash_map<QueueKey, std::string> holders;  // under mu
};

ClaimTable& Table() {
  static ClaimTable* table = new ClaimTable;
  return *table;
}

}  // namespace

absl::StatusOr<QueueClaim> QueueClaim::Take(const transport::Device& device,
                                            std::span<const uint32_t> queues, std::string owner) {
  ClaimTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mu);
  for (const uint32_t q : queues) {
    const auto held = table.holders.find(QueueKey{&device, q});
    if (held != table.holders.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "queue ", q, " of this ", std::string(device.backend()), " device (",
          device.address().ipv4.ToString(), ") is used by ", held->second, " already; ", owner,
          " needs queues no other endpoint of this process runs on"));
    }
  }
  for (const uint32_t q : queues) table.holders.emplace(QueueKey{&device, q}, owner);
  return QueueClaim(&device, std::vector<uint32_t>(queues.begin(), queues.end()));
}

QueueClaim::QueueClaim(QueueClaim&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)), queues_(std::move(other.queues_)) {}

QueueClaim& QueueClaim::operator=(QueueClaim&& other) noexcept {
  if (this != &other) {
    Release();
    device_ = std::exchange(other.device_, nullptr);
    queues_ = std::move(other.queues_);
  }
  return *this;
}

QueueClaim::~QueueClaim() { Release(); }

void QueueClaim::Release() {
  if (device_ == nullptr) return;
  ClaimTable& table = Table();
  std::lock_guard<std::mutex> lock(table.mu);
  for (const uint32_t q : queues_) table.holders.erase(QueueKey{device_, q});
  device_ = nullptr;
}

}  // namespace atp::internal
