#include "lib/host/source_admission.h"

#include <algorithm>

namespace atp::host {

SourceAdmission SourceAdmission::Only(std::span<const transport::DeviceAddress> sources,
                                      SourceCheck check) {
  SourceAdmission a;
  if (check == SourceCheck::kOff) return a;
  a.compare_mac_ = check == SourceCheck::kIpv4AndMac;
  for (const transport::DeviceAddress& s : sources) a.sources_.push_back({s.ipv4.value, s.mac.bytes});
  std::sort(a.sources_.begin(), a.sources_.end(),
            [](const Source& x, const Source& y) { return x.ipv4 < y.ipv4; });
  // One entry per address (the first MAC given for it wins).
  a.sources_.erase(std::unique(a.sources_.begin(), a.sources_.end(),
                               [](const Source& x, const Source& y) { return x.ipv4 == y.ipv4; }),
                   a.sources_.end());
  return a;
}

}  // namespace atp::host
