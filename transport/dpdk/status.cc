// transport/dpdk/status.cc
#include "transport/dpdk/status.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "transport/dpdk/dpdk_headers.h"

namespace atp::transport::internal {

absl::Status RteErrorStatus(int error, std::string_view what) {
  const int code = std::abs(error);
  return absl::Status(absl::ErrnoToStatusCode(code),
                      std::string(what) + ": " + ::rte_strerror(code));
}

}  // namespace atp::transport::internal
