// sim/mangling_filters.h: filters that deliver frames wrongly rather than
// losing them: reordering, duplication and corruption.
//
//   link->AddFilter(std::make_unique<ReorderFilter>(0.01, TimeDelta::FromMicroseconds(20), seed));
//   link->AddFilter(std::make_unique<CorruptFilter>(0.001, seed));
#ifndef ATP_SIM_MANGLING_FILTERS_H_
#define ATP_SIM_MANGLING_FILTERS_H_

#include <cstdint>

#include "sim/packet_filter.h"
#include "sim/random.h"

namespace atp::sim {

// ReorderFilter: holds back each selected frame with probability `rate` by an
// extra delay drawn uniformly from (0, max_extra_delay], so that frames sent
// after it overtake it.
class ReorderFilter : public PacketFilter {
 public:
  ReorderFilter(double rate, TimeDelta max_extra_delay, uint64_t seed,
                TrafficClass traffic = TrafficClass::kAll);
  std::string_view name() const override { return "reorder"; }

 protected:
  void Apply(Packet& packet, TimePoint wire_time, FilterOutcome& outcome) override;

 private:
  Random random_;
  uint64_t threshold_;
  int64_t max_extra_ns_;
};

// DuplicateFilter: with probability `rate`, delivers one extra copy of the
// frame right behind it.
class DuplicateFilter : public PacketFilter {
 public:
  DuplicateFilter(double rate, uint64_t seed, TrafficClass traffic = TrafficClass::kAll);
  std::string_view name() const override { return "duplicate"; }

 protected:
  void Apply(Packet& packet, TimePoint wire_time, FilterOutcome& outcome) override;

 private:
  Random random_;
  uint64_t threshold_;
};

// CorruptFilter: with probability `rate`, flips bits of one byte of the frame.
//
// The byte is taken from the IPv4 header, the part of an ATP frame that a
// checksum protects (UDP checksum is 0 and the simulator does not model the
// Ethernet FCS, which a real NIC would use to drop the frame). Every single-
// byte change there breaks the IPv4 checksum, so every decoder (switch
// pipeline, worker, PS) must reject the frame: the corruption acts as a loss
// that the receivers count as malformed.
class CorruptFilter : public PacketFilter {
 public:
  CorruptFilter(double rate, uint64_t seed, TrafficClass traffic = TrafficClass::kAll);
  std::string_view name() const override { return "corrupt"; }

 protected:
  void Apply(Packet& packet, TimePoint wire_time, FilterOutcome& outcome) override;

 private:
  Random random_;
  uint64_t threshold_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_MANGLING_FILTERS_H_
