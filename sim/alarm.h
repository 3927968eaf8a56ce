// sim/alarm.h: an Actor that runs a callback at a set time: scripted
// events of a scenario (a switch wipes its state at t = 2 ms, a worker dies,
// a sampler ticks).
#ifndef ATP_SIM_ALARM_H_
#define ATP_SIM_ALARM_H_

#include <functional>
#include <utility>

#include "sim/simulator.h"

namespace atp::sim {

class Alarm : public Actor {
 public:
  // `sim` outlives the alarm. The callback gets the time it fires at; it may
  // Set the alarm again (periodic alarms).
  Alarm(Simulator* sim, std::function<void(TimePoint)> callback)
      : sim_(sim), callback_(std::move(callback)) {}
  ~Alarm() override { sim_->Unschedule(this); }

  // Set: fire at `time` (replacing a later pending time; see Actor).
  void Set(TimePoint time) { sim_->Schedule(this, time); }
  void Cancel() { sim_->Unschedule(this); }

  void Act(TimePoint now) override { callback_(now); }

 private:
  Simulator* sim_;
  std::function<void(TimePoint)> callback_;
};

}  // namespace atp::sim

#endif  // ATP_SIM_ALARM_H_
