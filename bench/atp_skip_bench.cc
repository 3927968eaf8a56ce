// atp_skip_bench: SkipReduce on ATP (OpOptions::skip) in both variants beside
// the unskipped PushPull, side by side in the same run: a job of `workers`
// workers as threads over the loopback wire (as tests/integration), with one
// ATP switch aggregating (aggregation 1) or with the PS aggregating alone
// (aggregation 0: the fabric only forwards), PushPull of `values` floats on
// every worker. Within each benchmark iteration it runs p = 0, then for p =
// 0.25, 0.5, 0.75 whole-fragment skipping (`frag`) and contribution skipping
// (`contrib`), random mode with a new iteration each round, so that machine
// load hits all seven alike. Every result is checked against the reference
// (tests/common/skip_reference.h: dropped fragments zero, or each fragment
// the exact sum of its contributors) in the first round and every 8th.
//
// Counters: ms_p0, ms_frag_p25 .. ms_contrib_p75 = median wall time of one
// PushPull round (all workers); ratio_* = that median / median(p = 0);
// floor_p25 .. = (1 - p) + 0.1, the bound for whole fragments;
// bound_contrib_p25 .. = the bound where only the upstream shrinks and the PS
// aggregates alone, (1 - p) + 0.1, and 1 + 0.1 with switches (the downlinks
// carry every parameter packet; docs/skipreduce.md); frames_* = frames the
// workers sent per round.
//
//   flock /work/.busy.lock build/bench/atp_skip_bench --benchmark_min_time=20
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "atp/parameter_server.h"
#include "atp/quantize.h"
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

