#include "lib/capture/pcap_ring.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "atp/config.h"
#if ATP_HAVE_PCAP
#include <pcap/pcap.h>
#endif

namespace atp::capture {
namespace {

// pcap's file header and per-record header, bytes (for the size bound).
constexpr uint64_t kFileHeaderBytes = 24;
constexpr uint64_t kRecordHeaderBytes = 16;
// kSnapLength: whole frames; ATP frames are 306 bytes, others are cut here.
constexpr int kSnapLength = 65535;
// kWriteBufferBytes: stdio buffer of each open file.
constexpr size_t kWriteBufferBytes = size_t{1} << 20;

}  // namespace

#if ATP_HAVE_PCAP
struct PcapRing::Handles {
  pcap_t* dead = nullptr;         // describes the files: Ethernet, nanoseconds
  pcap_dumper_t* dumper = nullptr;
};
#else
struct PcapRing::Handles {};
#endif

PcapRing::PcapRing(PcapRingOptions options)
    : options_(std::move(options)), handles_(std::make_unique<Handles>()) {}

PcapRing::~PcapRing() {
  CloseFile();
#if ATP_HAVE_PCAP
  if (handles_->dead != nullptr) pcap_close(handles_->dead);
#endif
}

absl::StatusOr<std::unique_ptr<PcapRing>> PcapRing::Open(PcapRingOptions options) {
#if ATP_HAVE_PCAP
  std::unique_ptr<PcapRing> ring(new PcapRing(std::move(options)));
  ring->handles_->dead =
      pcap_open_dead_with_tstamp_precision(DLT_EN10MB, kSnapLength, PCAP_TSTAMP_PRECISION_NANO);
  if (ring->handles_->dead == nullptr) return absl::InternalError("pcap_open_dead failed");
  if (!ring->StartFile()) return absl::UnavailableError(ring->error_);
  return ring;
#else
  (void)options;
  return absl::FailedPreconditionError(
      "packet capture: this libatp was built without libpcap (install libpcap-dev and "
      "configure with -DLIBATP_WITH_PCAP=ON)");
#endif
}

bool PcapRing::StartFile() {
#if ATP_HAVE_PCAP
  const std::string path =
      options_.single_file
          ? absl::StrCat(options_.directory, "/", options_.stem)
          : absl::StrFormat("%s/%s-%05u.pcap", options_.directory, options_.stem, next_index_);
  ++next_index_;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    error_ = absl::StrCat("packet capture: ", path, ": ", std::strerror(errno));
    return false;
  }
  // A large buffer: one write(2) per kWriteBufferBytes rather than per 4 KiB.
  std::setvbuf(file, nullptr, _IOFBF, kWriteBufferBytes);
  handles_->dumper = pcap_dump_fopen(handles_->dead, file);  // owns `file` from here on
  if (handles_->dumper == nullptr) {
    error_ = absl::StrCat("packet capture: ", path, ": ", pcap_geterr(handles_->dead));
    std::fclose(file);
    return false;
  }
  files_.push_back(path);
  file_bytes_ = kFileHeaderBytes;
  if (!options_.single_file && options_.max_files > 0) {
    while (files_.size() > options_.max_files) {
      std::remove(files_.front().c_str());
      files_.pop_front();
    }
  }
  return true;
#else
  return false;
#endif
}

void PcapRing::CloseFile() {
#if ATP_HAVE_PCAP
  if (handles_->dumper != nullptr) {
    pcap_dump_close(handles_->dumper);
    handles_->dumper = nullptr;
  }
#endif
}

bool PcapRing::Write(std::span<const uint8_t> frame, int64_t time_ns) {
#if ATP_HAVE_PCAP
  if (handles_->dumper == nullptr) return false;
  const uint64_t record = kRecordHeaderBytes + frame.size();
  if (!options_.single_file && file_bytes_ + record > options_.max_file_bytes &&
      file_bytes_ > kFileHeaderBytes) {
    CloseFile();
    if (!StartFile()) return false;
  }
  pcap_pkthdr header{};
  // With nanosecond precision libpcap reads tv_usec as nanoseconds.
  header.ts.tv_sec = static_cast<time_t>(time_ns / 1'000'000'000);
  header.ts.tv_usec = static_cast<suseconds_t>(time_ns % 1'000'000'000);
  header.caplen = static_cast<bpf_u_int32>(std::min<size_t>(frame.size(), kSnapLength));
  header.len = static_cast<bpf_u_int32>(frame.size());
  pcap_dump(reinterpret_cast<u_char*>(handles_->dumper), &header, frame.data());
  file_bytes_ += record;
  ++frames_written_;
  return true;
#else
  (void)frame;
  (void)time_ns;
  return false;
#endif
}

void PcapRing::Flush() {
#if ATP_HAVE_PCAP
  if (handles_->dumper != nullptr) pcap_dump_flush(handles_->dumper);
#endif
}

}  // namespace atp::capture
