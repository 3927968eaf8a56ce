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
//   BM_SkipReduce/ranks/MiB/k: the SkipReduce floors, in rounds (see
//     BM_SkipReduce below: medians with 95% intervals, min-of-R, pooled).
//   BM_SkipShift/ranks/MiB/k: a diagnostic: does random's shift cost by its
//     value or by changing each round (static, fixed shift, random)?
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
//   flock /work/.busy.lock build/bench/collectives_bench --benchmark_filter=SkipReduce
//       --skip_rounds=30 --benchmark_format=json   (one command line)
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
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
// RankThreads: one thread per rank, alive as long as the group, running one
// job per round. Persistent threads matter: RingAllreduce keeps its receive
// scratch per thread (4 MiB per rank by default), so fresh threads per call
// would fault fresh pages in on every call, a fixed cost that skipping steps
// does not shrink (the first version of this benchmark did that).
class RankThreads {
 public:
  explicit RankThreads(int ranks) : start_(ranks + 1), end_(ranks + 1) {
    for (int r = 0; r < ranks; ++r) {
      threads_.emplace_back([this, r] {
        for (;;) {
          start_.arrive_and_wait();
          if (stop_) return;
          (*job_)(r);
          end_.arrive_and_wait();
        }
      });
    }
  }
  ~RankThreads() {
    stop_ = true;
    start_.arrive_and_wait();
    for (std::thread& t : threads_) t.join();
  }
  // Run: job(r) on every rank's thread at once; returns when all are done.
  void Run(const std::function<void(int)>& job) {
    job_ = &job;
    start_.arrive_and_wait();
    end_.arrive_and_wait();
  }

 private:
  std::barrier<> start_;
  std::barrier<> end_;
  const std::function<void(int)>* job_ = nullptr;  // set before start_ releases the ranks
  bool stop_ = false;                               // likewise
  std::vector<std::thread> threads_;
};

// Group: connected ranks, their threads and buffers, kept between benchmarks.
struct Group {
  gloo::rendezvous::HashStore store;
  std::vector<std::shared_ptr<gloo::Context>> contexts;
  std::vector<std::vector<float>> data;
  std::unique_ptr<RankThreads> threads;
};

