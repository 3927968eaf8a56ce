// examples/common/tool_flags.cc: the shared flags.
#include "examples/common/tool_flags.h"

#include <algorithm>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, transport, "",
          "Where the frames travel. In-process job (atp-throughput --role=cluster, atp-ping): "
          "'loopback' (default: an in-process wire with the ATP switch pipelines) or "
          "'kernel_udp' (sockets on 127.0.0.1, no switch). Endpoint processes (atp-ps, "
          "atp-throughput --role=worker): 'dpdk' (default: a DPDK port, see --dpdk_port) or "
          "'kernel_udp' (the kernel UDP overlay, when this libatp has it).");
ABSL_FLAG(int, rto_floor_us, 1000,
          "Retransmission timeout floor, microseconds. On a machine with fewer cores than "
          "threads, scheduling delays beyond it cause spurious resends.");
ABSL_FLAG(int, max_sleep_us, 1000,
          "Longest sleep of an idle I/O thread, microseconds (the loopback transport cannot wake "
          "a sleeping receiver, so this bounds the latency it adds per hop).");
ABSL_FLAG(int, spin_iterations, atp::PollingOptions{}.spin_iterations,
          "Idle rounds an I/O thread spins (no syscall) before it yields; 0 by default, spin only "
          "with a core per I/O thread (a spinner delays the thread that holds the next frame).");
ABSL_FLAG(int, yield_iterations, atp::PollingOptions{}.yield_iterations,
          "Idle rounds an I/O thread yields the CPU (sched_yield) after spinning, before it "
          "sleeps.");
ABSL_FLAG(int, min_sleep_us, 20,
          "First sleep of an idle I/O thread, microseconds; each further idle sleep doubles, up "
          "to --max_sleep_us.");
ABSL_FLAG(bool, busy_poll, false,
          "I/O threads never sleep (lowest latency; needs a core per thread). Default: adaptive "
          "back-off (yield, then sleep on the queues' wait_fds).");

namespace atp::examples {

std::string TransportFlag() { return absl::GetFlag(FLAGS_transport); }

std::string ResolvedTransportFlag(const std::string& fallback) {
  const std::string t = TransportFlag();
  return t.empty() ? fallback : t;
}

PollingOptions PollingFromFlags() {
  if (absl::GetFlag(FLAGS_busy_poll)) return PollingOptions::BusyPolling();
  PollingOptions polling;
  polling.spin_iterations = static_cast<uint32_t>(std::max(absl::GetFlag(FLAGS_spin_iterations), 0));
  polling.yield_iterations = static_cast<uint32_t>(std::max(absl::GetFlag(FLAGS_yield_iterations), 0));
  polling.max_sleep = absl::Microseconds(absl::GetFlag(FLAGS_max_sleep_us));
  polling.min_sleep = std::min(absl::Microseconds(std::max(absl::GetFlag(FLAGS_min_sleep_us), 1)),
                               polling.max_sleep);
  return polling;
}

absl::Duration RetransmissionFloorFromFlags() {
  return absl::Microseconds(absl::GetFlag(FLAGS_rto_floor_us));
}

void ApplyRetransmissionFlags(JobOptions* job) {
  job->retransmission_floor = RetransmissionFloorFromFlags();
  job->initial_retransmission_timeout =
      std::max(job->initial_retransmission_timeout, job->retransmission_floor);
  job->max_retransmission_timeout =
      std::max(job->max_retransmission_timeout, job->initial_retransmission_timeout);
}

}  // namespace atp::examples
