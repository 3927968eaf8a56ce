// lib/options/options.cc: the Validate() of every public options struct.
#include "atp/options.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "atp/wire.h"

namespace atp {
namespace {

constexpr uint32_t kMaxSlots = 1u << 16;  // lib/worker and lib/ps agree on it
constexpr uint32_t kMaxBurst = 256;

// Sv: Abseil 20220623 (Debian) has its own string_view, which StrCat wants.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status FieldError(std::string_view field, std::string_view name, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Sv(field), ".", Sv(name), ": ", Sv(what)));
}

absl::Status CheckBasePort(std::string_view field, uint16_t base_port) {
  if (base_port == 0 || uint32_t{base_port} + wire::kMaxQueues - 1 > 0xFFFF) {
    return FieldError(field, "base_port",
                      absl::StrCat(base_port, " is not in 1..", 0xFFFF - wire::kMaxQueues + 1,
                                   " (base_port + 15 must be a port)"));
  }
  return absl::OkStatus();
}

absl::Status CheckBurst(std::string_view field, uint32_t max_burst) {
  if (max_burst < 1 || max_burst > kMaxBurst) {
    return FieldError(field, "max_burst", absl::StrCat(max_burst, " is not in 1..", kMaxBurst));
  }
  return absl::OkStatus();
}

absl::Status CheckSlots(std::string_view field, uint32_t slots) {
  if (slots == 0 || !std::has_single_bit(slots) || slots > kMaxSlots) {
    return FieldError(field, "slots",
                      absl::StrCat(slots, " is not a power of two in 1..", kMaxSlots));
  }
  return absl::OkStatus();
}

absl::Status CheckSourceCheck(std::string_view field, std::string_view name, SourceCheck check) {
  if (check == SourceCheck::kIpv4 || check == SourceCheck::kIpv4AndMac ||
      check == SourceCheck::kOff) {
    return absl::OkStatus();
  }
  return FieldError(field, name, absl::StrCat(static_cast<int>(check), " is not a SourceCheck"));
}

bool IsMulticast(const transport::DeviceAddress& address) {
  return (address.ipv4.value >> 28) == 0xE;
}

}  // namespace

RackLayout RackLayout::Uniform(int racks, int workers_per_rack) {
  RackLayout layout;
  layout.workers_per_rack.assign(static_cast<size_t>(std::clamp(racks, 0, 255)),
                                 static_cast<uint8_t>(std::clamp(workers_per_rack, 0, 255)));
  return layout;
}

int RackLayout::total_workers() const {
  return std::accumulate(workers_per_rack.begin(), workers_per_rack.end(), 0);
}

int RackLayout::RankOf(int rack, int worker_in_rack) const {
  if (rack < 0 || rack >= racks() || worker_in_rack < 0 || worker_in_rack >= workers_in_rack(rack)) {
    return -1;
  }
  int rank = 0;
  for (int r = 0; r < rack; ++r) rank += workers_in_rack(r);
  return rank + worker_in_rack;
}

absl::Status RackLayout::Validate(std::string_view field) const {
  if (workers_per_rack.empty() || workers_per_rack.size() > wire::kMaxFanIn) {
    return FieldError(field, "workers_per_rack",
                      absl::StrCat("needs 1..", wire::kMaxFanIn, " racks, got ",
                                   workers_per_rack.size()));
  }
  for (size_t r = 0; r < workers_per_rack.size(); ++r) {
    const int w = workers_per_rack[r];
    if (w < 1 || w > wire::kMaxFanIn) {
      return FieldError(field, absl::StrCat("workers_per_rack[", r, "]"),
                        absl::StrCat("needs 1..", wire::kMaxFanIn, " workers, got ", w));
    }
  }
  return absl::OkStatus();
}

absl::Status SchedulerOptions::Validate(std::string_view field) const {
  if (min_piece_fragments < 1) {
    return FieldError(field, "min_piece_fragments", "must be at least 1");
  }
  if (max_piece_fragments < min_piece_fragments) {
    return FieldError(field, "max_piece_fragments",
                      absl::StrCat(max_piece_fragments, " is below min_piece_fragments (",
                                   min_piece_fragments, ")"));
  }
  return absl::OkStatus();
}

