// atp-throughput: push/pull goodput of a whole job, every result verified.
//
// Runs the job in this process (workers, PS and, over loopback, the ATP
// switch pipelines), then for each iteration every worker PushPulls a tensor
// of --tensor_floats values; the time from the first submission to the last
// completion gives the goodput (tensor bytes per worker per second, like an
// allreduce's algorithm bandwidth). Every worker's every result is compared
// with the exact aggregate computed independently (atp::Quantize).
//
//   atp-throughput --tensor_floats=4194304 --workers=4 --racks=2 --iterations=5
//   atp-throughput --transport=kernel_udp --workers=2 --racks=1 --json
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "atp/worker.h"
#include "examples/atp_throughput/example_cluster.h"
#include "lib/runtime/testbed/oracle.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(int64_t, tensor_floats, 1 << 20, "Floats in each worker's tensor, per iteration.");
ABSL_FLAG(int, workers, 4, "Workers in the job.");
ABSL_FLAG(int, racks, 2, "Racks the workers are spread over.");
ABSL_FLAG(int, io_threads, 2, "I/O threads (queues) per worker.");
ABSL_FLAG(int, iterations, 5, "Aggregations to time, one after the other.");
ABSL_FLAG(int, window, 200, "Initial window, fragments in flight per queue.");
ABSL_FLAG(int, slots, 256, "Window slots per queue (a power of two >= --window).");
ABSL_FLAG(bool, json, false, "Print the result as one JSON object instead of text.");
ABSL_FLAG(bool, progress, true, "Print a progress line on stderr after each iteration.");

