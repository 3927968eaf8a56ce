// examples/common/endpoint_flags.h: the common flags of the endpoint
// processes (atp-ps, atp-throughput --role=worker), defined in
// endpoint_flags.cc. Linking that file adds them to a tool's command line.
#ifndef ATP_EXAMPLES_COMMON_ENDPOINT_FLAGS_H_
#define ATP_EXAMPLES_COMMON_ENDPOINT_FLAGS_H_

#include "absl/flags/declare.h"
#include "examples/common/endpoint.h"

// Job flags, also read by atp-throughput's in-process mode.
ABSL_DECLARE_FLAG(int, racks);
ABSL_DECLARE_FLAG(int, io_threads);

namespace atp::examples {

// EndpointFlagsFromCommandLine: the parsed flags' values (--transport
// defaulting to "dpdk").
EndpointFlags EndpointFlagsFromCommandLine();

}  // namespace atp::examples

#endif  // ATP_EXAMPLES_COMMON_ENDPOINT_FLAGS_H_
