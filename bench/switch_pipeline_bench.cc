// bench/switch_pipeline_bench.cc: packets per second through the switch
// pipeline's aggregate path, against the bare 62-int32 add.
//
//   build-x/bench/switch_pipeline_bench --benchmark_min_time=1 --benchmark_repetitions=3
//
// Results and the exact commands: bench/results/switch_pipeline.md.
//
// BM_Pipeline/aggregators:N/kernel:K/api:A: 4 workers of one rack send one
// fragment each for every aggregator of an array of N (worker by worker,
// aggregators in a fixed random order, as hashed indices fall); the 4th
// contribution completes the aggregator. An aggregator is 288 bytes (a
// 32-byte state and 256 bytes of values): N = 64 (18 KB) lives in L1, 4096
// (1.2 MB) in L2, 786,432 (226 MB) and 2,097,152 (604 MB) beyond (12 and 32
// jobs with static slices of 65,536, since header indices are 16 bits).
// Frames go through in bursts of 32 from a ring of 32 buffers: A = 0 calls
// Process on each, A = 1 hands the burst to ProcessBurst (which prefetches
// aggregators ahead), A = 2 calls nothing: the harness alone, for the
// accounting (the last worker's frames count as completed and are restored,
// as with the pipeline). Writing each packet's job, seq and index into its
// buffer (what a NIC's receive would do), restoring a completed buffer from
// the template, and checking every completed result are the harness; with
// A = 0, 1 and 2 they are inside the timed loop. A = 3 is A = 1 timed around
// the ProcessBurst call alone (the time stamp counter, manual time): the
// pipeline without the harness.
//
// BM_BareAdd/kernel:K: the saturating add alone, aggregator and payload in L1.
// Kernels: 0 scalar, 1 AVX2, 2 AVX-512.
// BM_ValidateFrame: wire::ValidateFrame alone, the first thing every packet pays.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "atp/wire.h"
#include "benchmark/benchmark.h"
#include "switch_emulator/pipeline/pipeline.h"
#include "switch_emulator/pipeline/value_kernels.h"

