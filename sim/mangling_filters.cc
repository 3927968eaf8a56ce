#include "sim/mangling_filters.h"

#include "atp/wire.h"

namespace atp::sim {

ReorderFilter::ReorderFilter(double rate, TimeDelta max_extra_delay, uint64_t seed,
                             TrafficClass traffic)
    : PacketFilter(traffic),
      random_(seed),
      threshold_(ProbabilityThreshold(rate)),
      max_extra_ns_(max_extra_delay.ToNanoseconds() > 0 ? max_extra_delay.ToNanoseconds() : 1) {}

void ReorderFilter::Apply(Packet&, TimePoint, FilterOutcome& outcome) {
  if (random_.Next() < threshold_) {
    const int64_t extra = 1 + static_cast<int64_t>(random_.Below(static_cast<uint64_t>(max_extra_ns_)));
    outcome.extra_delay += TimeDelta::FromNanoseconds(extra);
    CountAffected();
  }
}

DuplicateFilter::DuplicateFilter(double rate, uint64_t seed, TrafficClass traffic)
    : PacketFilter(traffic), random_(seed), threshold_(ProbabilityThreshold(rate)) {}

void DuplicateFilter::Apply(Packet&, TimePoint, FilterOutcome& outcome) {
  if (random_.Next() < threshold_) {
    ++outcome.extra_copies;
    CountAffected();
  }
}

CorruptFilter::CorruptFilter(double rate, uint64_t seed, TrafficClass traffic)
    : PacketFilter(traffic), random_(seed), threshold_(ProbabilityThreshold(rate)) {}

void CorruptFilter::Apply(Packet& packet, TimePoint, FilterOutcome&) {
  if (random_.Next() < threshold_) {
    const size_t offset = wire::kIpv4Offset + random_.Below(wire::kIpv4HeaderBytes);
    const uint8_t flip = static_cast<uint8_t>(1 + random_.Below(255));  // never 0
    packet.bytes[offset] ^= flip;
    CountAffected();
  }
}

}  // namespace atp::sim
