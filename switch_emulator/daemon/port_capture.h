// switch_emulator/daemon/port_capture.h: atp-switchd's packet capture: the
// opened ports wrapped in atp::CaptureDevice, one pair of pcap rings per
// port named after it ("<port>-rx-NNNNN.pcap", "<port>-tx-NNNNN.pcap").
//
// Which ports: every port, or only those whose YAML says `pcap: true` when
// any does. A port saying `pcap: true` without a directory is a usage error.
#ifndef ATP_SWITCH_EMULATOR_DAEMON_PORT_CAPTURE_H_
#define ATP_SWITCH_EMULATOR_DAEMON_PORT_CAPTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "atp/transport.h"
#include "switch_emulator/daemon/config.h"

namespace atp::switchd {

struct PortCaptureOptions {
  std::string directory;  // empty: no capture (unless a port asks: an error)
  uint64_t max_file_bytes = uint64_t{64} << 20;
  uint32_t max_files = 4;
};

// CapturedPorts: the indices of the ports `options` captures.
std::vector<size_t> CapturedPorts(const SwitchdConfig& config, const PortCaptureOptions& options);

// CheckPortCapture: InvalidArgument naming the flag or the port's line.
absl::Status CheckPortCapture(const SwitchdConfig& config, const PortCaptureOptions& options);

// CapturePorts: wraps devices[i] (config.ports order) of every captured port.
absl::Status CapturePorts(const SwitchdConfig& config, const PortCaptureOptions& options,
                          std::vector<std::unique_ptr<transport::Device>>& devices);

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_DAEMON_PORT_CAPTURE_H_
