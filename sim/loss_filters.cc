#include "sim/loss_filters.h"

namespace atp::sim {

RandomLossFilter::RandomLossFilter(double rate, uint64_t seed, TrafficClass traffic)
    : PacketFilter(traffic), random_(seed), threshold_(ProbabilityThreshold(rate)) {}

void RandomLossFilter::Apply(Packet&, TimePoint, FilterOutcome& outcome) {
  if (random_.Next() < threshold_) {
    outcome.dropped = true;
    CountAffected();
  }
}

double GilbertElliottConfig::MeanLossRate() const {
  const double total = good_to_bad + bad_to_good;
  if (total <= 0.0) return loss_in_good;
  const double p_bad = good_to_bad / total;
  return p_bad * loss_in_bad + (1.0 - p_bad) * loss_in_good;
}

GilbertElliottLossFilter::GilbertElliottLossFilter(const GilbertElliottConfig& config,
                                                   uint64_t seed, TrafficClass traffic)
    : PacketFilter(traffic),
      random_(seed),
      to_bad_(ProbabilityThreshold(config.good_to_bad)),
      to_good_(ProbabilityThreshold(config.bad_to_good)),
      loss_good_(ProbabilityThreshold(config.loss_in_good)),
      loss_bad_(ProbabilityThreshold(config.loss_in_bad)) {}

void GilbertElliottLossFilter::Apply(Packet&, TimePoint, FilterOutcome& outcome) {
  // Step the chain, then draw the loss in the new state.
  if (bad_) {
    if (random_.Next() < to_good_) bad_ = false;
  } else {
    if (random_.Next() < to_bad_) bad_ = true;
  }
  if (random_.Next() < (bad_ ? loss_bad_ : loss_good_)) {
    outcome.dropped = true;
    CountAffected();
  }
}

BlackholeFilter::BlackholeFilter(TimePoint start, TimePoint end, TrafficClass traffic)
    : PacketFilter(traffic), start_(start), end_(end) {}

void BlackholeFilter::Apply(Packet&, TimePoint wire_time, FilterOutcome& outcome) {
  if (wire_time >= start_ && wire_time < end_) {
    outcome.dropped = true;
    CountAffected();
  }
}

}  // namespace atp::sim