std::unique_ptr<testbed::LocalCluster> MakeCluster(int workers, bool switch_aggregates) {
  testbed::LocalClusterOptions options;
  options.aggregation = switch_aggregates ? testbed::FabricAggregation::kSingleSwitch
                                          : testbed::FabricAggregation::kNone;
  testbed::LocalJob job;
  job.contribution_skipping = true;  // the PS takes the contribution variant
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
  const absl::Status waited = WaitAll(handles, absl::Now() + absl::Seconds(30));
  if (!waited.ok()) {
    // What the PS and the workers did, to tell a stall from a slow run.
    const ParameterServerStats p = cluster.parameter_server(0, 0).stats();
    std::string why = std::string(waited.message()) + "; PS completed " +
                      std::to_string(p.completed) + ", pulls answered " +
                      std::to_string(p.pulls_answered) + ", ignored " +
                      std::to_string(p.pulls_ignored) + ", shape mismatches " +
                      std::to_string(p.shape_mismatch);
    for (size_t w = 0; w < inputs.size(); ++w) {
      const WorkerStats s = cluster.worker(0, w).stats();
      why += "; worker " + std::to_string(w) + ": pulls " + std::to_string(s.pulls_sent) +
             ", timeouts " + std::to_string(s.timeouts);
    }
    throw std::runtime_error(why);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ExpectedContributions: each fragment the exact sum of its contributors
// (the contribution variant; the inputs need no float path).
std::vector<float> ExpectedContributions(const std::vector<std::vector<float>>& inputs,
                                         const SkipOptions& skip, double scale) {
  const size_t values = inputs[0].size();
  const uint64_t fragments = (values + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
  const std::vector<std::set<int>> contributors =
      testing::ReferenceContributors(fragments, static_cast<int>(inputs.size()), skip);
  std::vector<int32_t> sum(values, 0), q(values);
  for (size_t w = 0; w < inputs.size(); ++w) {
    Quantize(inputs[w], scale, q);
    for (size_t i = 0; i < values; ++i) {
      if (contributors[i / wire::kValuesPerFragment].contains(static_cast<int>(w))) sum[i] += q[i];
    }
  }
  std::vector<float> out(values);
  Dequantize(sum, scale, out);
  return out;
}

bool Verify(const std::vector<std::vector<float>>& inputs,
            const std::vector<std::vector<float>>& outputs, const SkipOptions& skip,
            double scale) {
  if (skip.variant == SkipVariant::kContributions) {
    const std::vector<float> expected = ExpectedContributions(inputs, skip, scale);
    for (const std::vector<float>& out : outputs) {
      if (out != expected) return false;
    }
    return true;
  }
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

// Variant: one column of a round: p = 0, or a rate in one variant.
struct Variant {
  std::string name;
  int percent = 0;
  SkipVariant variant = SkipVariant::kWholeFragments;
};

std::vector<Variant> Variants() {
  std::vector<Variant> variants{{"p0", 0, SkipVariant::kWholeFragments}};
  for (int percent : kRatesPercent) {
    if (percent == 0) continue;
    const std::string p = std::to_string(percent);
    variants.push_back({"frag_p" + p, percent, SkipVariant::kWholeFragments});
    variants.push_back({"contrib_p" + p, percent, SkipVariant::kContributions});
  }
  return variants;
}

void BM_AtpSkipVariants(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  const size_t values = static_cast<size_t>(state.range(1));
  const bool switch_aggregates = state.range(2) != 0;
  std::unique_ptr<testbed::LocalCluster> cluster = MakeCluster(workers, switch_aggregates);
  const double scale = cluster->worker(0, 0).options().job.scale;
  std::vector<std::vector<float>> inputs(workers), outputs(workers);
  for (int w = 0; w < workers; ++w) {
    inputs[w].resize(values);
    for (size_t i = 0; i < values; ++i) {
      inputs[w][i] = static_cast<float>((i * 7 + static_cast<size_t>(w) * 13) % 2001) * 1e-3f - 1.0f;
    }
    outputs[w].resize(values);
  }
  const std::vector<Variant> variants = Variants();
  std::vector<std::vector<double>> seconds(variants.size());
  std::vector<uint64_t> frames(variants.size(), 0);
  uint64_t round = 0;
  for (auto _ : state) {
    for (size_t v = 0; v < variants.size(); ++v) {
      const int k = SkipStepsForRate(variants[v].percent / 100.0, workers);
      SkipOptions skip;
      if (k > 0) {
        skip = {.mode = SkipMode::kRandom, .reduce_scatter_steps = k, .seed = 1,
                .iteration = round, .tensor = 0, .variant = variants[v].variant};
      }
      uint64_t sent_before = 0;
      for (int w = 0; w < workers; ++w) sent_before += cluster->worker(0, w).stats().frames_sent;
      seconds[v].push_back(Round(*cluster, inputs, outputs, skip));
      for (int w = 0; w < workers; ++w) frames[v] += cluster->worker(0, w).stats().frames_sent;
      frames[v] -= sent_before;
      if (round % 8 == 0 && !Verify(inputs, outputs, skip, scale)) {
        state.SkipWithError(("wrong result: " + variants[v].name).c_str());
        return;
      }
    }
    ++round;
  }
  const double base = Median(seconds[0]);
  for (size_t v = 0; v < variants.size(); ++v) {
    const std::string& name = variants[v].name;
    state.counters["ms_" + name] = Median(seconds[v]) * 1e3;
    state.counters["frames_" + name] =
        static_cast<double>(frames[v]) / static_cast<double>(std::max<uint64_t>(round, 1));
    if (v == 0) continue;
    state.counters["ratio_" + name] = Median(seconds[v]) / base;
    const double p = variants[v].percent / 100.0;
    if (variants[v].variant == SkipVariant::kWholeFragments) {
      state.counters["floor_p" + std::to_string(variants[v].percent)] = 1.0 - p + 0.1;
    } else {
      state.counters["bound_" + name] = (switch_aggregates ? 1.0 : 1.0 - p) + 0.1;
    }
  }
  state.counters["rounds"] = static_cast<double>(round);
}

// 4 workers (p = 0.25, 0.5, 0.75 are k = 1, 2, 3 of 4 slices exactly), 1 Mi
// floats (4 MiB); one switch aggregating (1) and the PS alone (0).
BENCHMARK(BM_AtpSkipVariants)
    ->ArgNames({"workers", "values", "switch"})
    ->Args({4, 1 << 20, 1})
    ->Args({4, 1 << 20, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace atp
BENCHMARK_MAIN();
