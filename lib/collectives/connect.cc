// lib/collectives/connect.cc: Connect, GlooAllreduce and the options'
// Validate (atp/collectives.h).
#include <chrono>
#include <exception>
#include <string>

#include "absl/strings/str_cat.h"
#include "atp/collectives.h"
#include "gloo/allreduce.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"
#include "lib/collectives/gloo_status.h"

namespace atp::collectives {

absl::Status ConnectOptions::Validate(std::string_view field) const {
  if (ranks < 1) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".ranks: ", ranks, " (at least 1)"));
  }
  if (rank < 0 || rank >= ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".rank: ", rank, " is outside 0..", ranks - 1));
  }
  if (hostname.empty()) return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".hostname: empty"));
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".timeout: must be positive"));
  }
  return absl::OkStatus();
}

absl::Status RingAllreduceOptions::Validate(int ranks, std::string_view field) const {
  if (chunk_bytes < sizeof(float) || chunk_bytes % sizeof(float) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".chunk_bytes: ", chunk_bytes, " is not a positive multiple of 4"));
  }
  if (window_chunks < 1 || window_chunks > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".window_chunks: ", window_chunks, " is outside 1..1024"));
  }
  if (tag >= (uint32_t{1} << 24)) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(field), ".tag: ", tag, " is not below 2^24"));
  }
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ".timeout: must be positive"));
  }
  return skip.Validate(ranks, absl::StrCat(std::string(field), ".skip"));
}

absl::StatusOr<std::shared_ptr<gloo::Context>> Connect(gloo::rendezvous::Store& store,
                                                       const ConnectOptions& options) {
  if (absl::Status status = options.Validate(); !status.ok()) return status;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.ranks);
    context->setTimeout(ToMilliseconds(options.timeout));
    context->connectFullMesh(store, device);
    return std::shared_ptr<gloo::Context>(std::move(context));
  } catch (const std::exception& e) {
    return GlooError("Connect", e);
  }
}

absl::Status GlooAllreduce(const std::shared_ptr<gloo::Context>& context, std::span<float> data,
                           absl::Duration timeout) {
  try {
    gloo::AllreduceOptions options(context);
    options.setOutput(data.data(), data.size());
    options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    options.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    options.setTimeout(ToMilliseconds(timeout));
    gloo::allreduce(options);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return GlooError("GlooAllreduce", e);
  }
}

}  // namespace atp::collectives
