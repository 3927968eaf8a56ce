// sim/loss_filters.h: filters that lose frames: independent random loss,
// loss in bursts (Gilbert-Elliott), and a blackhole for a window of time.
//
//   link->AddFilter(std::make_unique<RandomLossFilter>(0.001, seed));
//   link->AddFilter(std::make_unique<BlackholeFilter>(start, start + 5ms,
//                                                     TrafficClass::kGradients));
#ifndef ATP_SIM_LOSS_FILTERS_H_
#define ATP_SIM_LOSS_FILTERS_H_

#include <cstdint>

#include "sim/packet_filter.h"
#include "sim/random.h"

namespace atp::sim {

// RandomLossFilter: drops each selected frame independently with probability
// `rate` (0..1).
class RandomLossFilter : public PacketFilter {
 public:
  RandomLossFilter(double rate, uint64_t seed, TrafficClass traffic = TrafficClass::kAll);
  std::string_view name() const override { return "random_loss"; }

 protected:
  void Apply(Packet& packet, TimePoint wire_time, FilterOutcome& outcome) override;

 private:
  Random random_;
  uint64_t threshold_;
};

// GilbertElliottConfig: a two-state Markov loss model, stepped once per frame.
// The mean burst length in the bad state is 1 / bad_to_good frames.
struct GilbertElliottConfig {
  double good_to_bad = 0.001;  // per frame, probability of entering the bad state
  double bad_to_good = 0.1;    // per frame, probability of leaving it
  double loss_in_good = 0.0;   // loss probability while good
  double loss_in_bad = 1.0;    // loss probability while bad

  // MeanLossRate: the stationary loss probability.
  double MeanLossRate() const;
};

class GilbertElliottLossFilter : public PacketFilter {
 public:
  GilbertElliottLossFilter(const GilbertElliottConfig& config, uint64_t seed,
                           TrafficClass traffic = TrafficClass::kAll);
  std::string_view name() const override { return "burst_loss"; }

 protected:
  void Apply(Packet& packet, TimePoint wire_time, FilterOutcome& outcome) override;

 private:
  Random random_;
  uint64_t to_bad_;
  uint64_t to_good_;
  uint64_t loss_good_;
  uint64_t loss_bad_;
  bool bad_ = false;
};

// BlackholeFilter: drops every selected frame whose wire time is in
// [start, end).
class BlackholeFilter : public PacketFilter {
 public:
  BlackholeFilter(TimePoint start, TimePoint end, TrafficClass traffic = TrafficClass::kAll);
  std::string_view name() const override { return "blackhole"; }

 protected:
  void Apply(Packet& packet, TimePoint wire_time, FilterOutcome& outcome) override;

 private:
  TimePoint start_;
  TimePoint end_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_LOSS_FILTERS_H_
