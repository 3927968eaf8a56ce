// sim/collectives/collective_run.h: plays a CollectiveSchedule
// (schedule.h) on simulated links: N hosts on one crossbar switch, each with
// an uplink and a downlink of the same LinkConfig, the way the ATP
// experiments (sim/experiment.h) connect workers to their ToR, so the two
// can be compared on the same links.
//
// Transfers travel as frames of the ATP frame size carrying 248 bytes each
// (an ATP fragment's payload), so a byte costs the same on both. A host
// starts its part of step i+1 once it has queued its step-i frames and
// received every frame step i sends it. Uses only the simulator core
// (Simulator, Link, PacketPool).
//
//   ATP_ASSIGN_OR_RETURN(CollectiveSchedule s, BuildSchedule(LogicalTopology::kTree, 16, 1 << 20, 1));
//   ATP_ASSIGN_OR_RETURN(CollectiveRunResult r, RunCollective(s, LinkConfig{}));
//   r.completion_time;
#ifndef ATP_SIM_COLLECTIVES_COLLECTIVE_RUN_H_
#define ATP_SIM_COLLECTIVES_COLLECTIVE_RUN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "sim/collectives/schedule.h"
#include "sim/link.h"

namespace atp::sim {

// Bytes of a transfer a frame carries: an ATP fragment's payload.
inline constexpr uint64_t kCollectiveFrameBytes = 248;

struct CollectiveRunResult {
  bool completed = false;     // every host finished every step
  TimeDelta completion_time;  // start to the last host's last step
  uint64_t frames_sent = 0;   // by the hosts
  uint64_t frame_deliveries = 0;  // over all links
  uint64_t tail_drops = 0;
};

// RunCollective: deterministic; InvalidArgument for a bad link config.
absl::StatusOr<CollectiveRunResult> RunCollective(const CollectiveSchedule& schedule,
                                                  const LinkConfig& host_link);

}  // namespace atp::sim

#endif  // ATP_SIM_COLLECTIVES_COLLECTIVE_RUN_H_
