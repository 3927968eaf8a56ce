// collectives_bench: libatp's ring allreduce beside gloo's, and SkipReduce's
// speedup beside theory (issue 11). Ranks are threads of this process over
// gloo's TCP transport on 127.0.0.1.
//
// Each benchmark iteration runs the variants it compares one after the other
// on the same connected ranks (interleaved, so a change of machine load hits
// them alike) and reports their ratios as counters:
//   BM_RingVsGloo/ranks/MiB: gloo_GBps, ring_GBps, ring_of_gloo (ring / gloo
//     bandwidth; the floor is 0.9), and ring_of_gloo_cpu from CPU time.
// Every figure is a median over the iterations (of each iteration's own
// ratio, for the ratios).
//   BM_SkipReduce/ranks/MiB/k: static_speedup, random_speedup (time of the
//     plain ring / time skipping k reduce-scatter steps), theory
//     (2(N-1) / (2(N-1)-k)), static_of_theory, random_of_theory (floor 0.9)
//     and random_vs_static (random time / static time - 1; floor |x| < 2%);
//     the same three from CPU time end in _cpu (see below).
// The manual time is the first variant's (gloo, or the plain ring).
//
// Two clocks: wall time (from a common start to the last rank's end) and the
// process's CPU time (every thread, user and system). On a machine with
// fewer cores than ranks, shared with other jobs, the ranks' loopback TCP is
// CPU-bound (the kernel copies every byte) and the wall clock also counts
// time other processes held the cores; CPU time counts only the work, which
// is what skipping steps removes. Both are reported; the *_cpu counters are
// the ones to trust on a loaded machine.
// Every run is verified: one marker element per slice carries each rank's
// number, and after the run it must hold exactly the contributions SkipPlan
// says (everything else is zero and stays zero).
//
//   flock /work/.busy.lock build/bench/collectives_bench --benchmark_filter=RingVsGloo
#include <algorithm>
#include <barrier>
#include <chrono>
#include <ctime>
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

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Times {
  double wall = 0.0;  // seconds
  double cpu = 0.0;   // seconds of CPU, all threads
};

