// transport/dpdk/status.h: DPDK error numbers as absl::Status, and the EAL
// check every entry point makes. Private to transport/dpdk.
#ifndef ATP_TRANSPORT_DPDK_STATUS_H_
#define ATP_TRANSPORT_DPDK_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "atp/status_macros.h"

namespace atp::transport::internal {

// RteErrorStatus: `what` failed with DPDK error `error` (an errno value, or
// one of DPDK's own; negative values are taken as their absolute value):
// "what: <rte_strerror>", with the status code of the errno.
absl::Status RteErrorStatus(int error, std::string_view what);

// EalInitialized: InitDpdkEal has succeeded in this process.
bool EalInitialized();

}  // namespace atp::transport::internal

#endif  // ATP_TRANSPORT_DPDK_STATUS_H_
