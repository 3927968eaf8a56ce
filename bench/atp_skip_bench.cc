// atp_skip_bench: SkipReduce on ATP (OpOptions::skip, whole fragments) beside
// the unskipped PushPull, side by side in the same run: a job of `workers`
// workers as threads over the loopback wire with an ATP switch host (as
// tests/integration), PushPull of `values` floats on every worker, skipping
// p = 0, 0.25, 0.5, 0.75 of the fragments (random mode, a new iteration each
// round) in turn within each benchmark iteration, so that machine load hits
// all four alike. Every result is checked against the reference (exact sum,
// dropped fragments zero; tests/common/skip_reference.h) in the first round
// and every 8th.
//
// Counters: ms_p0 .. ms_p75 = median wall time of one PushPull round (all
// workers) at each rate; ratio_p25 .. ratio_p75 = median(p) / median(p = 0);
// floor_p25 .. = (1 - p) + 0.1, the bound (ratio <= floor passes);
// frames_p0 .. = frames the workers sent per round.
//
//   flock /work/.busy.lock build/bench/atp_skip_bench --benchmark_min_time=20
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/skip_reduce.h"
#include "atp/worker.h"
#include "benchmark/benchmark.h"
#include "testbed/local_cluster.h"
#include "testbed/oracle.h"
#include "tests/common/skip_reference.h"

namespace atp {
namespace {

constexpr int kRatesPercent[] = {0, 25, 50, 75};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::unique_ptr<testbed::LocalCluster> MakeCluster(int workers) {
  testbed::LocalClusterOptions options;
  options.aggregation = testbed::FabricAggregation::kSingleSwitch;
  testbed::LocalJob job;
  job.job.job_id = 1;
  job.job.layout = RackLayout::Uniform(1, workers);
  job.job.io_threads = 1;
  job.job.slots = 1024;
  job.job.initial_window = 256;
  options.jobs.push_back(job);
  absl::StatusOr<std::unique_ptr<testbed::LocalCluster>> cluster =
      testbed::LocalCluster::Create(options);
  if (!cluster.ok()) throw std::runtime_error(std::string(cluster.status().message()));
  return *std::move(cluster);
}

// Round: one PushPull of every worker with `skip`; returns wall seconds.
double Round(testbed::LocalCluster& cluster, const std::vector<std::vector<float>>& inputs,
             std::vector<std::vector<float>>& outputs, const SkipOptions& skip) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Handle> handles;
  for (size_t w = 0; w < inputs.size(); ++w) {
    absl::StatusOr<Handle> h =
        cluster.worker(0, w).PushPull(inputs[w], outputs[w], OpOptions{.skip = skip});
    if (!h.ok()) throw std::runtime_error(std::string(h.status().message()));
    handles.push_back(*h);
  }
  const absl::Status waited = WaitAll(handles, absl::Now() + absl::Seconds(60));
  if (!waited.ok()) throw std::runtime_error(std::string(waited.message()));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

bool Verify(const std::vector<std::vector<float>>& inputs,
            const std::vector<std::vector<float>>& outputs, const SkipOptions& skip,
            double scale) {
  std::vector<std::span<const float>> spans(inputs.begin(), inputs.end());
  std::vector<float> expected = testbed::ExpectedAggregate(spans, scale, Reduction::kSum);
  const uint64_t fragments =
      (expected.size() + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
  for (uint64_t f : testing::ReferenceDroppedFragments(fragments, static_cast<int>(inputs.size()),
                                                        skip)) {
    const size_t end = std::min<size_t>(expected.size(), (f + 1) * wire::kValuesPerFragment);
    std::fill(expected.begin() + static_cast<std::ptrdiff_t>(f * wire::kValuesPerFragment),
              expected.begin() + static_cast<std::ptrdiff_t>(end), 0.0f);
  }
  for (const std::vector<float>& out : outputs) {
    if (out != expected) return false;
  }
  return true;
}

void BM_AtpFragmentSkipping(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  const size_t values = static_cast<size_t>(state.range(1));
  std::unique_ptr<testbed::LocalCluster> cluster = MakeCluster(workers);
  const double scale = cluster->worker(0, 0).options().job.scale;
  std::vector<std::vector<float>> inputs(workers), outputs(workers);
  for (int w = 0; w < workers; ++w) {
    inputs[w].resize(values);
    for (size_t i = 0; i < values; ++i) {
      inputs[w][i] = static_cast<float>((i * 7 + static_cast<size_t>(w) * 13) % 2001) * 1e-3f - 1.0f;
    }
    outputs[w].resize(values);
  }
  std::vector<std::vector<double>> seconds(std::size(kRatesPercent));
  std::vector<uint64_t> frames(std::size(kRatesPercent), 0);
  uint64_t round = 0;
  for (auto _ : state) {
    for (size_t r = 0; r < std::size(kRatesPercent); ++r) {
      const double p = kRatesPercent[r] / 100.0;
      const int k = SkipStepsForRate(p, workers);
      SkipOptions skip;
      if (k > 0) {
        skip = {.mode = SkipMode::kRandom, .reduce_scatter_steps = k, .seed = 1,
                .iteration = round, .tensor = 0};
      }
      const uint64_t sent_before = cluster->worker(0, 0).stats().frames_sent;
      seconds[r].push_back(Round(*cluster, inputs, outputs, skip));
      frames[r] += cluster->worker(0, 0).stats().frames_sent - sent_before;
      if (round % 8 == 0 && !Verify(inputs, outputs, skip, scale)) {
        state.SkipWithError(("wrong result at p = " + std::to_string(p)).c_str());
        return;
      }
    }
    ++round;
  }
  const double base = Median(seconds[0]);
  for (size_t r = 0; r < std::size(kRatesPercent); ++r) {
    const std::string p = std::to_string(kRatesPercent[r]);
    state.counters["ms_p" + p] = Median(seconds[r]) * 1e3;
    state.counters["frames_p" + p] =
        static_cast<double>(frames[r]) * workers / static_cast<double>(std::max<uint64_t>(round, 1));
    if (r > 0) {
      state.counters["ratio_p" + p] = Median(seconds[r]) / base;
      state.counters["floor_p" + p] = 1.0 - kRatesPercent[r] / 100.0 + 0.1;
    }
  }
  state.counters["rounds"] = static_cast<double>(round);
}

// 4 workers (p = 0.25, 0.5, 0.75 are k = 1, 2, 3 of 4 slices exactly), 1 Mi
// and 4 Mi floats (4 and 16 MiB).
BENCHMARK(BM_AtpFragmentSkipping)
    ->Args({4, 1 << 20})
    ->Args({4, 4 << 20})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace atp
BENCHMARK_MAIN();