// TimeOne: one allreduce on every rank: the wall time from a common start (a
// barrier) to the last rank's end, and the CPU time the process spent.
Times TimeOne(Group& group, size_t count, Variant variant, const SkipOptions& skip,
               benchmark::State& state, const RingAllreduceOptions& ring_options = {}) {
  const int n = static_cast<int>(group.contexts.size());
  Prepare(group, count);
  const double cpu_start = ProcessCpuSeconds();
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
        RingAllreduceOptions options = ring_options;
        options.skip = skip;
        statuses[r] = RingAllreduce(*group.contexts[r], group.data[r], options);
      }
      end[r] = Clock::now();
    });
  }
  for (std::thread& t : threads) t.join();
  const double cpu = ProcessCpuSeconds() - cpu_start;
  for (const absl::Status& status : statuses) {
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
  }
  absl::StatusOr<SkipPlan> plan = SkipPlan::Create(skip, n);
  if (!plan.ok() || !Verify(group, count, *plan)) state.SkipWithError("wrong result");
  const auto first = *std::min_element(begin.begin(), begin.end());
  const auto last = *std::max_element(end.begin(), end.end());
  return Times{.wall = std::chrono::duration<double>(last - first).count(), .cpu = cpu};
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
  RingAllreduceOptions ring_options;
  if (state.range(2) > 0) ring_options.chunk_bytes = static_cast<size_t>(state.range(2)) << 10;
  if (state.range(3) > 0) ring_options.window_chunks = static_cast<int>(state.range(3));
  std::vector<double> gloo_times, ring_times, ratios, cpu_ratios;
  bool gloo_first = true;
  for (auto _ : state) {
    // Alternate the order (ABBA), so that a trend in the load cancels.
    Times gloo, ring;
    if (gloo_first) {
      gloo = TimeOne(group, count, Variant::kGloo, SkipOptions{}, state);
      ring = TimeOne(group, count, Variant::kRing, SkipOptions{}, state, ring_options);
    } else {
      ring = TimeOne(group, count, Variant::kRing, SkipOptions{}, state, ring_options);
      gloo = TimeOne(group, count, Variant::kGloo, SkipOptions{}, state);
    }
    gloo_first = !gloo_first;
    gloo_times.push_back(gloo.wall);
    ring_times.push_back(ring.wall);
    ratios.push_back(gloo.wall / ring.wall);
    cpu_ratios.push_back(gloo.cpu / ring.cpu);
    state.SetIterationTime(gloo.wall);
  }
  const double bytes = static_cast<double>(count * sizeof(float));
  state.counters["gloo_GBps"] = bytes / Median(gloo_times) / 1e9;
  state.counters["ring_GBps"] = bytes / Median(ring_times) / 1e9;
  state.counters["ring_of_gloo"] = Median(ratios);
  state.counters["ring_of_gloo_cpu"] = Median(cpu_ratios);
}
// chunk_KiB, window: 0 for RingAllreduceOptions' defaults; the Tuning
// list below tries others (--benchmark_filter=RingVsGloo.*chunk_KiB:[^0]).
BENCHMARK(BM_RingVsGloo)
    ->ArgsProduct({{2, 4}, {16, 64}, {0}, {0}})
    ->ArgsProduct({{4}, {64}, {256, 4096}, {2, 8}})
    ->ArgNames({"ranks", "MiB", "chunk_KiB", "window"})
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
  const SkipOptions no_skip;
  random_skip.seed = 42;
  std::vector<double> static_speedups, random_speedups, random_vs_static;
  std::vector<double> static_cpu, random_cpu, random_vs_static_cpu;
  // The three run in every order in turn (all six permutations), so that
  // neither a trend in the load nor a variant's place in the sequence (what
  // ran just before it) favours one of them.
  constexpr int kOrders[6][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}, {1, 0, 2}};
  int order = 0;
  for (auto _ : state) {
    Times times[3];  // plain, static, random
    const SkipOptions* skips[3] = {&no_skip, &static_skip, &random_skip};
    for (const int v : kOrders[order]) {
      times[v] = TimeOne(group, count, Variant::kRing, *skips[v], state);
    }
    order = (order + 1) % 6;
    const Times& plain = times[0];
    const Times& fixed = times[1];
    const Times& random = times[2];
    ++random_skip.iteration;  // a new shift every iteration, as in training
    static_speedups.push_back(plain.wall / fixed.wall);
    random_speedups.push_back(plain.wall / random.wall);
    random_vs_static.push_back(random.wall / fixed.wall - 1.0);
    static_cpu.push_back(plain.cpu / fixed.cpu);
    random_cpu.push_back(plain.cpu / random.cpu);
    random_vs_static_cpu.push_back(random.cpu / fixed.cpu - 1.0);
    state.SetIterationTime(plain.wall);
  }
  const double theory = 2.0 * (ranks - 1) / (2.0 * (ranks - 1) - k);
  state.counters["theory"] = theory;
  state.counters["static_speedup"] = Median(static_speedups);
  state.counters["random_speedup"] = Median(random_speedups);
  state.counters["static_of_theory"] = Median(static_speedups) / theory;
  state.counters["random_of_theory"] = Median(random_speedups) / theory;
  state.counters["random_vs_static"] = Median(random_vs_static);
  state.counters["static_of_theory_cpu"] = Median(static_cpu) / theory;
  state.counters["random_of_theory_cpu"] = Median(random_cpu) / theory;
  state.counters["random_vs_static_cpu"] = Median(random_vs_static_cpu);
}
BENCHMARK(BM_SkipReduce)
    ->ArgsProduct({{4}, {32}, {1, 2, 3}})
    ->ArgsProduct({{8}, {32}, {1, 2, 3, 4, 5, 6, 7}})
    ->ArgNames({"ranks", "MiB", "k"})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(6.0);

}  // namespace
}  // namespace atp::collectives

BENCHMARK_MAIN();
