// examples/common/tool_flags.h: command-line handling every example tool
// shares: Abseil flags with --help limited to the tool's own flags, bad flags
// refused with exit status 2 (Abseil itself exits with 1), and the flags that
// both the in-process cluster and the endpoint processes read (--transport,
// polling and retransmission floor).
#ifndef ATP_EXAMPLES_COMMON_TOOL_FLAGS_H_
#define ATP_EXAMPLES_COMMON_TOOL_FLAGS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "atp/options.h"

namespace atp::examples {

// kBadFlagsExit: the exit status of every tool for bad flags.
inline constexpr int kBadFlagsExit = 2;

// ParseToolFlagsOrExit: sets the usage message, limits --help to flags
// defined in files whose path contains one of `flag_dirs` (plus the shared
// ones in examples/common), checks every --flag of argv (known name, value
// parses) and exits with kBadFlagsExit naming it when it is wrong, then parses
// argv; a stray positional argument also exits with kBadFlagsExit.
void ParseToolFlagsOrExit(int argc, char** argv, const std::vector<std::string>& flag_dirs,
                          const std::string& usage);

// TransportFlag: --transport as given ("" when not given: each tool picks its
// default, see ResolvedTransportFlag).
std::string TransportFlag();
// ResolvedTransportFlag: --transport, or `fallback` when it was not given.
std::string ResolvedTransportFlag(const std::string& fallback);

// PollingFromFlags: adaptive back-off from --max_sleep_us, or busy polling
// with --busy_poll.
PollingOptions PollingFromFlags();
// RetransmissionFloorFromFlags: --rto_floor_us.
absl::Duration RetransmissionFloorFromFlags();

// ApplyRetransmissionFlags: sets job->retransmission_floor and raises the
// initial and maximum timeouts to at least the floor.
void ApplyRetransmissionFlags(JobOptions* job);

}  // namespace atp::examples

#endif  // ATP_EXAMPLES_COMMON_TOOL_FLAGS_H_
