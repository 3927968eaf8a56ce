#include "switch_emulator/daemon/port_capture.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/capture.h"
#include "atp/status_macros.h"
#include "lib/tool/flag_checks.h"

namespace atp::switchd {

std::vector<size_t> CapturedPorts(const SwitchdConfig& config, const PortCaptureOptions& options) {
  std::vector<size_t> captured;
  if (options.directory.empty()) return captured;
  const bool chosen = std::any_of(config.ports.begin(), config.ports.end(),
                                  [](const PortConfig& p) { return p.pcap; });
  for (size_t i = 0; i < config.ports.size(); ++i) {
    if (!chosen || config.ports[i].pcap) captured.push_back(i);
  }
  return captured;
}

absl::Status CheckPortCapture(const SwitchdConfig& config, const PortCaptureOptions& options) {
  if (options.directory.empty()) {
    for (const PortConfig& p : config.ports) {
      if (p.pcap) {
        return absl::InvalidArgumentError(absl::StrCat(
            config.path, ":", p.line, ": port '", p.name, "' says pcap: true, but --pcap_dir is not set"));
      }
    }
    return absl::OkStatus();
  }
  // The directory is checked as the flag it came from ("--pcap_dir: '/x'
  // does not exist"): CaptureOptions::Validate would name its own field
  // ("--pcap_dir.directory: ..."). Its other checks (libpcap in this build)
  // read right after the flag's name.
  ATP_RETURN_IF_ERROR(tool::CheckWritableDirectory("pcap_dir", options.directory));
  CaptureOptions c;
  c.directory = options.directory;
  c.max_file_bytes = options.max_file_bytes;
  c.max_files = options.max_files;
  if (absl::Status s = c.Validate("--pcap_dir"); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  return absl::OkStatus();
}

absl::Status CapturePorts(const SwitchdConfig& config, const PortCaptureOptions& options,
                          std::vector<std::unique_ptr<transport::Device>>& devices) {
  for (size_t i : CapturedPorts(config, options)) {
    CaptureOptions c;
    c.directory = options.directory;
    c.name = config.ports[i].name;
    c.max_file_bytes = options.max_file_bytes;
    c.max_files = options.max_files;
    ATP_ASSIGN_OR_RETURN(devices[i], CaptureDevice(std::move(devices[i]), c));
  }
  return absl::OkStatus();
}

}  // namespace atp::switchd