absl::Status JobOptions::Validate(std::string_view field) const {
  if (job_id == 0) return FieldError(field, "job_id", "must be 1..255, got 0");
  if (absl::Status s = layout.Validate(absl::StrCat(Sv(field), ".layout")); !s.ok()) return s;
  if (io_threads < 1 || io_threads > static_cast<uint32_t>(wire::kMaxQueues)) {
    return FieldError(field, "io_threads",
                      absl::StrCat(io_threads, " is not in 1..", wire::kMaxQueues));
  }
  if (!(std::isfinite(scale) && scale > 0)) {
    return FieldError(field, "scale", absl::StrCat("must be positive and finite, got ", scale));
  }
  if (scale < kMinScale) {
    return FieldError(field, "scale",
                      absl::StrCat(scale, " is below ", kMinScale,
                                   " (kMinScale): its int32 sums would dequantize past the "
                                   "largest float"));
  }
  if (absl::Status s = CheckSlots(field, slots); !s.ok()) return s;
  if (initial_window < 1 || initial_window > slots) {
    return FieldError(field, "initial_window",
                      absl::StrCat(initial_window, " is not in 1..slots (", slots, ")"));
  }
  if (congestion_control != CongestionControl::kAimd &&
      congestion_control != CongestionControl::kFixedWindow) {
    return FieldError(field, "congestion_control", "unknown value");
  }
  if (retransmission_floor <= absl::ZeroDuration() ||
      retransmission_floor == absl::InfiniteDuration()) {
    return FieldError(field, "retransmission_floor",
                      absl::StrCat("must be positive and finite, got ",
                                   absl::FormatDuration(retransmission_floor)));
  }
  if (initial_retransmission_timeout < retransmission_floor ||
      initial_retransmission_timeout == absl::InfiniteDuration()) {
    return FieldError(field, "initial_retransmission_timeout",
                      absl::StrCat("must be finite and >= retransmission_floor, got ",
                                   absl::FormatDuration(initial_retransmission_timeout)));
  }
  if (max_retransmission_timeout < initial_retransmission_timeout ||
      max_retransmission_timeout == absl::InfiniteDuration()) {
    return FieldError(field, "max_retransmission_timeout",
                      absl::StrCat("must be finite and >= initial_retransmission_timeout, got ",
                                   absl::FormatDuration(max_retransmission_timeout)));
  }
  if (absl::Status s = CheckBasePort(field, base_port); !s.ok()) return s;
  if (stall_timeout != absl::InfiniteDuration() &&
      stall_timeout < 2 * max_retransmission_timeout) {
    return FieldError(field, "stall_timeout",
                      absl::StrCat("must be >= 2 x max_retransmission_timeout (",
                                   absl::FormatDuration(2 * max_retransmission_timeout),
                                   ") or infinite, got ", absl::FormatDuration(stall_timeout)));
  }
  return scheduler.Validate(absl::StrCat(Sv(field), ".scheduler"));
}

PollingOptions PollingOptions::BusyPolling() {
  PollingOptions options;
  options.spin_iterations = UINT32_MAX;
  options.yield_iterations = 0;
  return options;
}

absl::Status PollingOptions::Validate(std::string_view field) const {
  if (min_sleep <= absl::ZeroDuration() || min_sleep > absl::Seconds(1)) {
    return FieldError(field, "min_sleep",
                      absl::StrCat("must be in (0, 1s], got ", absl::FormatDuration(min_sleep)));
  }
  if (max_sleep < min_sleep || max_sleep > absl::Seconds(1)) {
    return FieldError(field, "max_sleep",
                      absl::StrCat("must be in [min_sleep, 1s], got ",
                                   absl::FormatDuration(max_sleep)));
  }
  for (const int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return FieldError(field, "cpus",
                        absl::StrCat(cpu, " is not a CPU id in 0..", CPU_SETSIZE - 1));
    }
  }
  return absl::OkStatus();
}

absl::Status WorkerOptions::Validate(std::string_view field) const {
  if (absl::Status s = job.Validate(absl::StrCat(Sv(field), ".job")); !s.ok()) return s;
  if (absl::Status s = CheckSourceCheck(field, "parameter_source_check", parameter_source_check);
      !s.ok()) {
    return s;
  }
  if (rack < 0 || rack >= job.layout.racks()) {
    return FieldError(field, "rack",
                      absl::StrCat(rack, " is not in 0..", job.layout.racks() - 1));
  }
  if (worker_in_rack < 0 || worker_in_rack >= job.layout.workers_in_rack(rack)) {
    return FieldError(field, "worker_in_rack",
                      absl::StrCat(worker_in_rack, " is not in 0..",
                                   job.layout.workers_in_rack(rack) - 1, " (rack ", rack, ")"));
  }
  if (parameter_servers.empty() ||
      parameter_servers.size() > static_cast<size_t>(wire::kMaxQueues)) {
    return FieldError(field, "parameter_servers",
                      absl::StrCat("needs 1..", wire::kMaxQueues, " addresses, got ",
                                   parameter_servers.size()));
  }
  for (size_t i = 0; i < parameter_servers.size(); ++i) {
    if (parameter_servers[i].ipv4.value == 0) {
      return FieldError(field, absl::StrCat("parameter_servers[", i, "].ipv4"),
                        "must not be 0.0.0.0");
    }
  }
  if (absl::Status s = polling.Validate(absl::StrCat(Sv(field), ".polling")); !s.ok()) return s;
  return CheckBurst(field, max_burst);
}

