// lib/ps/coverage.h: which workers of a job have contributed to one seq at the
// PS, and the duplicate rule of ATP-SPEC section 6: a packet that overlaps what
// is already covered is dropped whole (never partially merged); its missing
// parts come back through resends.
//
//   switch (coverage.TryAdd(layout, who)) {
//     case AddOutcome::kOverlap: ++duplicates; return;
//     case AddOutcome::kMismatch: ++shape_mismatch; return;
//     case AddOutcome::kAdded: break;
//   }
//   if (coverage.IsComplete(layout)) { ... send the parameter packet ... }
//
// With declared fan-ins (JobLayout::declared_fan_ins(), SkipReduce's
// contribution variant) the seq's contributor set comes from its packets: the
// first packet fixes how many racks contribute, the first packet of each rack
// how many of its workers do; a later packet that declares otherwise is a
// mismatch and changes nothing.
#ifndef ATP_LIB_PS_COVERAGE_H_
#define ATP_LIB_PS_COVERAGE_H_

#include <array>
#include <bit>
#include <cstdint>

#include "atp/wire.h"
#include "lib/ps/job_layout.h"

namespace atp::ps {

enum class AddOutcome : uint8_t {
  kAdded,
  kOverlap,   // a worker of `who` is already covered: a duplicate
  kMismatch,  // declared fan-ins only: disagrees with the seq's declared set
};

class Coverage {
 public:
  // Clear: nobody has contributed. Only the racks that were covered are
  // written: the PS clears a slot at every completion, and most completions
  // (a whole job from the switches) touched one rack of 32.
  void Clear() {
    for (uint32_t racks = touched_racks_; racks != 0; racks &= racks - 1) {
      const auto r = static_cast<size_t>(std::countr_zero(racks));
      workers_[r] = 0;
      rack_target_[r] = 0;
    }
    touched_racks_ = 0;
    complete_racks_ = 0;
    racks_target_ = 0;
  }

  // TryAdd: covers `who` (from layout.Parse) and returns kAdded; otherwise
  // changes nothing.
  AddOutcome TryAdd(const JobLayout& layout, const Contributors& who);

  // CoversAll: every worker of `who` is already covered.
  bool CoversAll(const Contributors& who) const;

  // IsComplete: every worker of every rack (of the declared set, with
  // declared fan-ins) is covered.
  bool IsComplete(const JobLayout& layout) const {
    if (layout.declared_fan_ins()) return racks_target_ != 0 && complete_racks_ == racks_target_;
    return complete_racks_ == layout.all_racks();
  }

  // workers: bit i = worker i of `rack` is covered (all ones for a rack a
  // level-2 packet covered under declared fan-ins).
  uint32_t workers(int rack) const { return workers_[static_cast<size_t>(rack)]; }
  // declared_workers: declared fan-ins only: the bitmap that completes `rack`
  // (0 while it is unknown, i.e. when only a level-2 packet covered it).
  uint32_t declared_workers(int rack) const { return rack_target_[static_cast<size_t>(rack)]; }
  // complete_racks: bit r = rack r fully covered.
  uint32_t complete_racks() const { return complete_racks_; }

 private:
  AddOutcome TryAddDeclared(const Contributors& who);

  std::array<uint32_t, wire::kMaxFanIn> workers_{};      // per rack
  std::array<uint32_t, wire::kMaxFanIn> rack_target_{};  // declared fan-ins only
  uint32_t complete_racks_ = 0;                          // bit r: rack r fully covered
  uint32_t racks_target_ = 0;                            // declared fan-ins only; 0 = none yet
  // touched_racks_: bit r: workers_[r] or rack_target_[r] may be non-zero.
  uint32_t touched_racks_ = 0;
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_COVERAGE_H_