Group& GroupOf(int ranks) {
  static std::map<int, std::unique_ptr<Group>> groups;
  std::unique_ptr<Group>& group = groups[ranks];
  if (group) return *group;
  group = std::make_unique<Group>();
  group->contexts.resize(static_cast<size_t>(ranks));
  group->threads = std::make_unique<RankThreads>(ranks);
  group->threads->Run([&](int r) {
    auto context = Connect(group->store, ConnectOptions{.rank = r, .ranks = ranks});
    if (!context.ok()) {
      std::fprintf(stderr, "collectives_bench: %s\n", context.status().ToString().c_str());
      std::exit(1);
    }
    group->contexts[r] = *context;
  });
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
  std::vector<Clock::time_point> begin(static_cast<size_t>(n)), end(static_cast<size_t>(n));
  std::vector<absl::Status> statuses(static_cast<size_t>(n));
  RingAllreduceOptions options = ring_options;
  options.skip = skip;
  const double cpu_start = ProcessCpuSeconds();
  group.threads->Run([&](int r) {
    begin[r] = Clock::now();
    if (variant == Variant::kGloo) {
      statuses[r] = GlooAllreduce(group.contexts[r], group.data[r]);
    } else {
      statuses[r] = RingAllreduce(*group.contexts[r], group.data[r], options);
    }
    end[r] = Clock::now();
  });
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

// Interval: a distribution-free 95% confidence interval of the median of
// `values` (order statistics: the median lies between the j-th and k-th of
// n sorted values with probability >= 95%, from the binomial(n, 1/2) with
// its normal approximation). Needs at least 6 values; else (0, 0).
struct Interval {
  double low = 0.0;
  double high = 0.0;
};
Interval MedianInterval(std::vector<double> values) {
  const size_t n = values.size();
  if (n < 6) return {};
  std::sort(values.begin(), values.end());
  const double half_width = 1.96 * std::sqrt(static_cast<double>(n)) / 2.0;
  const auto j = static_cast<size_t>(std::max(1.0, std::floor(n / 2.0 - half_width)));
  const auto k = static_cast<size_t>(std::min(static_cast<double>(n),
                                              std::ceil(n / 2.0 + 1.0 + half_width)));
  return Interval{.low = values[j - 1], .high = values[k - 1]};
}

// PooledRatio: sum(a) / sum(b) - 1 over rounds (a and b paired by round),
// with a 95% bootstrap interval (2000 resamples of the rounds, fixed seed):
// the mean uses every round's size, so it resolves a small difference in
// fewer rounds than the median of per-round ratios does.
struct Estimate {
  double value = 0.0;
  Interval interval;
};
Estimate PooledRatio(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ratio = [&](const std::vector<size_t>& rounds) {
    double sa = 0.0, sb = 0.0;
    for (const size_t i : rounds) {
      sa += a[i];
      sb += b[i];
    }
    return sa / sb - 1.0;
  };
  std::vector<size_t> all(a.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  Estimate estimate{.value = ratio(all)};
  if (a.size() < 6) return estimate;
  std::mt19937_64 random(20261202);
  std::uniform_int_distribution<size_t> pick(0, a.size() - 1);
  std::vector<double> resampled;
  std::vector<size_t> rounds(a.size());
  for (int b_i = 0; b_i < 2000; ++b_i) {
    for (size_t& r : rounds) r = pick(random);
    resampled.push_back(ratio(rounds));
  }
  std::sort(resampled.begin(), resampled.end());
  estimate.interval = Interval{.low = resampled[49], .high = resampled[1949]};
  return estimate;
}

double Min(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::min_element(values.begin(), values.end());
}

// Rounds of BM_SkipReduce (--skip_rounds=R, parsed in main).
int skip_rounds = 30;

// BM_SkipReduce: the floors of issue 11 (static and random at least 0.9 of
// 2(N-1)/(2(N-1)-k); random within 2% of static). One benchmark iteration
// is one round: plain, static and random once each, back to back, in all
// six orders in turn (so after 6 rounds each variant has run first, second
// and third twice, and each has followed each other: a load trend or a
// "what ran just before" effect falls on all three alike). Per round, the
// ratios of that round's own runs; reported per clock (wall, CPU):
//   <variant>_of_theory: median over rounds of (plain / variant) / theory,
//     with _lo and _hi its 95% interval;
//   <variant>_of_theory_min: min-of-R: (min plain) / (min variant) / theory,
//     the least disturbed run of each (load only ever adds time);
//   random_vs_static: median of (random / static - 1), _lo, _hi, and
//     random_vs_static_min from min-of-R, and random_vs_static_pooled
//     (sum of random's times / sum of static's - 1, with _plo and _phi its
//     bootstrap interval).
// Wall time: common start to the last rank's end. CPU: the process's CPU
// time (all threads, user and system), which other processes' load does not
// inflate much; on 2 cores shared with compilers, it is the clock to read.
void BM_SkipReduce(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const size_t count = CountOf(state.range(1));
  const int k = static_cast<int>(state.range(2));
  Group& group = GroupOf(ranks);
  SkipOptions static_skip{.mode = SkipMode::kStatic, .reduce_scatter_steps = k};
  SkipOptions random_skip{.mode = SkipMode::kRandom, .reduce_scatter_steps = k};
  const SkipOptions no_skip;
  random_skip.seed = 42;
  // One warm-up call of each, not timed: the first call after connecting
  // (or after another benchmark's sizes) pays for pages and socket buffers.
  for (const SkipOptions* skip : {&no_skip, static_cast<const SkipOptions*>(&static_skip),
                                  static_cast<const SkipOptions*>(&random_skip)}) {
    TimeOne(group, count, Variant::kRing, *skip, state);
  }
  enum { kPlain, kStaticSkip, kRandomSkip, kVariants };
  constexpr int kOrders[6][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}, {1, 0, 2}};
  const double theory = 2.0 * (ranks - 1) / (2.0 * (ranks - 1) - k);
  // [clock][variant]: per-round times; [clock]: per-round ratios.
  std::vector<double> times[2][kVariants];
  std::vector<double> static_of_theory[2], random_of_theory[2], random_vs_static[2];
  int order = 0;
  for (auto _ : state) {
    Times round[kVariants];
    const SkipOptions* skips[kVariants] = {&no_skip, &static_skip, &random_skip};
    for (const int v : kOrders[order]) round[v] = TimeOne(group, count, Variant::kRing, *skips[v], state);
    order = (order + 1) % 6;
    ++random_skip.iteration;  // a new shift every round, as in training
    for (int clock = 0; clock < 2; ++clock) {
      double t[kVariants];
      for (int v = 0; v < kVariants; ++v) {
        t[v] = clock == 0 ? round[v].wall : round[v].cpu;
        times[clock][v].push_back(t[v]);
      }
      static_of_theory[clock].push_back(t[kPlain] / t[kStaticSkip] / theory);
      random_of_theory[clock].push_back(t[kPlain] / t[kRandomSkip] / theory);
      random_vs_static[clock].push_back(t[kRandomSkip] / t[kStaticSkip] - 1.0);
    }
    state.SetIterationTime(round[kPlain].wall);
  }
  state.counters["theory"] = theory;
  for (int clock = 0; clock < 2; ++clock) {
    const std::string suffix = clock == 0 ? "" : "_cpu";
    const auto put = [&](const std::string& name, const std::vector<double>& values) {
      const Interval interval = MedianInterval(values);
      state.counters[name + suffix] = Median(values);
      state.counters[name + suffix + "_lo"] = interval.low;
      state.counters[name + suffix + "_hi"] = interval.high;
    };
    put("static_of_theory", static_of_theory[clock]);
    put("random_of_theory", random_of_theory[clock]);
    put("random_vs_static", random_vs_static[clock]);
    const double plain_min = Min(times[clock][kPlain]);
    const double static_min = Min(times[clock][kStaticSkip]);
    const double random_min = Min(times[clock][kRandomSkip]);
    state.counters["static_of_theory" + suffix + "_min"] = plain_min / static_min / theory;
    state.counters["random_of_theory" + suffix + "_min"] = plain_min / random_min / theory;
    state.counters["random_vs_static" + suffix + "_min"] = random_min / static_min - 1.0;
    const Estimate pooled = PooledRatio(times[clock][kRandomSkip], times[clock][kStaticSkip]);
    state.counters["random_vs_static" + suffix + "_pooled"] = pooled.value;
    state.counters["random_vs_static" + suffix + "_plo"] = pooled.interval.low;
    state.counters["random_vs_static" + suffix + "_phi"] = pooled.interval.high;
    state.counters["plain_ms" + suffix] = Median(times[clock][kPlain]) * 1e3;
  }
}

// BM_SkipShift: a diagnostic for the wall-time lean of random over static
// (bench/RESULTS.md): static (shift 0 every round), random at one fixed
// iteration (a constant shift other than 0) and random (a new shift every
// round), in rounds as BM_SkipReduce. Counters: fixed_vs_static and
// random_vs_fixed (pooled: sums over rounds, - 1) per clock. If "random"
// costs more than "fixed", changing the shift costs; if "fixed" costs more
// than static, the shift's value does.
void BM_SkipShift(benchmark::State& state) {
  const int ranks = static_cast<int>(state.range(0));
  const size_t count = CountOf(state.range(1));
  const int k = static_cast<int>(state.range(2));
  Group& group = GroupOf(ranks);
  const SkipOptions static_skip{.mode = SkipMode::kStatic, .reduce_scatter_steps = k};
  SkipOptions fixed_skip{.mode = SkipMode::kRandom, .reduce_scatter_steps = k, .seed = 42};
  while (RandomShift(fixed_skip.seed, fixed_skip.iteration, fixed_skip.tensor, ranks) == 0) {
    ++fixed_skip.iteration;
  }
  SkipOptions random_skip = fixed_skip;
  for (const SkipOptions* skip : {&static_skip, static_cast<const SkipOptions*>(&fixed_skip),
                                  static_cast<const SkipOptions*>(&random_skip)}) {
    TimeOne(group, count, Variant::kRing, *skip, state);
  }
  constexpr int kOrders[6][3] = {{0, 1, 2}, {2, 1, 0}, {1, 2, 0}, {0, 2, 1}, {2, 0, 1}, {1, 0, 2}};
  std::vector<double> times[2][3];  // [clock][static, fixed, random]
  int order = 0;
  for (auto _ : state) {
    Times round[3];
    const SkipOptions* skips[3] = {&static_skip, &fixed_skip, &random_skip};
    for (const int v : kOrders[order]) round[v] = TimeOne(group, count, Variant::kRing, *skips[v], state);
    order = (order + 1) % 6;
    ++random_skip.iteration;
    for (int v = 0; v < 3; ++v) {
      times[0][v].push_back(round[v].wall);
      times[1][v].push_back(round[v].cpu);
    }
    state.SetIterationTime(round[0].wall);
  }
  for (int clock = 0; clock < 2; ++clock) {
    const std::string suffix = clock == 0 ? "" : "_cpu";
    const Estimate fixed = PooledRatio(times[clock][1], times[clock][0]);
    const Estimate random = PooledRatio(times[clock][2], times[clock][1]);
    state.counters["fixed_vs_static" + suffix] = fixed.value;
    state.counters["fixed_vs_static" + suffix + "_plo"] = fixed.interval.low;
    state.counters["fixed_vs_static" + suffix + "_phi"] = fixed.interval.high;
    state.counters["random_vs_fixed" + suffix] = random.value;
    state.counters["random_vs_fixed" + suffix + "_plo"] = random.interval.low;
    state.counters["random_vs_fixed" + suffix + "_phi"] = random.interval.high;
  }
}

void RegisterSkipReduce() {
  for (const auto& [ranks, ks] : {std::pair{4, std::vector<int>{1, 2, 3}},
                                  std::pair{8, std::vector<int>{1, 2, 3, 4, 5, 6, 7}}}) {
    for (const int k : ks) {
      benchmark::RegisterBenchmark("BM_SkipReduce", BM_SkipReduce)
          ->Args({ranks, 32, k})
          ->ArgNames({"ranks", "MiB", "k"})
          ->Iterations(skip_rounds)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RegisterBenchmark("BM_SkipShift", BM_SkipShift)
      ->Args({8, 32, 1})
      ->ArgNames({"ranks", "MiB", "k"})
      ->Iterations(skip_rounds)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace
}  // namespace atp::collectives

// main: --skip_rounds=R (rounds of BM_SkipReduce, default 30, at least 6),
// then Google Benchmark's own flags.
int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    constexpr std::string_view kRounds = "--skip_rounds=";
    if (arg.starts_with(kRounds)) {
      const int rounds = std::atoi(argv[i] + kRounds.size());
      if (rounds < 6) {
        std::fprintf(stderr, "collectives_bench: --skip_rounds=%s: give an integer >= 6\n",
                     argv[i] + kRounds.size());
        return 2;
      }
      atp::collectives::skip_rounds = rounds;
      continue;
    }
    rest.push_back(argv[i]);
  }
  int rest_count = static_cast<int>(rest.size());
  atp::collectives::RegisterSkipReduce();
  benchmark::Initialize(&rest_count, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_count, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
