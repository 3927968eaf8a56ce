#include "switch_emulator/daemon/stats.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace atp::switchd {
namespace {

nlohmann::json PipelineJson(const switch_emulator::PipelineCounters& c) {
  nlohmann::json j;
  j["packets"] = c.packets;
  j["not_atp"] = c.not_atp;
  j["malformed"] = c.malformed;
  nlohmann::json by_reason = nlohmann::json::object();
  for (size_t i = 1; i < wire::kDecodeErrorCount; ++i) {
    const auto error = static_cast<wire::DecodeError>(i);
    by_reason[std::string(wire::DecodeErrorName(error))] = c.malformed_by_reason[i];
  }
  j["malformed_by_reason"] = by_reason;
  j["not_aggregated"] = c.not_aggregated;
  j["ecn_marked"] = c.ecn_marked;
  j["acks"] = c.acks;
  j["acks_cleared"] = c.acks_cleared;
  j["forwarded_fp"] = c.forwarded_fp;
  j["forwarded_control"] = c.forwarded_control;
  j["claimed"] = c.claimed;
  j["resend_to_ps"] = c.resend_to_ps;
  j["collisions"] = c.collisions;
  j["aggregated"] = c.aggregated;
  j["duplicates"] = c.duplicates;
  j["completed"] = c.completed;
  j["fed_to_level2"] = c.fed_to_level2;
  j["flushed"] = c.flushed;
  j["orphaned"] = c.orphaned;
  j["wipes"] = c.wipes;
  return j;
}

nlohmann::json PortJson(const PortStats& p) {
  nlohmann::json j;
  j["name"] = p.name;
  j["backend"] = p.backend;
  j["queues"] = p.queues;
  j["rx_frames"] = p.counters.rx_frames;
  j["tx_frames"] = p.counters.tx_frames;
  // rx_bad_frames: malformed ATP frames the pipeline refused plus what the
  // transport dropped as not a whole ATP frame.
  j["rx_bad_frames"] = p.counters.rx_malformed + p.transport.rx_bad_frames;
  j["tx_dropped"] = p.counters.tx_dropped();
  j["rx_malformed"] = p.counters.rx_malformed;
  // rx_refused: frames of a restricted job refused at this ingress port, by
  // reason (IngressAdmission; docs/security.md).
  j["rx_refused"] = {{"parameter_port", p.counters.rx_refused_parameter_port},
                     {"gradient_port", p.counters.rx_refused_gradient_port}};
  j["tx_copies"] = p.counters.tx_copies;
  j["tx_dropped_backpressure"] = p.counters.tx_dropped_backpressure;
  j["tx_dropped_no_buffer"] = p.counters.tx_dropped_no_buffer;
  j["tx_held"] = p.tx_held;
  const transport::QueueStats& t = p.transport;
  j["transport"] = {
      {"rx_frames", t.rx_frames},           {"rx_bad_frames", t.rx_bad_frames},
      {"rx_dropped", t.rx_dropped},         {"tx_frames", t.tx_frames},
      {"tx_bad_frames", t.tx_bad_frames},   {"tx_unroutable", t.tx_unroutable},
      {"tx_backpressure", t.tx_backpressure}, {"tx_errors", t.tx_errors},
  };
  return j;
}

}  // namespace

nlohmann::json ToJson(const SwitchdStats& stats) {
  nlohmann::json j;
  j["name"] = stats.name;
  j["uptime_s"] = stats.uptime_s;
  j["ports"] = nlohmann::json::array();
  for (const PortStats& p : stats.ports) j["ports"].push_back(PortJson(p));
  j["pipeline"] = PipelineJson(stats.pipeline);
  j["jobs"] = nlohmann::json::array();
  for (const JobStats& job : stats.jobs) {
    const switch_emulator::PipelineJobCounters& c = job.counters;
    j["jobs"].push_back({{"job", job.job},
                         {"completed", c.completed},
                         {"collisions", c.collisions},
                         {"resend_to_ps", c.resend_to_ps},
                         {"flushed", c.flushed},
                         {"forwarded_fp", c.forwarded_fp},
                         {"forwarded_control", c.forwarded_control},
                         {"not_aggregated", c.not_aggregated},
                         {"orphaned", c.orphaned}});
  }
  j["aggregators_in_use"] = stats.aggregators_in_use;
  j["aggregators"] = stats.aggregators;
  j["routing"] = {
      {"unroutable", stats.routing.unroutable},
      {"no_multicast_ports", stats.routing.no_multicast_ports},
      {"hairpin", stats.routing.hairpin},
      {"multicast", stats.routing.multicast},
      {"ce_marked", stats.routing.ce_marked},
  };
  j["poll_rounds"] = stats.poll_rounds;
  return j;
}

absl::Status WriteStatsJson(const std::string& path, const SwitchdStats& stats) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const std::string text = ToJson(stats).dump(2) + "\n";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return absl::UnavailableError(absl::StrCat("stats JSON: cannot write ", tmp, ": ",
                                               std::strerror(errno)));
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("stats JSON: writing ", tmp, " failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("stats JSON: rename to ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

std::string SummaryLine(const SwitchdStats& now, const SwitchdStats* before) {
  uint64_t rx = 0, tx = 0, dropped = 0, bad = 0, refused = 0;
  for (const PortStats& p : now.ports) {
    rx += p.counters.rx_frames;
    refused += p.counters.rx_refused();
    tx += p.counters.tx_frames;
    dropped += p.counters.tx_dropped();
    bad += p.counters.rx_malformed + p.transport.rx_bad_frames;
  }
  std::string line = absl::StrFormat(
      "%s: up %.0f s, rx %u, tx %u, aggregated %u, completed %u, in use %u/%u, malformed %u, "
      "refused %u, tx dropped %u, unroutable %u",
      now.name, now.uptime_s, rx, tx, now.pipeline.aggregated, now.pipeline.completed,
      now.aggregators_in_use, now.aggregators, bad, refused, dropped,
      now.routing.unroutable + now.routing.no_multicast_ports + now.routing.hairpin);
  if (before != nullptr && now.uptime_s > before->uptime_s) {
    uint64_t rx_before = 0;
    for (const PortStats& p : before->ports) rx_before += p.counters.rx_frames;
    const double seconds = now.uptime_s - before->uptime_s;
    absl::StrAppendFormat(&line, ", %.0f frames/s in", static_cast<double>(rx - rx_before) / seconds);
  }
  return line;
}

}  // namespace atp::switchd
