// lib/capture/capture.cc: atp/capture.h.
#include "atp/capture.h"

#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/config.h"
#include "atp/status_macros.h"
#include "lib/capture/capturing_device.h"

namespace atp {
namespace {

constexpr uint64_t kMinFileBytes = 4096;

bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::Status CaptureOptions::Validate(std::string_view field) const {
  if (!enabled()) return absl::OkStatus();
  const std::string f(field);
  struct stat st;
  if (::stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(f, ".directory: '", directory, "' is not an existing directory"));
  }
  // Checked here, not when the first file is created (after a link came up).
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(f, ".directory: '", directory, "' is not writable"));
  }
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        f, ".name: '", name, "' must be 1..64 letters, digits, '_', '-' or '.'"));
  }
  if (max_file_bytes < kMinFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(f, ".max_file_bytes: ", max_file_bytes, " is below ", kMinFileBytes));
  }
  if (max_files < 1) return absl::InvalidArgumentError(absl::StrCat(f, ".max_files: must be >= 1"));
  if (!CaptureAvailable()) {
    return absl::FailedPreconditionError(absl::StrCat(
        f, ": this libatp was built without libpcap (install libpcap-dev and configure with "
           "-DLIBATP_WITH_PCAP=ON)"));
  }
  return absl::OkStatus();
}

bool CaptureAvailable() { return ATP_HAVE_PCAP; }

absl::StatusOr<std::unique_ptr<transport::Device>> CaptureDevice(
    std::unique_ptr<transport::Device> device, const CaptureOptions& options) {
  if (!options.enabled()) return device;
  ATP_RETURN_IF_ERROR(options.Validate());
  const auto ring = [&](const char* direction) {
    capture::PcapRingOptions r;
    r.directory = options.directory;
    r.stem = absl::StrCat(options.name, "-", direction);
    r.max_file_bytes = options.max_file_bytes;
    r.max_files = options.max_files;
    return capture::PcapRing::Open(std::move(r));
  };
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<capture::PcapRing> rx, ring("rx"));
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<capture::PcapRing> tx, ring("tx"));
  return std::unique_ptr<transport::Device>(
      std::make_unique<capture::CapturingDevice>(std::move(device), std::move(rx), std::move(tx)));
}

transport::Device& UncapturedDevice(transport::Device& device) {
  if (auto* capturing = dynamic_cast<capture::CapturingDevice*>(&device); capturing != nullptr) {
    return capturing->inner();
  }
  return device;
}

}  // namespace atp
