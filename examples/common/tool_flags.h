// examples/common/tool_flags.h: the flags that both the in-process cluster
// and the endpoint processes read (--transport, polling and retransmission
// floor). The tools parse their command line with lib/tool/command_line.h,
// listing "examples/common/" among their flag sources (kSharedFlagSource).
#ifndef ATP_EXAMPLES_COMMON_TOOL_FLAGS_H_
#define ATP_EXAMPLES_COMMON_TOOL_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "atp/options.h"
#include "lib/tool/command_line.h"

namespace atp::examples {

// kBadFlagsExit: the exit status of every tool for bad flags.
inline constexpr int kBadFlagsExit = tool::kExitBadUsage;

// kSharedFlagSource: where the flags shared by the example tools are defined
// (this file's and endpoint_flags.h's); every tool lists it among the flag
// sources it gives tool::ParseCommandLineOrExit.
inline constexpr char kSharedFlagSource[] = "examples/common/";

// TransportFlag: --transport as given ("" when not given: each tool picks its
// default, see ResolvedTransportFlag).
std::string TransportFlag();
// ResolvedTransportFlag: --transport, or `fallback` when it was not given.
std::string ResolvedTransportFlag(const std::string& fallback);

// kMaxRtoFloorUs: the largest --rto_floor_us (a minute).
inline constexpr int kMaxRtoFloorUs = 60'000'000;

// PollingFromFlags: adaptive back-off from --spin_iterations,
// --yield_iterations, --min_sleep_us and --max_sleep_us, or busy polling with
// --busy_poll; an error naming the flag for a bad value
// (tool::PollingFromFlags).
absl::StatusOr<PollingOptions> PollingFromFlags();

// ApplyRetransmissionFlags: sets job->retransmission_floor, raises the
// initial and maximum timeouts to at least the floor and the stall timeout
// to at least twice the maximum; an error naming --rto_floor_us
// for a value out of its range.
absl::Status ApplyRetransmissionFlags(JobOptions* job);

}  // namespace atp::examples

#endif  // ATP_EXAMPLES_COMMON_TOOL_FLAGS_H_
