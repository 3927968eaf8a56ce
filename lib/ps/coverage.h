// lib/ps/coverage.h: which workers of a job have contributed to one seq at the
// PS, and the duplicate rule of ATP-SPEC section 6: a packet that overlaps what
// is already covered is dropped whole (never partially merged); its missing
// parts come back through resends.
//
//   if (!coverage.TryAdd(layout, who)) { ++duplicates; return; }
//   if (coverage.IsComplete(layout)) { ... send the parameter packet ... }
#ifndef ATP_LIB_PS_COVERAGE_H_
#define ATP_LIB_PS_COVERAGE_H_

#include <array>
#include <cstdint>

#include "atp/wire.h"
#include "lib/ps/job_layout.h"

namespace atp::ps {

class Coverage {
 public:
  // Clear: nobody has contributed.
  void Clear() {
    workers_.fill(0);
    complete_racks_ = 0;
  }

  // TryAdd: covers `who` and returns true, unless one of its workers is already
  // covered: then returns false and changes nothing. `who` comes from
  // layout.Parse.
  bool TryAdd(const JobLayout& layout, const Contributors& who);

  // CoversAll: every worker of `who` is already covered.
  bool CoversAll(const Contributors& who) const;

  // IsComplete: every worker of every rack is covered.
  bool IsComplete(const JobLayout& layout) const { return complete_racks_ == layout.all_racks(); }

  // workers: bit i = worker i of `rack` is covered.
  uint32_t workers(int rack) const { return workers_[static_cast<size_t>(rack)]; }

 private:
  std::array<uint32_t, wire::kMaxFanIn> workers_{};  // per rack
  uint32_t complete_racks_ = 0;                      // bit r: rack r fully covered
};

}  // namespace atp::ps

#endif  // ATP_LIB_PS_COVERAGE_H_
