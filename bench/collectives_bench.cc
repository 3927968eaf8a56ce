// collectives_bench: libatp's ring allreduce beside gloo's, and SkipReduce's
// speedup beside theory (issue 11). Ranks are threads of this process over
// gloo's TCP transport on 127.0.0.1.
//
// Each benchmark iteration runs the variants it compares one after the other
// on the same connected ranks (interleaved, so a change of machine load hits
// them alike) and reports their ratios as counters:
//   BM_RingVsGloo/ranks/MiB: gloo_GBps, ring_GBps, ring_of_gloo (ring / gloo
//     bandwidth; the floor is 0.9).
// Every figure is a median over the iterations (of each iteration's own
// ratio, for the ratios).
//   BM_SkipReduce/ranks/MiB/k: static_speedup, random_speedup (time of the
//     plain ring / time skipping k reduce-scatter steps), theory
//     (2(N-1) / (2(N-1)-k)), static_of_theory, random_of_theory (floor 0.9)
//     and random_vs_static (random time / static time - 1; floor |x| < 2%).
// The manual time is the first variant's (gloo, or the plain ring).
// Every run is verified: one marker element per slice carries each rank's
// number, and after the run it must hold exactly the contributions SkipPlan
// says (everything else is zero and stays zero).
//
//   flock /work/.busy.lock build/bench/collectives_bench --benchmark_filter=RingVsGloo
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "atp/collectives.h"
#include "atp/skip_reduce.h"
#include "benchmark/benchmark.h"
#include "gloo/context.h"
#include "gloo/rendezvous/hash_store.h"

namespace atp::collectives {
namespace {

using Clock = std::chrono::steady_clock;

// Group: connected ranks and their buffers, kept between benchmarks.
struct Group {
  gloo::rendezvous::HashStore store;
  std::vector<std::shared_ptr<gloo::Context>> contexts;
  std::vector<std::vector<float>> data;
};

Group& GroupOf(int ranks) {
  static std::map<int, std::unique_ptr<Group>> groups;
  std::unique_ptr<Group>& group = groups[ranks];
  if (group) return *group;
  group = std::make_unique<Group>();
  group->contexts.resize(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      auto context = Connect(group->store, ConnectOptions{.rank = r, .ranks = ranks});
      if (!context.ok()) {
        std::fprintf(stderr, "collectives_bench: %s\n", context.status().ToString().c_str());
        std::exit(1);
      }
      group->contexts[r] = *context;
    });
  }
  for (std::thread& t : threads) t.join();
  group->data.resize(static_cast<size_t>(ranks));
  return *group;
}

// Prepare: zeros everywhere but one marker per slice: rank r puts 2^r there.
void Prepare(Group& group, size_t count) {
  const int n = static_cast<int>(group.contexts.size());
  for (int r = 0; r < n; ++r) {
    std::vector<float>& d = group.data[r];
    if (d.size() != count) d.assign(count, 0.0f);
    for (int j = 0; j < n; ++j) d[SliceRange(count, n, j).begin] = static_cast<float>(1 << r);
  }
}

// Verify: every marker holds exactly the contributions `plan` includes.
bool Verify(const Group& group, size_t count, const SkipPlan& plan) {
  const int n = static_cast<int>(group.contexts.size());
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < n; ++j) {
      float expected = 0.0f;
      if (plan.SliceArrives(j, r)) {
        for (int c = 0; c < n; ++c) {
          if (plan.ContributionIncluded(j, c)) expected += static_cast<float>(1 << c);
        }
      }
      if (group.data[r][SliceRange(count, n, j).begin] != expected) return false;
    }
  }
  return true;
}

enum class Variant { kGloo, kRing };

