// runtime_host_bench: the host stack's cost per fragment on one core, against
// a transport that answers instantly (testbed::ReflectorQueue), through the
// real I/O loop (WorkerIoLoop::Step): the engine, quantization, frame
// encoding and transport bursts on the way out ("push"); frame decoding, the
// engine's acknowledgement path, dequantization and completion on the way
// back ("pull"); and both together ("round trip").
//
// Counters: items_per_second = fragments per second on this core (CPU time);
// cores_for_100GbE = cores that rate needs to keep a 100 GbE link busy in that
// direction (37.9 Mpps of 306-byte frames, ENVIRONMENT.md; Google Benchmark
// prints this inverted rate with an "s" suffix: read it as a plain number).
// The round trip includes the fake transport's copy of each answer (what a
// NIC's DMA would do); push and pull do not.
//
// The PS's host the same way (BM_PsMulticast*): PsIoLoop::Step receiving a
// worker's gradients of a one-worker job (each completes at once, as a
// switch's whole aggregate does) and multicasting the parameter packets, to
// a transport that drops them: items are parameter packets sent.
//
//   build/bench/runtime_host_bench --benchmark_min_time=1
//
// Inputs are gradient-like unless the name says Wide (Inputs below).
//
// Every benchmark checks its last result against dequantize(quantize(x)) (the
// PS's: the last parameter packet, addressed to the group, with the last
// gradient's sum).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "atp/quantize.h"
#include "atp/transport/segmentation.h"
#include "atp/wire.h"
#include "benchmark/benchmark.h"
#include "lib/host/op_state.h"
#include "lib/host/ps_io_loop.h"
#include "lib/host/ps_shard.h"
#include "lib/host/worker_config.h"
#include "lib/host/worker_io_loop.h"
#include "lib/wire/control_message.h"
#include "testbed/reflector_queue.h"

namespace atp::host {
namespace {

constexpr double k100GbEFramesPerSecond = 37.9e6;
constexpr size_t kFragments = 1 << 15;  // per benchmark iteration
constexpr size_t kValues = kFragments * wire::kValuesPerFragment;

// Inputs: what the tensor holds. The quantizer and dequantizer take a
// single-precision path where products and sums stay small (quantize_avx512.cc,
// dequantize_avx512.cc), so the values matter:
//   kGradients: gradient-like, normal with sigma 1e-2 (as quantize_bench's):
//     at the default scale all but about 0.2% of fragments take the
//     single-precision paths (a value past 4.19 sigma sends its block to the
//     double path);
//   kWide: uniform in [-1, 1), nearly every block on the double-precision
//     paths (what these benchmarks used before those paths existed).
enum class Inputs { kGradients, kWide };

// InputValues: kValues of them, made once per process (BM_Push builds a
// Bench per iteration); a fixed seed.
const std::vector<float>& InputValues(Inputs inputs) {
  static const std::vector<float> gradients = [] {
    std::mt19937_64 rng(0x47524144);
    std::normal_distribution<float> gradient(0.0f, 1e-2f);
    std::vector<float> v(kValues);
    for (float& x : v) x = gradient(rng);
    return v;
  }();
  static const std::vector<float> wide = [] {
    std::vector<float> v(kValues);
    for (size_t i = 0; i < kValues; ++i) v[i] = static_cast<float>(i % 2001) * 1e-3f - 1.0f;
    return v;
  }();
  return inputs == Inputs::kGradients ? gradients : wide;
}

struct Bench {
  // join_at_start: the loop's first frame is its kJoin, as the Worker's is
  // (BM_PsMulticast* hands it to the PS); the worker benchmarks leave it out.
  Bench(testbed::ReflectorQueue::Mode mode, uint32_t slots, uint32_t window,
        transport::TxSegmentation tx_segmentation = transport::TxSegmentation::kSoftware,
        bool join_at_start = false, Inputs inputs = Inputs::kGradients)
      : queue(0, mode, /*capacity=*/kFragments + 1024, tx_segmentation) {
    WorkerOptions o;
    o.job.job_id = 1;
    o.job.layout = RackLayout::Uniform(1, 1);
    o.job.slots = slots;
    o.job.initial_window = window;
    o.job.congestion_control = CongestionControl::kFixedWindow;
    o.job.initial_retransmission_timeout = absl::Seconds(10);  // never fires here
    o.job.max_retransmission_timeout = absl::Seconds(10);
    o.job.retransmission_floor = absl::Seconds(10);
    const wire::Ipv4Address self = *wire::Ipv4Address::Parse("10.0.0.1");
    const wire::Ipv4Address ps = *wire::Ipv4Address::Parse("10.0.0.2");
    o.parameter_servers.push_back({ps, transport::DefaultMacFor(ps)});
    WorkerIoLoopConfig config;
    config.self = {self, transport::DefaultMacFor(self)};
    config.ps = o.parameter_servers[0];
    config.max_burst = 32;
    config.join_at_start = join_at_start;
    loop = *WorkerIoLoop::Create(config, ToWorkerQueueConfig(o, 0), queue);
    input = InputValues(inputs);
    output.resize(kValues);
  }

