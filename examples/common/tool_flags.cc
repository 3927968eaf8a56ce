// examples/common/tool_flags.cc: the shared flags.
#include "examples/common/tool_flags.h"

#include <algorithm>
#include <string>

#include "absl/flags/flag.h"
#include "lib/tool/flag_checks.h"

ABSL_FLAG(std::string, transport, "",
          "Where the frames travel. In-process job (atp-throughput --role=cluster, atp-ping): "
          "'loopback' (default: an in-process wire with the ATP switch pipelines) or "
          "'kernel_udp' (sockets on 127.0.0.1, no switch). Endpoint processes (atp-ps, "
          "atp-throughput --role=worker): 'dpdk' (default: a DPDK port, see --dpdk_port) or "
          "'kernel_udp' (the kernel UDP overlay, when this libatp has it).");
ABSL_FLAG(int, rto_floor_us, 1000,
          "Workers only (atp-ps refuses it: the PS never retransmits): retransmission timeout "
          "floor, microseconds, 1..60000000 (past 5 s it raises the stall timeout to twice the "
          "longest backed-off timeout). On a machine with fewer cores than threads, scheduling "
          "delays beyond it cause spurious resends.");
ABSL_FLAG(int, max_sleep_us, 1000,
          "Longest sleep of an idle I/O thread, microseconds, 1..1000000 (a thread sleeps on its queues' "
          "wait fds, so a frame wakes it sooner; on memif, which has none, this bounds the latency "
          "a sleep adds per hop).");
ABSL_FLAG(int, spin_iterations, atp::PollingOptions{}.spin_iterations,
          "Idle rounds an I/O thread spins (no syscall) before it yields; 0 by default, spin only "
          "with a core per I/O thread (a spinner delays the thread that holds the next frame).");
ABSL_FLAG(int, yield_iterations, atp::PollingOptions{}.yield_iterations,
          "Idle rounds an I/O thread yields the CPU (sched_yield) after spinning, before it "
          "sleeps.");
ABSL_FLAG(int, min_sleep_us, 20,
          "First sleep of an idle I/O thread, microseconds, 1..--max_sleep_us; each further idle sleep doubles, up "
          "to --max_sleep_us.");
ABSL_FLAG(bool, busy_poll, false,
          "I/O threads never sleep (lowest latency; needs a core per thread). Default: adaptive "
          "back-off (yield, then sleep on the queues' wait_fds).");
ABSL_FLAG(std::string, cpus, "",
          "CPUs the I/O threads run on, comma-separated ids (e.g. 0,1): thread i on the i-th, "
          "modulo their count (PollingOptions::cpus); a job in this process with a fabric thread "
          "(atp-throughput --role=cluster, atp-ping): the fabric's thread on the first, the I/O "
          "threads on the others in turn. Default: unpinned.");

namespace atp::examples {

std::string TransportFlag() { return absl::GetFlag(FLAGS_transport); }

std::string ResolvedTransportFlag(const std::string& fallback) {
  const std::string t = TransportFlag();
  return t.empty() ? fallback : t;
}

absl::StatusOr<PollingOptions> PollingFromFlags() {
  return tool::PollingFromFlags({.busy_poll = absl::GetFlag(FLAGS_busy_poll),
                                 .spin_iterations = absl::GetFlag(FLAGS_spin_iterations),
                                 .yield_iterations = absl::GetFlag(FLAGS_yield_iterations),
                                 .min_sleep_us = absl::GetFlag(FLAGS_min_sleep_us),
                                 .max_sleep_us = absl::GetFlag(FLAGS_max_sleep_us),
                                 .cpus = absl::GetFlag(FLAGS_cpus)});
}

namespace {

// RetransmissionFloorFromFlags: --rto_floor_us, or the error naming it.
absl::StatusOr<absl::Duration> RetransmissionFloorFromFlags() {
  const int floor_us = absl::GetFlag(FLAGS_rto_floor_us);
  if (absl::Status s = tool::CheckRange("rto_floor_us", floor_us, 1, kMaxRtoFloorUs); !s.ok()) {
    return s;
  }
  return absl::Microseconds(floor_us);
}

}  // namespace

absl::Status ApplyRetransmissionFlags(JobOptions* job) {
  absl::StatusOr<absl::Duration> floor = RetransmissionFloorFromFlags();
  if (!floor.ok()) return floor.status();
  job->retransmission_floor = *floor;
  job->initial_retransmission_timeout =
      std::max(job->initial_retransmission_timeout, job->retransmission_floor);
  job->max_retransmission_timeout =
      std::max(job->max_retransmission_timeout, job->initial_retransmission_timeout);
  // JobOptions' rule: a live PS gets two resends before a queue counts as
  // stalled. A floor past half the stall timeout (10 s by default) takes the
  // stall timeout with it, so that the whole documented range is usable.
  if (job->stall_timeout != absl::InfiniteDuration()) {
    job->stall_timeout = std::max(job->stall_timeout, 2 * job->max_retransmission_timeout);
  }
  return absl::OkStatus();
}

}  // namespace atp::examples
