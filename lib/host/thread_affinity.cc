#include "lib/host/thread_affinity.h"

#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace atp::host {

absl::Status PinThread(std::thread& thread, int cpu, absl::string_view field) {
  cpu_set_t only;
  CPU_ZERO(&only);
  CPU_SET(cpu, &only);
  const int error = pthread_setaffinity_np(thread.native_handle(), sizeof(only), &only);
  if (error == EINVAL) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": CPU ", cpu, " is not one this process may run on (its cpuset: "
        "/proc/self/status Cpus_allowed_list)"));
  }
  if (error != 0) {
    return absl::InternalError(
        absl::StrCat(field, ": pthread_setaffinity_np: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace atp::host
