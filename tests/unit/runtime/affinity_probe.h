// tests/unit/runtime/affinity_probe.h: what CPUs a polling thread (or
// atp-switchd's datapath thread) may run on, read from inside it
// (PollingOptions::cpus tests).
#ifndef ATP_TESTS_UNIT_RUNTIME_AFFINITY_PROBE_H_
#define ATP_TESTS_UNIT_RUNTIME_AFFINITY_PROBE_H_

#include <sched.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "lib/host/polling_thread.h"

namespace atp::host {

// AllowedCpusOfThisThread: the CPUs the calling thread may run on, in order.
inline std::vector<int> AllowedCpusOfThisThread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return {};  // 0: the calling thread
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// AllowedCpus: the CPUs this process may run on (the test's main thread's,
// which nothing pins), in order.
inline std::vector<int> AllowedCpus() { return AllowedCpusOfThisThread(); }

// AffinityProbe: a step that records its thread's affinity on its first call.
class AffinityProbe {
 public:
  PollingThread::StepFunction Step() {
    return [this](TimePoint) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!cpus_.has_value()) {
        cpus_ = AllowedCpusOfThisThread();
        seen_.notify_all();
      }
      return StepResult{};
    };
  }
  // Cpus: the affinity the step saw (empty after 10 s without a call).
  std::vector<int> Cpus() {
    std::unique_lock<std::mutex> lock(mu_);
    seen_.wait_for(lock, std::chrono::seconds(10), [this] { return cpus_.has_value(); });
    return cpus_.value_or(std::vector<int>{});
  }

 private:
  std::mutex mu_;
  std::condition_variable seen_;
  std::optional<std::vector<int>> cpus_;
};

}  // namespace atp::host

#endif  // ATP_TESTS_UNIT_RUNTIME_AFFINITY_PROBE_H_
