// lib/host/source_admission.h: the source check of the worker and PS hosts
// (docs/security.md): a frame is handed to an engine only if its IPv4 source
// (and, with SourceCheck::kIpv4AndMac, its Ethernet source) is one the
// endpoint's options name: for a worker queue its PS, for a PS the job's
// workers. The engines never see a refused frame; the hosts count them.
//
//   SourceAdmission from_ps = SourceAdmission::Only({{ps}}, SourceCheck::kIpv4);
//   if (!from_ps.Admits(frame)) { ++source_refused; continue; }
//
// The check reads the frame's own L2/L3 header, so it stops a sender that
// does not forge its source; one that does (raw sockets on a host of the
// fabric) is stopped by the switches' ingress admission, or left to the
// network (docs/security.md says which check stops what). Cost: two loads
// and a compare per frame for one source; a binary search over sorted
// addresses for many (a job's workers).
#ifndef ATP_LIB_HOST_SOURCE_ADMISSION_H_
#define ATP_LIB_HOST_SOURCE_ADMISSION_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "atp/options.h"
#include "atp/transport.h"
#include "atp/wire.h"

namespace atp::host {

class SourceAdmission {
 public:
  // The default admits every source (the check is off).
  SourceAdmission() = default;

  // Only: admits frames from `sources` alone, compared as `check` says
  // (kOff, or no source at all: admits everything).
  static SourceAdmission Only(std::span<const transport::DeviceAddress> sources, SourceCheck check);

  // checks: whether Admits can refuse anything.
  bool checks() const { return !sources_.empty(); }

  // Admits: `frame` is a whole ATP frame (already validated).
  bool Admits(std::span<const uint8_t> frame) const {
    if (sources_.empty()) return true;
    const uint8_t* ip = frame.data() + wire::kIpv4Offset + kIpv4SourceOffset;
    const uint32_t source =
        (uint32_t{ip[0]} << 24) | (uint32_t{ip[1]} << 16) | (uint32_t{ip[2]} << 8) | ip[3];
    const Source* s = Find(source);
    if (s == nullptr) return false;
    return !compare_mac_ ||
           std::memcmp(frame.data() + kEthernetSourceOffset, s->mac.data(), s->mac.size()) == 0;
  }
  // Admits: the same for a frame already decoded.
  bool Admits(const wire::FrameFields& fields) const {
    if (sources_.empty()) return true;
    const Source* s = Find(fields.src_ip.value);
    return s != nullptr && (!compare_mac_ || s->mac == fields.src_mac.bytes);
  }

 private:
  static constexpr size_t kEthernetSourceOffset = 6;
  static constexpr size_t kIpv4SourceOffset = 12;
  // Linear search up to this many sources, binary search beyond.
  static constexpr size_t kLinearSources = 8;

  struct Source {
    uint32_t ipv4 = 0;  // host order
    std::array<uint8_t, 6> mac{};
  };

  const Source* Find(uint32_t ipv4) const {
    if (sources_.size() <= kLinearSources) {
      for (const Source& s : sources_) {
        if (s.ipv4 == ipv4) return &s;
      }
      return nullptr;
    }
    size_t low = 0, high = sources_.size();
    while (low < high) {
      const size_t mid = (low + high) / 2;
      if (sources_[mid].ipv4 < ipv4) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    return low < sources_.size() && sources_[low].ipv4 == ipv4 ? &sources_[low] : nullptr;
  }

  std::vector<Source> sources_;  // sorted by ipv4, distinct
  bool compare_mac_ = false;
};

}  // namespace atp::host

#endif  // ATP_LIB_HOST_SOURCE_ADMISSION_H_
