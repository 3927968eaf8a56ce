// lib/runtime/transport_factory.cc: OpenTransport (atp/transport_factory.h).
#include "atp/transport_factory.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "atp/config.h"
#include "atp/status_macros.h"

namespace atp {
namespace {

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// The DPDK backend is linked only when libatp was built with it; these two
// functions are the only place that knows.
absl::Status ValidateDpdk(const TransportOptions& options, std::string_view field) {
#if ATP_HAVE_DPDK
  if (absl::Status s = options.dpdk_eal.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(field), ".dpdk_eal: ", s.message()));
  }
  if (absl::Status s = options.dpdk.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Sv(field), ".dpdk: ", s.message()));
  }
  return absl::OkStatus();
#else
  (void)options;
  return absl::FailedPreconditionError(absl::StrCat(
      Sv(field), ".kind: dpdk: this libatp was built without DPDK (install libdpdk-dev and "
                 "configure with -DLIBATP_WITH_DPDK=ON)"));
#endif
}

absl::StatusOr<std::unique_ptr<transport::Device>> OpenDpdk(const TransportOptions& options) {
#if ATP_HAVE_DPDK
  ATP_RETURN_IF_ERROR(transport::InitDpdkEal(options.dpdk_eal));
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<transport::DpdkDevice> device,
                       transport::OpenDpdkDevice(options.dpdk));
  return std::unique_ptr<transport::Device>(std::move(device));
#else
  return ValidateDpdk(options, "TransportOptions");
#endif
}

}  // namespace

std::string_view TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kLoopback: return "loopback";
    case TransportKind::kKernelUdp: return "kernel_udp";
    case TransportKind::kDpdk: return "dpdk";
  }
  return "unknown";
}

bool TransportAvailable(TransportKind kind) {
  return kind != TransportKind::kDpdk || ATP_HAVE_DPDK;
}

absl::StatusOr<TransportKind> ParseTransportKind(std::string_view name) {
  if (name == "loopback") return TransportKind::kLoopback;
  if (name == "kernel_udp" || name == "kernel-udp" || name == "udp") {
    return TransportKind::kKernelUdp;
  }
  if (name == "dpdk") return TransportKind::kDpdk;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", Sv(name), "' (loopback, kernel_udp, dpdk)"));
}

absl::Status TransportOptions::Validate(std::string_view field) const {
  ATP_RETURN_IF_ERROR(capture.Validate(absl::StrCat(Sv(field), ".capture")));
  switch (kind) {
    case TransportKind::kLoopback:
      if (loopback_wire == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(Sv(field), ".loopback_wire: required for the loopback transport"));
      }
      if (absl::Status s = loopback.Validate(); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(Sv(field), ".loopback: ", s.message()));
      }
      return absl::OkStatus();
    case TransportKind::kKernelUdp:
      if (absl::Status s = kernel_udp.Validate(); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(Sv(field), ".kernel_udp: ", s.message()));
      }
      return absl::OkStatus();
    case TransportKind::kDpdk:
      return ValidateDpdk(*this, field);
  }
  return absl::InvalidArgumentError(absl::StrCat(Sv(field), ".kind: unknown transport"));
}

namespace {

absl::StatusOr<std::unique_ptr<transport::Device>> OpenBackend(const TransportOptions& options) {
  switch (options.kind) {
    case TransportKind::kLoopback:
      return options.loopback_wire->AddEndpoint(options.loopback);
    case TransportKind::kKernelUdp: {
      ATP_ASSIGN_OR_RETURN(std::unique_ptr<transport::KernelUdpDevice> device,
                           transport::OpenKernelUdpDevice(options.kernel_udp));
      return std::unique_ptr<transport::Device>(std::move(device));
    }
    case TransportKind::kDpdk:
      return OpenDpdk(options);
  }
  return absl::InvalidArgumentError("TransportOptions.kind: unknown transport");
}

}  // namespace

absl::StatusOr<std::unique_ptr<transport::Device>> OpenTransport(const TransportOptions& options) {
  ATP_RETURN_IF_ERROR(options.Validate());
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<transport::Device> device, OpenBackend(options));
  return CaptureDevice(std::move(device), options.capture);
}

}  // namespace atp