namespace atp::examples {
namespace {

constexpr char kUsage[] =
    "push/pull goodput of an ATP job with every result verified.\n"
    "Runs workers, a PS and the switches as threads of this process.\n"
    "Exit status: 0 all results exact; 1 a result was wrong or timed out; 2 bad flags.\n"
    "  e.g. atp-throughput --tensor_floats=4194304 --workers=4 --racks=2";

void Fill(std::vector<float>& v, int iteration, int rank) {
  const uint32_t seed = static_cast<uint32_t>(iteration) * 2654435761u + static_cast<uint32_t>(rank) * 40503u;
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t h = (static_cast<uint32_t>(i) * 2246822519u) ^ seed;
    v[i] = static_cast<float>(static_cast<int32_t>(h % 20001u) - 10000) * 1e-4f;
  }
}

int Main(int argc, char** argv) {
  ParseFlagsOrExit(argc, argv, "examples/atp_throughput/main", kUsage);
  ClusterShape shape;
  shape.workers = absl::GetFlag(FLAGS_workers);
  shape.racks = absl::GetFlag(FLAGS_racks);
  shape.io_threads = static_cast<uint32_t>(absl::GetFlag(FLAGS_io_threads));
  shape.initial_window = static_cast<uint32_t>(absl::GetFlag(FLAGS_window));
  shape.slots = static_cast<uint32_t>(absl::GetFlag(FLAGS_slots));
  const int64_t n = absl::GetFlag(FLAGS_tensor_floats);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  if (n < 1 || iterations < 1) {
    std::fprintf(stderr, "atp-throughput: --tensor_floats and --iterations must be >= 1\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> cluster = MakeCluster(shape);
  if (!cluster.ok()) {
    std::fprintf(stderr, "atp-throughput: %s\n", std::string(cluster.status().message()).c_str());
    return 2;
  }
  const bool progress = absl::GetFlag(FLAGS_progress) && !absl::GetFlag(FLAGS_json);
  const size_t w = static_cast<size_t>(shape.workers);
  std::vector<std::vector<float>> in(w, std::vector<float>(static_cast<size_t>(n)));
  std::vector<std::vector<float>> out(w, std::vector<float>(static_cast<size_t>(n)));
  double total_seconds = 0;
  double best_seconds = 1e300;
  int wrong = 0;
  for (int it = 0; it < iterations; ++it) {
    for (size_t r = 0; r < w; ++r) Fill(in[r], it, static_cast<int>(r));
    std::vector<Handle> handles;
    const auto start = std::chrono::steady_clock::now();
    for (size_t r = 0; r < w; ++r) {
      absl::StatusOr<Handle> h = (*cluster)->worker(0, r).PushPull(in[r], out[r]);
      if (!h.ok()) {
        std::fprintf(stderr, "atp-throughput: %s\n", std::string(h.status().message()).c_str());
        return 1;
      }
      handles.push_back(*h);
    }
    const absl::Status done = WaitAll(handles, absl::Now() + absl::Seconds(120));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!done.ok()) {
      std::fprintf(stderr, "\natp-throughput: iteration %d: %s\n", it,
                   std::string(done.message()).c_str());
      return 1;
    }
    total_seconds += seconds;
    best_seconds = std::min(best_seconds, seconds);
    std::vector<std::span<const float>> spans(in.begin(), in.end());
    const std::vector<float> expected = testbed::ExpectedAggregate(spans, kDefaultScale);
    for (size_t r = 0; r < w; ++r) {
      if (!testbed::BitIdentical(out[r], expected)) ++wrong;
    }
    if (progress) {
      std::fprintf(stderr, "\r[%d/%d] %.3f s  %.3f GB/s  %s   ", it + 1, iterations, seconds,
                   static_cast<double>(n) * 4 / seconds / 1e9, wrong == 0 ? "exact" : "WRONG");
      std::fflush(stderr);
    }
  }
  if (progress) std::fprintf(stderr, "\n");

  uint64_t retransmissions = 0, frames_sent = 0, timeouts = 0;
  for (size_t r = 0; r < w; ++r) {
    const WorkerStats s = (*cluster)->worker(0, r).stats();
    retransmissions += s.retransmissions;
    frames_sent += s.frames_sent;
    timeouts += s.timeouts;
  }
  const ParameterServerStats ps = (*cluster)->parameter_server(0, 0).stats();
  // Loopback only: frames the wire dropped because a receiver's ring was full
  // (a switch's egress drop), and frames the fabric dropped on purpose (--loss).
  uint64_t ring_drops = 0, injected_losses = 0;
  if ((*cluster)->wire() != nullptr) ring_drops = (*cluster)->wire()->stats().egress_drops;
  if ((*cluster)->fabric() != nullptr) injected_losses = (*cluster)->fabric()->stats().lost;
  // Gradient frames that reached the PS per completed fragment: 1 when the
  // switches aggregated everything, the worker count when they did nothing.
  const double ps_frames_per_fragment =
      ps.completed == 0 ? 0 : static_cast<double>(ps.contributions) / static_cast<double>(ps.completed);
  const double bytes = static_cast<double>(n) * 4 * iterations;
  const double goodput = bytes / total_seconds;
  const double best = static_cast<double>(n) * 4 / best_seconds;
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json j;
    j["tool"] = "atp-throughput";
    j["workers"] = shape.workers;
    j["racks"] = shape.racks;
    j["io_threads"] = shape.io_threads;
    j["transport"] = TransportFlag();
    j["switches"] = SwitchesFlag(shape.racks);
    j["tensor_floats"] = n;
    j["iterations"] = iterations;
    j["seconds"] = total_seconds;
    j["goodput_bytes_per_s"] = goodput;
    j["best_iteration_bytes_per_s"] = best;
    j["frames_sent"] = frames_sent;
    j["retransmissions"] = retransmissions;
    j["timeouts"] = timeouts;
    j["ring_drops"] = ring_drops;
    j["injected_losses"] = injected_losses;
    j["ps_frames_per_fragment"] = ps_frames_per_fragment;
    j["errors"] = wrong;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("atp-throughput: %s\n", Describe(shape).c_str());
    std::printf("tensor %lld floats (%.1f MB) x %d iterations: %.3f s\n",
                static_cast<long long>(n), static_cast<double>(n) * 4 / 1e6, iterations,
                total_seconds);
    std::printf("goodput %.3f GB/s per worker (best iteration %.3f GB/s)\n", goodput / 1e9,
                best / 1e9);
    std::printf("frames sent %llu, retransmissions %llu, timeouts %llu, PS frames per fragment %.2f\n",
                static_cast<unsigned long long>(frames_sent),
                static_cast<unsigned long long>(retransmissions),
                static_cast<unsigned long long>(timeouts), ps_frames_per_fragment);
    if ((*cluster)->wire() != nullptr) {
      std::printf("loopback: %llu frames dropped at full receive rings, %llu injected losses\n",
                  static_cast<unsigned long long>(ring_drops),
                  static_cast<unsigned long long>(injected_losses));
    }
    std::printf("%s\n", wrong == 0 ? "all results exact" : "WRONG RESULTS");
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace atp::examples

int main(int argc, char** argv) { return atp::examples::Main(argc, argv); }
