// Quantize / Dequantize throughput, scalar vs AVX2 (and AVX-512 for
// dequantize), in bytes of float32 per second: one fragment (62 values), an
// L2-resident buffer (256 KiB of floats, 512 KiB with the output), 1 MiB and
// a DRAM-sized 64 MiB. A memcpy of the same bytes is the bandwidth reference.
//
//   ninja -C build quantize_bench && build/bench/quantize_bench
//
// Every benchmark checks its output against the scalar version after timing
// (checksum of the whole output) and fails the run on a mismatch, so the work
// cannot be elided and a fast wrong kernel cannot pass.
//
// The inputs are gradient-like (normal, sigma 1e-2, scale 1e8): no NaN, no
// saturation, the common kExact path.
//
// Measured on the 2-vCPU Xeon VM (AVX-512 capable), RelWithDebInfo (-O2),
// medians of 5, CPU time, while other builds ran (load average 5-7), with
//   build/bench/quantize_bench --benchmark_min_time=1 --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
// GB/s of float32:    62      256 KiB   1 MiB   64 MiB
//   Quantize scalar   0.76    0.75      0.75    0.74
//   Quantize AVX2     11.6    13.3      12.7    4.9
//   Dequantize scalar 2.7     2.7       2.7     2.6
//   Dequantize AVX2   5.3     5.4       5.4     4.6
//   memcpy            57      34        23      5.6
// At 64 MiB quantize moves the same bytes as memcpy and runs at 87% of it:
// DRAM-bound on this VM. -O3 changes nothing measurable. Dequantize was then
// bound by the double division (see DequantizeScalar); the reciprocal kernels
// (dequantize_reciprocal.h) and the AVX-512 one came later: their figures are
// in bench/RESULTS.md ("Dequantize in 16 lanes").
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "atp/quantize.h"
#include "benchmark/benchmark.h"

namespace {

using QuantizeFn = atp::QuantizeOutcome (*)(std::span<const float>, double, std::span<int32_t>);
using DequantizeFn = void (*)(std::span<const int32_t>, double, std::span<float>);

constexpr int64_t kFragment = 62;
constexpr int64_t kL2Resident = (256 << 10) / sizeof(float);
constexpr int64_t kOneMiB = (1 << 20) / sizeof(float);
constexpr int64_t kSixtyFourMiB = (64 << 20) / sizeof(float);

std::vector<float> Gradients(size_t n) {
  std::mt19937_64 rng(42);
  std::normal_distribution<float> normal(0.0f, 1e-2f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

template <typename T>
uint64_t Checksum(const std::vector<T>& v) {
  uint64_t sum = 0;
  for (const T& x : v) {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof(bits));
    sum = sum * 1000003u + bits;
  }
  return sum;
}

// Isa: what a kernel needs of the CPU.
enum class Isa { kAny, kAvx2, kAvx512 };

bool CpuLacks(benchmark::State& state, Isa isa) {
  if (isa == Isa::kAvx2 && !atp::HasAvx2()) {
    state.SkipWithError("this CPU has no AVX2");
    return true;
  }
  if (isa == Isa::kAvx512 && !atp::HasAvx512()) {
    state.SkipWithError("this CPU has no AVX-512F/BW");
    return true;
  }
  return false;
}

void BM_Quantize(benchmark::State& state, QuantizeFn fn, Isa isa) {
  if (CpuLacks(state, isa)) return;
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> in = Gradients(n);
  std::vector<int32_t> want(n);
  const atp::QuantizeOutcome want_outcome = atp::QuantizeScalar(in, atp::kDefaultScale, want);
  std::vector<int32_t> out(n);
  atp::QuantizeOutcome outcome = atp::QuantizeOutcome::kExact;
  for (auto _ : state) {
    outcome = fn(in, atp::kDefaultScale, out);
    benchmark::DoNotOptimize(outcome);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  if (outcome != want_outcome || Checksum(out) != Checksum(want)) {
    state.SkipWithError("output differs from QuantizeScalar");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * sizeof(float)));
}

void BM_Dequantize(benchmark::State& state, DequantizeFn fn, Isa isa) {
  if (CpuLacks(state, isa)) return;
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<int32_t> in(n);
  atp::QuantizeScalar(Gradients(n), atp::kDefaultScale, in);
  std::vector<float> want(n);
  atp::DequantizeScalar(in, atp::kDefaultScale, want);
  std::vector<float> out(n);
  for (auto _ : state) {
    fn(in, atp::kDefaultScale, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  if (Checksum(out) != Checksum(want)) {
    state.SkipWithError("output differs from DequantizeScalar");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * sizeof(float)));
}

// The bandwidth reference: copying the same number of bytes.
void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const std::vector<float> in = Gradients(n);
  std::vector<float> out(n);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), n * sizeof(float));
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  if (out != in) state.SkipWithError("memcpy lost bytes");
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n * sizeof(float)));
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Arg(kFragment)->Arg(kL2Resident)->Arg(kOneMiB)->Arg(kSixtyFourMiB);
}

BENCHMARK_CAPTURE(BM_Quantize, scalar, &atp::QuantizeScalar, Isa::kAny)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Quantize, avx2, &atp::QuantizeAvx2, Isa::kAvx2)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Quantize, avx512, &atp::QuantizeAvx512, Isa::kAvx512)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Quantize, dispatch, &atp::Quantize, Isa::kAny)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Dequantize, scalar, &atp::DequantizeScalar, Isa::kAny)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Dequantize, avx2, &atp::DequantizeAvx2, Isa::kAvx2)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Dequantize, avx512, &atp::DequantizeAvx512, Isa::kAvx512)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Dequantize, dispatch, &atp::Dequantize, Isa::kAny)->Apply(Sizes);
BENCHMARK(BM_Memcpy)->Apply(Sizes);

}  // namespace

BENCHMARK_MAIN();
