// lib/capture/pcap_ring.h: a ring of pcap files written with libpcap
// (Ethernet link type, nanosecond time stamps): files "<stem>-NNNNN.pcap" in
// one directory, each closed once it holds max_file_bytes, the oldest
// deleted once more than max_files exist. Used by the capturing transport
// decorator (time stamps from the wall clock) and by atp-sim (simulated time).
//
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<PcapRing> ring,
//                        PcapRing::Open({.directory = "/tmp/cap", .stem = "w0-rx"}));
//   ring->Write(frame_bytes, unix_time_ns);
//
// Not thread-safe: one writer at a time (the caller locks).
#ifndef ATP_LIB_CAPTURE_PCAP_RING_H_
#define ATP_LIB_CAPTURE_PCAP_RING_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"

namespace atp::capture {

struct PcapRingOptions {
  std::string directory;
  std::string stem;                               // file names: <stem>-NNNNN.pcap
  uint64_t max_file_bytes = uint64_t{64} << 20;   // bytes per file before the next
  uint32_t max_files = 4;                         // files kept; 0: never delete
  // single_file: exactly "<directory>/<stem>" and no ring (atp-sim --pcap).
  bool single_file = false;
};

class PcapRing {
 public:
  // Open: creates the first file. Unavailable with the path and libpcap's
  // message when it cannot; FailedPrecondition when built without libpcap.
  static absl::StatusOr<std::unique_ptr<PcapRing>> Open(PcapRingOptions options);
  ~PcapRing();
  PcapRing(const PcapRing&) = delete;
  PcapRing& operator=(const PcapRing&) = delete;

  // Write: one frame, stamped `time_ns` nanoseconds since the Unix epoch
  // (or since the start of a simulation). Returns false once a new file
  // could not be created (nothing more is written; error() says why).
  bool Write(std::span<const uint8_t> frame, int64_t time_ns);
  // Flush: pushes buffered records to the file (readers see them).
  void Flush();

  uint64_t frames_written() const { return frames_written_; }
  const std::string& error() const { return error_; }
  // files: the files of the ring that exist now, oldest first.
  const std::deque<std::string>& files() const { return files_; }

 private:
  struct Handles;
  explicit PcapRing(PcapRingOptions options);
  bool StartFile();
  void CloseFile();

  PcapRingOptions options_;
  std::unique_ptr<Handles> handles_;
  std::deque<std::string> files_;
  uint64_t next_index_ = 0;
  uint64_t file_bytes_ = 0;
  uint64_t frames_written_ = 0;
  std::string error_;
};

}  // namespace atp::capture

#endif  // ATP_LIB_CAPTURE_PCAP_RING_H_
