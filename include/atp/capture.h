// atp/capture.h: recording what a transport device receives and sends, as
// pcap files Wireshark and tshark open (with tools/wireshark/atp.lua they
// show every ATP field). Off unless asked for; docs/observability.md.
//
//   atp::TransportOptions t = ...;
//   t.capture.directory = "/tmp/cap";   // files: /tmp/cap/<name>-rx-00000.pcap, ...-tx-...
//   t.capture.name = "w0";
//   ATP_ASSIGN_OR_RETURN(auto device, atp::OpenTransport(t));   // already capturing
//
// or around a device opened some other way:
//
//   ATP_ASSIGN_OR_RETURN(device, atp::CaptureDevice(std::move(device), options));
//
// Format: libpcap 1.10 (Debian 12) writes pcap, not pcapng, so the port name
// and direction are in the file name: one ring of files per direction,
// "<name>-rx-NNNNN.pcap" (what RxBurst handed out) and "<name>-tx-NNNNN.pcap"
// (what TxBurst/TxSegmented took), with nanosecond time stamps
// (CLOCK_REALTIME, one per burst). `mergecap -w all.pcapng *.pcap` joins them.
// DPDK's pcapng library would name interfaces, but only DPDK ethdev ports,
// and the kernel UDP and loopback devices are not.
//
// Bounded: each ring holds at most max_files files of about max_file_bytes;
// the oldest is deleted when a new one starts, so a capture never takes
// more than 2 * max_files * max_file_bytes on disk.
//
// Cost: a copy of each frame sent plus a buffered write of every frame,
// under one lock per direction and device (bench/capture_bench.cc).
#ifndef ATP_CAPTURE_H_
#define ATP_CAPTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/transport.h"

namespace atp {

struct CaptureOptions {
  // directory: where the files go (must exist); empty: no capture.
  std::string directory;
  // name: the port's name, the start of every file name: letters, digits,
  // '_', '-' and '.'.
  std::string name = "port";
  // max_file_bytes: a file is closed and the next begun once it holds this
  // many bytes; >= 4096.
  uint64_t max_file_bytes = uint64_t{64} << 20;
  // max_files: files kept per direction (the ring), >= 1.
  uint32_t max_files = 4;

  bool enabled() const { return !directory.empty(); }
  // Validate: only when enabled; the message names the field.
  absl::Status Validate(std::string_view field = "CaptureOptions") const;
};

// CaptureAvailable: whether this libatp was built with libpcap
// (ATP_HAVE_PCAP in atp/config.h).
bool CaptureAvailable();

// CaptureDevice: `device` behind a decorator that records every frame its
// queues receive and send (its queues keep the threading rules of
// atp/transport.h). Returns `device` itself when options are not enabled.
// FailedPrecondition without libpcap; Unavailable when the files cannot be
// created.
absl::StatusOr<std::unique_ptr<transport::Device>> CaptureDevice(
    std::unique_ptr<transport::Device> device, const CaptureOptions& options);

// UncapturedDevice: the device a capture decorator wraps, or `device` itself
// (to reach a backend's own interface, e.g. transport::DpdkDevice).
transport::Device& UncapturedDevice(transport::Device& device);

}  // namespace atp

#endif  // ATP_CAPTURE_H_
