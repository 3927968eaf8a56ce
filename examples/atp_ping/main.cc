// atp-ping: round-trip latency of single fragments through the switch.
//
// Runs a whole job in this process (workers, PS and, over loopback, the ATP
// switch pipelines) and times, on worker 0, each aggregation of one fragment
// (62 floats by default) from PushPull to the end of Wait: worker -> ToR
// (-> PS rack ToR) -> PS -> back to every worker. Every result is checked
// against the exact sum. Prints min, p50, p99 and max.
//
//   atp-ping --workers=2 --count=5000
//   atp-ping --workers=4 --racks=2 --switches=two_level --busy_poll
//   atp-ping --transport=kernel_udp --json
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "atp/worker.h"
#include "examples/atp_throughput/example_cluster.h"
#include "testbed/oracle.h"
#include "lib/tool/flag_checks.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int, workers, 2, "Workers in the job (all ping together: ATP aggregates).");
ABSL_FLAG(int, racks, 1, "Racks the workers are spread over.");
ABSL_FLAG(int, count, 2000, "Pings to time (after the warm-up), 1..10000000.");
ABSL_FLAG(int, warmup, 100, "Pings sent first and not timed, 0..10000000.");
ABSL_FLAG(int, values, 62, "Floats per ping (62 = one fragment), 1..10000000.");
ABSL_FLAG(double, ping_timeout_s, 10,
          "Longest wait for one ping, seconds, in (0, 3600]: a worker whose ping takes longer "
          "stops pinging and the run fails, naming it.");
ABSL_FLAG(bool, json, false, "Print the result as one JSON object instead of text.");