namespace atp::switch_emulator {
namespace {

constexpr int kWorkers = 4;
constexpr uint32_t kIndicesPerJob = 65536;  // 16-bit header indices
constexpr uint16_t kPort = wire::kDefaultBasePort;

// Kernel argument: 0 scalar, 1 AVX2, 2 AVX-512.
ValueKernel KernelArg(int64_t arg) {
  return arg == 0 ? ValueKernel::kScalar : arg == 1 ? ValueKernel::kAvx2 : ValueKernel::kAvx512;
}
bool Supported(ValueKernel kernel) {
  return kernel == ValueKernel::kScalar || (kernel == ValueKernel::kAvx2 && CpuHasAvx2()) ||
         (kernel == ValueKernel::kAvx512 && CpuHasAvx512());
}

// WorkerFrame: worker w's fragment, value i = i + 1.
std::array<uint8_t, wire::kFrameBytes> WorkerFrame(int w) {
  wire::FrameFields fields;
  fields.header.job = 1;
  fields.header.seq = 0;
  fields.header.bitmap0 = 1u << w;
  fields.header.bitmap1 = 1;
  fields.header.fan_in0 = kWorkers;
  fields.header.fan_in1 = 1;
  wire::Payload payload;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint32_t>(i + 1);
  std::array<uint8_t, wire::kFrameBytes> frame{};
  wire::EncodeFrame(fields, payload, kPort, frame);
  return frame;
}

void StoreBig32(uint8_t* p, uint32_t v) {
  v = __builtin_bswap32(v);
  std::memcpy(p, &v, 4);
}
void StoreBig16(uint8_t* p, uint16_t v) {
  v = __builtin_bswap16(v);
  std::memcpy(p, &v, 2);
}
uint32_t LoadBig32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}

// Restoring a completed frame. A completion rewrites the payload, bitmap0 and
// the fan/flags word; the harness writes bitmap0 itself, so it copies back the
// last 256 bytes of the template (bitmap1 to the end: 50..305, the fan/flags
// word and payload included) in 32-byte moves (16-byte without AVX2). A plain
// assignment of the 306-byte array compiles to `rep movsq` here, whose
// start-up cost made the harness a third of the benchmark's time (perf,
// 2026-11-29): more than the pipeline's own work on a completing packet.
constexpr size_t kRestoreFrom = wire::kFrameBytes - 256;
static_assert(kRestoreFrom <= wire::kAtpOffset + 8, "covers bitmap1, fan/flags and payload");
using RestoreFn = void (*)(uint8_t* frame, const uint8_t* from);
__attribute__((target("avx2"))) void RestoreTailAvx2(uint8_t* frame, const uint8_t* from) {
  auto* out = reinterpret_cast<__m256i*>(frame + kRestoreFrom);
  const auto* in = reinterpret_cast<const __m256i*>(from + kRestoreFrom);
#pragma GCC unroll 8
  for (size_t c = 0; c < 8; ++c) _mm256_storeu_si256(out + c, _mm256_loadu_si256(in + c));
}
void RestoreTailSse2(uint8_t* frame, const uint8_t* from) {
  auto* out = reinterpret_cast<__m128i*>(frame + kRestoreFrom);
  const auto* in = reinterpret_cast<const __m128i*>(from + kRestoreFrom);
#pragma GCC unroll 16
  for (size_t c = 0; c < 16; ++c) _mm_storeu_si128(out + c, _mm_loadu_si128(in + c));
}

// TscNow: the time stamp counter, ordered after everything before it and
// before everything after it (lfence on both sides). A steady_clock read
// costs about as much as a packet; this costs a few cycles.
uint64_t TscNow() {
  _mm_lfence();
  const uint64_t ticks = __rdtsc();
  _mm_lfence();
  return ticks;
}

// TscTicksPerSecond: the counter's rate, measured once against steady_clock
// over 50 ms (the CPU flags say constant_tsc and nonstop_tsc here).
double TscTicksPerSecond() {
  static const double rate = [] {
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t c0 = TscNow();
    auto t1 = t0;
    while (t1 - t0 < std::chrono::milliseconds(50)) t1 = std::chrono::steady_clock::now();
    const uint64_t c1 = TscNow();
    return static_cast<double>(c1 - c0) / std::chrono::duration<double>(t1 - t0).count();
  }();
  return rate;
}

// Burst: frames are processed 32 at a time from a ring of 32 buffers, as a
// binding receives them.
constexpr size_t kBurst = 32;

void BM_Pipeline(benchmark::State& state) {
  const size_t aggregators = static_cast<size_t>(state.range(0));
  const ValueKernel kernel = KernelArg(state.range(1));
  enum class Api { kProcess = 0, kProcessBurst = 1, kNone = 2, kProcessBurstAlone = 3 };
  const auto api = static_cast<Api>(state.range(2));
  if (!Supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  // One job when every aggregator is reachable by a 16-bit index, else one
  // job per 65,536-aggregator static slice.
  PipelineConfig config;
  config.aggregator_count = aggregators;
  config.kernel = kernel;
  config.orphan_timeout = TimeDelta::FromSeconds(10);
  const size_t jobs = (aggregators + kIndicesPerJob - 1) / kIndicesPerJob;
  config.partition = jobs > 1 ? PartitionMode::kStatic : PartitionMode::kDynamic;
  for (size_t j = 0; j < jobs; ++j) {
    JobConfig job{.job = static_cast<uint8_t>(j + 1), .levels = JobLevels::kLevel1};
    if (jobs > 1) {
      job.slice = {.first = static_cast<uint32_t>(j * kIndicesPerJob),
                   .count = static_cast<uint32_t>(
                       std::min<size_t>(kIndicesPerJob, aggregators - j * kIndicesPerJob))};
    }
    config.jobs.push_back(job);
  }
  absl::StatusOr<SwitchPipeline> created = SwitchPipeline::Create(config);
  if (!created.ok()) {
    state.SkipWithError(std::string(created.status().message()).c_str());
    return;
  }
  SwitchPipeline& pipeline = *created;

  // The visiting order: every aggregator once per worker, in a random order.
  // Entry e is job e / 65536 + 1, header index (and seq) e % 65536.
  std::vector<uint32_t> order(aggregators);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(42));
  std::vector<uint32_t> job_seq(aggregators);
  for (size_t k = 0; k < aggregators; ++k) {
    const uint32_t e = order[k];
    job_seq[k] = ((e / kIndicesPerJob + 1) << wire::kSeqBits) | (e % kIndicesPerJob);
  }

  // Every worker sends the same values (value i = i + 1); only bitmap0 says
  // who sent it. ring[b] is a copy of the template unless `dirty[b]` (its
  // payload and flags were rewritten by a completion).
  const std::array<uint8_t, wire::kFrameBytes> kTemplate = WorkerFrame(0);
  std::array<std::array<uint8_t, wire::kFrameBytes>, kBurst> ring;
  std::array<bool, kBurst> dirty;
  std::array<bool, kBurst> completes;  // the frame is its aggregator's last contribution
  ring.fill(kTemplate);
  dirty.fill(false);
  std::array<std::span<uint8_t>, kBurst> spans;
  for (size_t b = 0; b < kBurst; ++b) spans[b] = ring[b];
  std::array<Decision, kBurst> decisions;
  const RestoreFn restore_tail = CpuHasAvx2() ? RestoreTailAvx2 : RestoreTailSse2;
  const double tsc_rate = api == Api::kProcessBurstAlone ? TscTicksPerSecond() : 1.0;

  TimePoint now = TimePoint::FromNanoseconds(1);
  size_t k = 0;
  int w = 0;
  uint64_t completed = 0;
  uint64_t wrong = 0;
  while (state.KeepRunningBatch(kBurst)) {
    // Receive: fill the burst (header fields of the next 32 packets).
    for (size_t b = 0; b < kBurst; ++b) {
      if (dirty[b]) {
        restore_tail(ring[b].data(), kTemplate.data());
        dirty[b] = false;
      }
      uint8_t* frame = ring[b].data();
      StoreBig32(frame + wire::kAtpOffset, job_seq[k]);
      StoreBig32(frame + wire::kAtpOffset + 4, 1u << w);
      StoreBig16(frame + wire::kAtpOffset + 14, static_cast<uint16_t>(job_seq[k]));
      completes[b] = w == kWorkers - 1;
      if (++k == aggregators) {
        k = 0;
        if (++w == kWorkers) w = 0;
      }
    }
    switch (api) {
      case Api::kProcess:
        for (size_t b = 0; b < kBurst; ++b) decisions[b] = pipeline.Process(ring[b], now, 0);
        break;
      case Api::kProcessBurst:
        pipeline.ProcessBurst(spans, now, 0, decisions);
        break;
      case Api::kProcessBurstAlone: {
        const uint64_t start = TscNow();
        pipeline.ProcessBurst(spans, now, 0, decisions);
        state.SetIterationTime(static_cast<double>(TscNow() - start) / tsc_rate);
        break;
      }
      case Api::kNone:  // as if the pipeline ran: the last worker's frames complete
        for (size_t b = 0; b < kBurst; ++b) {
          decisions[b] = {completes[b] ? Verdict::kToPs : Verdict::kAbsorbed};
        }
        benchmark::ClobberMemory();
        break;
    }
    for (size_t b = 0; b < kBurst; ++b) {
      const Decision d = decisions[b];
      if (d.verdict != Verdict::kAbsorbed) {
        ++completed;
        const uint8_t* payload = ring[b].data() + wire::kPayloadOffset;
        if (api != Api::kNone) {
          wrong += static_cast<int>(d.verdict != Verdict::kToPs) +
                   static_cast<int>(LoadBig32(payload) != kWorkers) +
                   static_cast<int>(LoadBig32(payload + 61 * 4) != kWorkers * 62);
        }
        dirty[b] = true;
      }
    }
    now += TimeDelta::FromNanoseconds(100);
  }
  const uint64_t packets = static_cast<uint64_t>(state.iterations());
  state.SetItemsProcessed(static_cast<int64_t>(packets));
  state.counters["completed"] = static_cast<double>(completed);
  if (wrong != 0 || pipeline.counters().collisions != 0 || pipeline.counters().malformed != 0 ||
      pipeline.counters().duplicates != 0) {
    state.SkipWithError("wrong aggregation result");
  }
  state.SetLabel(std::string(ValueKernelName(pipeline.kernel())) +
                 (api == Api::kProcessBurst        ? "+burst"
                  : api == Api::kProcessBurstAlone ? "+burst, pipeline alone"
                  : api == Api::kNone              ? " harness only"
                                                   : ""));
}
BENCHMARK(BM_Pipeline)
    ->ArgNames({"aggregators", "kernel", "api"})
    ->ArgsProduct({{64, 4096}, {0, 1, 2}, {0, 1}})
    ->Args({64, 0, 2});  // the harness alone (kernel unused)
// ProcessBurst timed alone (manual time: the harness's share left out).
BENCHMARK(BM_Pipeline)
    ->ArgNames({"aggregators", "kernel", "api"})
    ->ArgsProduct({{64, 4096}, {1, 2}, {3}})
    ->UseManualTime();
// Beyond the caches: long enough that every aggregator completes several times.
BENCHMARK(BM_Pipeline)
    ->ArgNames({"aggregators", "kernel", "api"})
    ->ArgsProduct({{12 * 65536, 32 * 65536}, {1, 2}, {0, 1}})
    ->MinTime(2.0);
BENCHMARK(BM_Pipeline)
    ->ArgNames({"aggregators", "kernel", "api"})
    ->ArgsProduct({{12 * 65536, 32 * 65536}, {2}, {3}})
    ->MinTime(2.0)
    ->UseManualTime();

void BM_BareAdd(benchmark::State& state) {
  const ValueKernel kernel = KernelArg(state.range(0));
  if (!Supported(kernel)) {
    state.SkipWithError("kernel not supported on this CPU");
    return;
  }
  const ValueKernels k = *SelectValueKernels(kernel);
  // Adds alternate a payload (value i = i + 1) and its negation, so the sums
  // never saturate: the common case, as in the pipeline benchmark.
  std::array<uint8_t, wire::kFrameBytes> plus = WorkerFrame(0);
  std::array<uint8_t, wire::kFrameBytes> minus = plus;
  for (size_t i = 0; i < wire::kValuesPerFragment; ++i) {
    uint8_t* v = minus.data() + wire::kPayloadOffset + 4 * i;
    StoreBig32(v, 0u - LoadBig32(v));
  }
  AggregatorValues acc;
  k.load(acc.lanes, plus.data() + wire::kPayloadOffset);
  const uint8_t* payloads[2] = {minus.data() + wire::kPayloadOffset,
                                plus.data() + wire::kPayloadOffset};
  uint64_t n = 0;
  for (auto _ : state) {
    k.add(acc.lanes, payloads[n++ & 1]);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetLabel(std::string(ValueKernelName(kernel)));
  // Value 61 is 62 after the load and every even number of adds, 0 after an odd one.
  if (acc.lanes[61] != ((n & 1) == 0 ? 62 : 0)) state.SkipWithError("wrong sum");
}
BENCHMARK(BM_BareAdd)->ArgName("kernel")->Arg(0)->Arg(1)->Arg(2);

void BM_ValidateFrame(benchmark::State& state) {
  std::array<uint8_t, wire::kFrameBytes> frame = WorkerFrame(0);
  for (auto _ : state) {
    benchmark::DoNotOptimize(frame);
    benchmark::DoNotOptimize(wire::ValidateFrame(frame, kPort));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_ValidateFrame);

}  // namespace
}  // namespace atp::switch_emulator

BENCHMARK_MAIN();
