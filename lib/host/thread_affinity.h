// lib/host/thread_affinity.h: putting a thread on one CPU
// (PollingOptions::cpus), for the polling threads and atp-switchd's datapath
// thread alike.
#ifndef ATP_LIB_HOST_THREAD_AFFINITY_H_
#define ATP_LIB_HOST_THREAD_AFFINITY_H_

#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace atp::host {

// PinThread: `thread` runs on `cpu` only. InvalidArgumentError naming the CPU
// when this process may not run there, prefixed with `field` (the option
// the CPU came from, e.g. "PollingOptions.cpus"): the kernel decides (EINVAL
// for a CPU outside the process's cpuset); the calling thread's own affinity
// (which OpenMP runtimes pin, in a Python process) does not matter.
absl::Status PinThread(std::thread& thread, int cpu, absl::string_view field);

}  // namespace atp::host

#endif  // ATP_LIB_HOST_THREAD_AFFINITY_H_