absl::Status ParameterServerJobOptions::Validate(std::string_view field) const {
  if (job_id == 0) return FieldError(field, "job_id", "must be 1..255, got 0");
  if (absl::Status s = layout.Validate(absl::StrCat(Sv(field), ".layout")); !s.ok()) return s;
  switch (delivery) {
    case ParameterDelivery::kMulticast:
      if (!IsMulticast(multicast_group)) {
        return FieldError(field, "multicast_group",
                          absl::StrCat(multicast_group.ipv4.ToString(),
                                       " is not an IPv4 multicast address (224.0.0.0/4)"));
      }
      break;
    case ParameterDelivery::kUnicast:
      if (workers.size() != static_cast<size_t>(layout.total_workers())) {
        return FieldError(field, "workers",
                          absl::StrCat("needs one address per worker (", layout.total_workers(),
                                       "), got ", workers.size()));
      }
      for (size_t i = 0; i < workers.size(); ++i) {
        if (workers[i].ipv4.value == 0) {
          return FieldError(field, absl::StrCat("workers[", i, "].ipv4"), "must not be 0.0.0.0");
        }
      }
      break;
    default:
      return FieldError(field, "delivery", "unknown value");
  }
  for (size_t i = 0; i < gradient_sources.size(); ++i) {
    const wire::Ipv4Address ip = gradient_sources[i].ipv4;
    if (ip.value == 0 || (ip.value >> 28) == 0xE) {
      return FieldError(field, absl::StrCat("gradient_sources[", i, "].ipv4"),
                        absl::StrCat(ip.ToString(), " is not a host address"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParameterServerOptions::Validate(std::string_view field) const {
  if (jobs.empty()) return FieldError(field, "jobs", "needs at least one job");
  if (absl::Status s = CheckSourceCheck(field, "gradient_source_check", gradient_source_check);
      !s.ok()) {
    return s;
  }
  std::array<bool, wire::kMaxJobId + 1> seen{};
  for (size_t i = 0; i < jobs.size(); ++i) {
    const std::string job_field = absl::StrCat(Sv(field), ".jobs[", i, "]");
    if (absl::Status s = jobs[i].Validate(job_field); !s.ok()) return s;
    if (seen[jobs[i].job_id]) {
      return FieldError(job_field, "job_id",
                        absl::StrCat("job ", jobs[i].job_id, " appears twice"));
    }
    seen[jobs[i].job_id] = true;
  }
  if (absl::Status s = CheckSlots(field, slots); !s.ok()) return s;
  if (server_count < 1 || server_count > static_cast<uint32_t>(wire::kMaxQueues)) {
    return FieldError(field, "server_count",
                      absl::StrCat(server_count, " is not in 1..", wire::kMaxQueues));
  }
  if (server_index >= server_count) {
    return FieldError(field, "server_index",
                      absl::StrCat(server_index, " is not in 0..", server_count - 1));
  }
  if (io_threads < 1 || server_count * io_threads > static_cast<uint32_t>(wire::kMaxQueues)) {
    return FieldError(field, "io_threads",
                      absl::StrCat(io_threads, ": needs 1 <= io_threads and server_count * "
                                               "io_threads <= ",
                                   wire::kMaxQueues, " (server_count ", server_count, ")"));
  }
  if (absl::Status s = CheckBasePort(field, base_port); !s.ok()) return s;
  if (absl::Status s = polling.Validate(absl::StrCat(Sv(field), ".polling")); !s.ok()) return s;
  if (orphan_timeout <= absl::ZeroDuration()) {
    return FieldError(field, "orphan_timeout",
                      absl::StrCat("must be positive, got ", absl::FormatDuration(orphan_timeout)));
  }
  if (waiting_report_interval <= absl::ZeroDuration()) {
    return FieldError(field, "waiting_report_interval",
                      absl::StrCat("must be positive, got ",
                                   absl::FormatDuration(waiting_report_interval)));
  }
  return CheckBurst(field, max_burst);
}

}  // namespace atp