namespace atp::examples {
namespace {

constexpr char kUsage[] =
    "round-trip latency of single ATP fragments through the switch.\n"
    "Runs workers, a PS and the switches as threads of this process; worker 0 times\n"
    "each aggregation from PushPull to Wait; every result is checked.\n"
    "Exit status: 0 all results exact; 1 a result was wrong or timed out; 2 bad flags.\n"
    "  e.g. atp-ping --workers=4 --racks=2 --count=5000";

constexpr int kMaxPings = 10'000'000;
constexpr int kMaxValues = 10'000'000;

float Input(int ping, int rank, int i) {
  return static_cast<float>(((ping * 31 + rank * 7 + i) % 200) - 100) * 0.01f;
}

int Main(int argc, char** argv) {
  ParseFlagsOrExit(argc, argv, "atp-ping", "examples/atp_ping/", kUsage);
  ClusterShape shape;
  shape.workers = absl::GetFlag(FLAGS_workers);
  shape.racks = absl::GetFlag(FLAGS_racks);
  const int count = absl::GetFlag(FLAGS_count);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int values = absl::GetFlag(FLAGS_values);
  // Bounds that keep the inputs' int arithmetic (Input) far from overflow.
  tool::ExitIfBad("atp-ping", tool::CheckRange("count", count, 1, kMaxPings));
  tool::ExitIfBad("atp-ping", tool::CheckRange("warmup", warmup, 0, kMaxPings));
  tool::ExitIfBad("atp-ping", tool::CheckRange("values", values, 1, kMaxValues));
  const double ping_timeout_s = absl::GetFlag(FLAGS_ping_timeout_s);
  if (!(ping_timeout_s > 0 && ping_timeout_s <= 3600)) {
    tool::ExitIfBad("atp-ping", tool::FlagError("ping_timeout_s",
                                                absl::StrCat(ping_timeout_s, " is not in (0, 3600]")));
  }
  // Every worker keeps every ping's result until the end (verified then).
  const double result_bytes = 4.0 * std::max(shape.workers, 1) *
                              (static_cast<double>(warmup) + count) * values;
  tool::ExitIfBad("atp-ping", tool::CheckMemory("values", result_bytes,
                                                "the results of --workers x (--warmup + --count) pings"));
  absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> cluster = MakeCluster(shape);
  if (!cluster.ok()) {
    std::fprintf(stderr, "atp-ping: %s\n", std::string(cluster.status().message()).c_str());
    return 2;
  }
  const int total = warmup + count;
  // Worker 0's timed pings, those that completed.
  std::vector<double> rtt_us;
  rtt_us.reserve(static_cast<size_t>(count));
  // failures[rank]: why that worker stopped pinging ("" if it did not).
  std::vector<std::string> failures(static_cast<size_t>(shape.workers));
  std::vector<std::vector<std::vector<float>>> results(
      static_cast<size_t>(shape.workers),
      std::vector<std::vector<float>>(static_cast<size_t>(total)));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < shape.workers; ++rank) {
    threads.emplace_back([&, rank] {
      Worker& worker = (*cluster)->worker(0, static_cast<size_t>(rank));
      std::vector<float> in(static_cast<size_t>(values));
      for (int p = 0; p < total; ++p) {
        for (int i = 0; i < values; ++i) in[static_cast<size_t>(i)] = Input(p, rank, i);
        std::vector<float>& out = results[static_cast<size_t>(rank)][static_cast<size_t>(p)];
        out.assign(static_cast<size_t>(values), 0.0f);
        const auto start = std::chrono::steady_clock::now();
        absl::StatusOr<Handle> h = worker.PushPull(in, out);
        const absl::Status done =
            h.ok() ? h->Wait(absl::Seconds(ping_timeout_s)) : h.status();
        if (!done.ok()) {
          failures[static_cast<size_t>(rank)] =
              absl::StrCat("ping ", p, p < warmup ? " (warm-up)" : "", ": ", done.ToString());
          return;
        }
        const auto end = std::chrono::steady_clock::now();
        if (rank == 0 && p >= warmup) {
          rtt_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();

  // Verify every result of every worker.
  int wrong = 0;
  for (int r = 0; r < shape.workers; ++r) {
    const std::string& failure = failures[static_cast<size_t>(r)];
    if (failure.empty()) continue;
    ++wrong;
    std::fprintf(stderr, "atp-ping: worker %d stopped at %s\n", r, failure.c_str());
  }
  std::vector<std::vector<float>> inputs(static_cast<size_t>(shape.workers),
                                         std::vector<float>(static_cast<size_t>(values)));
  for (int p = 0; p < total && wrong == 0; ++p) {
    for (int r = 0; r < shape.workers; ++r) {
      for (int i = 0; i < values; ++i) {
        inputs[static_cast<size_t>(r)][static_cast<size_t>(i)] = Input(p, r, i);
      }
    }
    std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
    const std::vector<float> expected =
        testbed::ExpectedAggregate(spans, kDefaultScale, Reduction::kSum);
    for (int r = 0; r < shape.workers; ++r) {
      if (!testbed::BitIdentical(results[static_cast<size_t>(r)][static_cast<size_t>(p)],
                                 expected)) {
        ++wrong;
      }
    }
  }
  // Statistics over the pings that completed only (all of them, unless a
  // worker stopped).
  std::sort(rtt_us.begin(), rtt_us.end());
  auto pct = [&](double q) {
    return rtt_us[std::min(rtt_us.size() - 1, static_cast<size_t>(q * (rtt_us.size() - 1) + 0.5))];
  };
  const WorkerStats ws = (*cluster)->worker(0, 0).stats();
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j;
    j["tool"] = "atp-ping";
    j["workers"] = shape.workers;
    j["racks"] = shape.racks;
    j["transport"] = ClusterTransportFlag();
    j["switches"] = SwitchesFlag(shape.racks);
    j["values"] = values;
    j["count"] = count;
    j["timed"] = rtt_us.size();  // of `count`: worker 0's pings that completed
    if (!rtt_us.empty()) {
      j["rtt_us"] = {{"min", rtt_us.front()}, {"p50", pct(0.5)}, {"p99", pct(0.99)},
                     {"max", rtt_us.back()}};
    }
    j["retransmissions"] = ws.retransmissions;
    j["errors"] = wrong;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("atp-ping: %s; %d pings of %d floats\n", Describe(shape).c_str(), count, values);
    if (rtt_us.empty()) {
      std::printf("rtt us: no timed ping completed  (worker 0, %lu retransmissions)\n",
                  static_cast<unsigned long>(ws.retransmissions));
    } else {
      std::printf("rtt us: min %.1f  p50 %.1f  p99 %.1f  max %.1f  (worker 0, %zu of %d pings, %lu "
                  "retransmissions)\n",
                  rtt_us.front(), pct(0.5), pct(0.99), rtt_us.back(), rtt_us.size(), count,
                  static_cast<unsigned long>(ws.retransmissions));
    }
    std::printf("%s\n", wrong == 0 ? "all results exact" : "WRONG OR MISSING RESULTS");
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace atp::examples

int main(int argc, char** argv) { return atp::examples::Main(argc, argv); }