  std::shared_ptr<internal::OpState> Submit() { return SubmitPart(0, kValues); }

  // SubmitPart: an operation on values [first, first + count) of the tensor.
  std::shared_ptr<internal::OpState> SubmitPart(size_t first, size_t count) {
    auto op = std::make_shared<internal::OpState>(++ops, 1);
    PieceRequest piece;
    piece.op = op;
    piece.input = std::span<const float>(input).subspan(first, count);
    piece.output = std::span<float>(output).subspan(first, count);
    piece.fragments = (count + wire::kValuesPerFragment - 1) / wire::kValuesPerFragment;
    loop->Submit(std::move(piece));
    return op;
  }

  void StepUntil(const std::function<bool()>& done) {
    while (!done()) {
      loop->Step(now);
      now += TimeDelta::FromNanoseconds(100);
    }
  }

  bool Verify() const {
    std::vector<int32_t> q(kValues);
    Quantize(input, kDefaultScale, q);
    std::vector<float> expected(kValues);
    Dequantize(q, kDefaultScale, expected);
    return expected == output;
  }

  testbed::ReflectorQueue queue;
  std::unique_ptr<WorkerIoLoop> loop;
  std::vector<float> input;
  std::vector<float> output;
  uint64_t ops = 0;
  TimePoint now = TimePoint::FromNanoseconds(1);
};

void Report(benchmark::State& state, bool verified) {
  const auto items = static_cast<double>(state.iterations() * kFragments);
  state.SetItemsProcessed(static_cast<int64_t>(items));
  state.counters["cores_for_100GbE"] = benchmark::Counter(
      items / k100GbEFramesPerSecond, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  if (!verified) state.SkipWithError("wrong result");
}

// Round trip: send and receive interleaved, as in a running job.
void BM_RoundTrip(benchmark::State& state) {
  const auto window = static_cast<uint32_t>(state.range(0));
  Bench b(testbed::ReflectorQueue::Mode::kReflect, window, window);
  for (auto _ : state) {
    auto op = b.Submit();
    b.StepUntil([&] { return op->done(); });
  }
  Report(state, b.Verify());
}
BENCHMARK(BM_RoundTrip)->Arg(256)->Arg(4096)->Unit(benchmark::kMillisecond);

// Push: only the sending half. The transport drops what it is given (no
// copy), so only the host stack's cost remains; each iteration uses a fresh
// loop (built untimed) whose window covers the whole tensor.
void PushWith(benchmark::State& state, transport::TxSegmentation tx_segmentation,
              Inputs inputs = Inputs::kGradients) {
  bool verified = true;
  for (auto _ : state) {
    state.PauseTiming();
    auto b = std::make_unique<Bench>(testbed::ReflectorQueue::Mode::kDiscard, 1 << 16, 1 << 16,
                                     tx_segmentation, /*join_at_start=*/false, inputs);
    auto op = b->Submit();
    state.ResumeTiming();
    b->StepUntil([&] { return b->queue.discarded() == kFragments; });
    state.PauseTiming();
    // The last frame is the tensor's last fragment, addressed and encoded right.
    wire::FrameFields fields;
    wire::Payload payload;
    verified &= wire::DecodeFrame(b->queue.last_discarded(), wire::kDefaultBasePort, &fields,
                                  &payload) == wire::DecodeError::kOk &&
                fields.header.position() == kFragments - 1 && !fields.header.ack;
    b.reset();
    state.ResumeTiming();
  }
  Report(state, verified);
}

void BM_Push(benchmark::State& state) { PushWith(state, transport::TxSegmentation::kSoftware); }
BENCHMARK(BM_Push)->Unit(benchmark::kMillisecond);

// PushOffload: the same, to a queue that offloads segmentation (as kernel UDP
// GSO or mlx5 TSO do): the loop quantizes into one buffer of ATP messages and
// hands runs of them over as segmentation jobs, which the fake transport
// drops unseen (the medium's cost of cutting them is not counted here).
void BM_PushOffload(benchmark::State& state) {
  PushWith(state, transport::TxSegmentation::kKernelGso);
}
BENCHMARK(BM_PushOffload)->Unit(benchmark::kMillisecond);

// PushOffloadWide: BM_PushOffload with Inputs::kWide.
void BM_PushOffloadWide(benchmark::State& state) {
  PushWith(state, transport::TxSegmentation::kKernelGso, Inputs::kWide);
}
BENCHMARK(BM_PushOffloadWide)->Unit(benchmark::kMillisecond);

// Pull: only the receiving half (everything is sent first, untimed).
void BM_Pull(benchmark::State& state) {
  Bench b(testbed::ReflectorQueue::Mode::kHold, 1 << 16, 1 << 16);
  for (auto _ : state) {
    state.PauseTiming();
    auto op = b.Submit();
    b.StepUntil([&] { return b.queue.held().size() == kFragments; });
    b.queue.ReleaseHeld();
    state.ResumeTiming();
    b.StepUntil([&] { return op->done(); });
  }
  Report(state, b.Verify());
}
BENCHMARK(BM_Pull)->Unit(benchmark::kMillisecond);

// PullWindow/W: the receiving half as a job with W window slots has it
// (256: the default JobOptions::slots until 2026-12-06, the floor's figure;
// 1024: kDefaultSlots now, bench/RESULTS.md "Default slots"): the tensor goes
// as kFragments / W operations of W fragments each, into consecutive parts
// of one output;
// each operation is sent whole (untimed) and then received (timed). BM_Pull
// keeps the whole tensor in flight instead, which needs 65536 slots: every
// result then also lands in a 21 MB ring of kept copies (WorkerQueueEngine::
// Received) far outside the cache, a cost a job of the default size does
// not have.
//
// Timed by hand (UseManualTime): the receive of each operation between two
// steady_clock reads, summed per iteration. Pausing and resuming Google
// Benchmark's timers around every operation instead reads the clocks four
// times per operation, which BM_PullWindowPaused keeps for the comparison
// (bench/RESULTS.md). The thread is pinned and alone in these runs, so its
// wall time is its CPU time.
// Timing: how PullWindowWith excludes each operation's send.
enum class Timing { kByHand, kPausedTimers };

void PullWindowWith(benchmark::State& state, Inputs inputs, Timing timing = Timing::kByHand) {
  const bool paused = timing == Timing::kPausedTimers;
  const auto window = static_cast<uint32_t>(state.range(0));
  Bench b(testbed::ReflectorQueue::Mode::kHold, window, window,
          transport::TxSegmentation::kSoftware, /*join_at_start=*/false, inputs);
  const size_t values = size_t{window} * wire::kValuesPerFragment;
  for (auto _ : state) {
    std::chrono::steady_clock::duration receiving{};
    for (size_t first = 0; first < kValues; first += values) {
      if (paused) state.PauseTiming();
      auto op = b.SubmitPart(first, values);
      b.StepUntil([&] { return b.queue.held().size() == window; });
      b.queue.ReleaseHeld();
      if (paused) state.ResumeTiming();
      const auto start = std::chrono::steady_clock::now();
      b.StepUntil([&] { return op->done(); });
      receiving += std::chrono::steady_clock::now() - start;
    }
    state.SetIterationTime(std::chrono::duration<double>(receiving).count());
  }
  Report(state, b.Verify());
}
void BM_PullWindow(benchmark::State& state) { PullWindowWith(state, Inputs::kGradients); }
BENCHMARK(BM_PullWindow)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// PullWindowWide/W: BM_PullWindow with Inputs::kWide.
void BM_PullWindowWide(benchmark::State& state) { PullWindowWith(state, Inputs::kWide); }
BENCHMARK(BM_PullWindowWide)->Arg(256)->UseManualTime()->Unit(benchmark::kMillisecond);

// PullWindowPaused/W: BM_PullWindow timed by pausing the benchmark's timers
// around each operation's send (CPU time, four clock system calls per
// operation).
void BM_PullWindowPaused(benchmark::State& state) {
  PullWindowWith(state, Inputs::kGradients, Timing::kPausedTimers);
}
BENCHMARK(BM_PullWindowPaused)->Arg(256)->Unit(benchmark::kMillisecond);

// PsMulticastWith: the PS host's cost per parameter packet: a worker's real
// gradient frames (made once, untimed, by a WorkerIoLoop into a holding
// queue) are put on the PS queue's receive side before each iteration
// (untimed), renumbered to the iteration's positions; the timed part is
// PsIoLoop::Step until every parameter packet left, multicast to the job's
// group, on a queue that drops what it is given and declares
// `tx_segmentation`. One PS serves every iteration (its slot state is built
// once, untimed, and it has the worker's kJoin before the first).
void PsMulticastWith(benchmark::State& state, transport::TxSegmentation tx_segmentation) {
  Bench worker(testbed::ReflectorQueue::Mode::kHold, 1 << 16, 1 << 16,
               transport::TxSegmentation::kSoftware, /*join_at_start=*/true);
  auto op = worker.Submit();
  worker.StepUntil([&] { return worker.queue.held().size() == kFragments + 1; });  // and the join
  std::vector<testbed::ReflectorQueue::Frame> gradients;
  std::vector<testbed::ReflectorQueue::Frame>
      controls;  // the worker's kJoin (it declares no operations)
  for (const testbed::ReflectorQueue::Frame& f : worker.queue.held()) {
    wire::FrameFields fields;
    if (wire::DecodeFrame(f, wire::kDefaultBasePort, &fields, nullptr) == wire::DecodeError::kOk) {
      (wire::IsControl(fields.header) ? controls : gradients).push_back(f);
    }
  }
  const wire::Ipv4Address ps_ip = *wire::Ipv4Address::Parse("10.0.0.2");
  const wire::Ipv4Address group_ip = *wire::Ipv4Address::Parse("239.1.0.1");
  ParameterServerOptions options;
  ParameterServerJobOptions job;
  job.job_id = 1;
  job.layout = RackLayout::Uniform(1, 1);
  job.delivery = ParameterDelivery::kMulticast;
  job.multicast_group = {group_ip, transport::DefaultMacFor(group_ip)};
  options.jobs.push_back(job);
  options.slots = 1 << 16;
  options.gradient_source_check = SourceCheck::kOff;
  testbed::ReflectorQueue queue(0, testbed::ReflectorQueue::Mode::kDiscard,
                                /*capacity=*/kFragments + 1024, tx_segmentation);
  PsIoLoop loop(*PsShard::Create(options, 0, {ps_ip, transport::DefaultMacFor(ps_ip)}), {&queue},
                wire::kDefaultBasePort, options.max_burst);
  TimePoint now = TimePoint::FromNanoseconds(1);
  bool verified = gradients.size() == kFragments && !controls.empty();
  // The worker's control frames first, untimed, as in a job: a PS that has
  // not seen a queue's join asks for one (a status frame) instead of
  // counting only parameter packets. Their answers are not counted.
  for (const testbed::ReflectorQueue::Frame& c : controls) verified &= queue.InjectRx(c);
  while (queue.rx_waiting() > 0) {
    loop.Step(now);
    now += TimeDelta::FromNanoseconds(100);
  }
  uint64_t sent = queue.discarded();
  uint32_t first_position = 0;
  for (auto _ : state) {
    state.PauseTiming();
    // Positions first_position.. (seq: queue 0, 20-bit position, big-endian
    // at kSeqOffset; no checksum covers it).
    for (size_t i = 0; i < gradients.size(); ++i) {
      testbed::ReflectorQueue::Frame g = gradients[i];
      const uint32_t seq = wire::MakeSeq(0, first_position + static_cast<uint32_t>(i));
      g[transport::kSeqOffset] = static_cast<uint8_t>(seq >> 16);
      g[transport::kSeqOffset + 1] = static_cast<uint8_t>(seq >> 8);
      g[transport::kSeqOffset + 2] = static_cast<uint8_t>(seq);
      verified &= queue.InjectRx(g);
    }
    sent += gradients.size();
    state.ResumeTiming();
    while (queue.discarded() < sent) {
      loop.Step(now);
      now += TimeDelta::FromNanoseconds(100);
    }
    state.PauseTiming();
    wire::FrameFields fields;
    wire::Payload payload;
    wire::Payload gradient;
    verified &=
        wire::DecodeFrame(queue.last_discarded(), wire::kDefaultBasePort, &fields, &payload) ==
            wire::DecodeError::kOk &&
        wire::DecodeFrame(gradients.back(), wire::kDefaultBasePort, nullptr, &gradient) ==
            wire::DecodeError::kOk &&
        fields.header.ack && fields.dst_ip == group_ip && payload == gradient &&
        fields.header.position() == ((first_position + kFragments - 1) & wire::kPositionMask) &&
        queue.discarded() == sent;
    first_position = (first_position + kFragments) & wire::kPositionMask;
    state.ResumeTiming();
  }
  Report(state, verified);
}

void BM_PsMulticast(benchmark::State& state) {
  PsMulticastWith(state, transport::TxSegmentation::kSoftware);
}
BENCHMARK(BM_PsMulticast)->Unit(benchmark::kMillisecond);

// PsMulticastOffload: the same to a queue that offloads segmentation: runs of
// parameter packets leave as segmentation jobs.
void BM_PsMulticastOffload(benchmark::State& state) {
  PsMulticastWith(state, transport::TxSegmentation::kKernelGso);
}
BENCHMARK(BM_PsMulticastOffload)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace atp::host

BENCHMARK_MAIN();