// TimeOne: one allreduce on every rank, from a common start (a barrier) to
// the last rank's end. Seconds.
double TimeOne(Group& group, size_t count, Variant variant, const SkipOptions& skip,
               benchmark::State& state) {
  const int n = static_cast<int>(group.contexts.size());
  Prepare(group, count);
  std::barrier start(n);
  std::vector<Clock::time_point> begin(static_cast<size_t>(n)), end(static_cast<size_t>(n));
  std::vector<absl::Status> statuses(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      start.arrive_and_wait();
      begin[r] = Clock::now();
      if (variant == Variant::kGloo) {
        statuses[r] = GlooAllreduce(group.contexts[r], group.data[r]);
      } else {
        RingAllreduceOptions options;
        options.skip = skip;
        statuses[r] = RingAllreduce(*group.contexts[r], group.data[r], options);
      }
      end[r] = Clock::now();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
  }
  absl::StatusOr<SkipPlan> plan = SkipPlan::Create(skip, n);
  if (!plan.ok() || !Verify(group, count, *plan)) state.SkipWithError("wrong result");
  const auto first = *std::min_element(begin.begin(), begin.end());
  const auto last = *std::max_element(end.begin(), end.end());
  return std::chrono::duration<double>(last - first).count();
}

// Median: of per-iteration ratios, each of two runs back to back, so that a
// burst of load from other processes moves one ratio, not the figure.
double Median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2.0;
}

size_t CountOf(int64_t mib) { return static_cast<size_t>(mib) * (size_t{1} << 20) / sizeof(float); }

void BM_RingVsGloo(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const size_t count = CountOf(state.range(1));
  Group& group = GroupOf(ranks);
  std::vector<double> gloo_times, ring_times, ratios;
  for (auto _ : state) {
    const double gloo = TimeOne(group, count, Variant::kGloo, SkipOptions{}, state);
    const double ring = TimeOne(group, count, Variant::kRing, SkipOptions{}, state);
    gloo_times.push_back(gloo);
    ring_times.push_back(ring);
    ratios.push_back(gloo / ring);
    state.SetIterationTime(gloo);
  }
  const double bytes = static_cast<double>(count * sizeof(float));
  state.counters["gloo_GBps"] = bytes / Median(gloo_times) / 1e9;
  state.counters["ring_GBps"] = bytes / Median(ring_times) / 1e9;
  state.counters["ring_of_gloo"] = Median(ratios);
}
BENCHMARK(BM_RingVsGloo)
    ->ArgsProduct({{2, 4}, {16, 64}})
    ->ArgNames({"ranks", "MiB"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(4.0);

void BM_SkipReduce(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const size_t count = CountOf(state.range(1));
  const int k = static_cast<int>(state.range(2));
  Group& group = GroupOf(ranks);
  SkipOptions static_skip{.mode = SkipMode::kStatic, .reduce_scatter_steps = k};
  SkipOptions random_skip{.mode = SkipMode::kRandom, .reduce_scatter_steps = k};
  random_skip.seed = 42;
  std::vector<double> static_speedups, random_speedups, random_vs_static;
  for (auto _ : state) {
    const double plain = TimeOne(group, count, Variant::kRing, SkipOptions{}, state);
    const double fixed = TimeOne(group, count, Variant::kRing, static_skip, state);
    const double random = TimeOne(group, count, Variant::kRing, random_skip, state);
    ++random_skip.iteration;  // a new shift every iteration, as in training
    static_speedups.push_back(plain / fixed);
    random_speedups.push_back(plain / random);
    random_vs_static.push_back(random / fixed - 1.0);
    state.SetIterationTime(plain);
  }
  const double theory = 2.0 * (ranks - 1) / (2.0 * (ranks - 1) - k);
  state.counters["static_speedup"] = Median(static_speedups);
  state.counters["random_speedup"] = Median(random_speedups);
  state.counters["theory"] = theory;
  state.counters["static_of_theory"] = Median(static_speedups) / theory;
  state.counters["random_of_theory"] = Median(random_speedups) / theory;
  state.counters["random_vs_static"] = Median(random_vs_static);
}
BENCHMARK(BM_SkipReduce)
    ->ArgsProduct({{4}, {32}, {1, 2, 3}})
    ->ArgsProduct({{8}, {32}, {1, 2, 3, 4, 5, 6, 7}})
    ->ArgNames({"ranks", "MiB", "k"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(4.0);

}  // namespace
}  // namespace atp::collectives

BENCHMARK_MAIN();
