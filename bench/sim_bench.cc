// bench/sim_bench.cc: how fast the simulator runs (issue 3 asks for at least
// 2 million simulated frames per second of wall time on one core).
//
// "Frames" are frame deliveries: one frame crossing one link. The end-to-end
// benchmarks run the real engines and check every result (a run that is not
// exact fails the benchmark), so their rate includes generating the inputs
// and verifying the outputs.
//
//   build/bench/sim_bench --benchmark_filter=Experiment
#include <memory>

#include "benchmark/benchmark.h"
#include "sim/experiment.h"
#include "sim/link.h"
#include "sim/simulator.h"

namespace atp::sim {
namespace {

// A ping-pong of actors: the cost of the event queue alone.
class Ticker : public Actor {
 public:
  Ticker(Simulator* sim, TimeDelta period) : sim_(sim), period_(period) {}
  void Act(TimePoint now) override { sim_->Schedule(this, now + period_); }

 private:
  Simulator* sim_;
  TimeDelta period_;
};

void BM_EventQueue(benchmark::State& state) {
  const int actors = static_cast<int>(state.range(0));
  Simulator sim;
  std::vector<std::unique_ptr<Ticker>> tickers;
  for (int i = 0; i < actors; ++i) {
    tickers.push_back(
        std::make_unique<Ticker>(&sim, TimeDelta::FromNanoseconds(100 + (i * 7) % 13)));
    sim.Schedule(tickers.back().get(), TimePoint::FromNanoseconds(i));
  }
  TimePoint until = TimePoint::Zero();
  uint64_t events = 0;
  for (auto _ : state) {
    until += TimeDelta::FromMicroseconds(10);
    events += sim.RunUntil(until);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  sim.Clear();
}
BENCHMARK(BM_EventQueue)->Arg(16)->Arg(1024);

// Frames through one 100 Gb/s link into a sink that drops them.
class Sink : public PacketReceiver {
 public:
  void Receive(PacketPtr, int, TimePoint) override { ++received; }
  uint64_t received = 0;
};

void BM_LinkFrames(benchmark::State& state) {
  Simulator sim;
  PacketPool pool;
  Link link(&sim, &pool, LinkConfig{.queue_capacity_packets = 1u << 16}, "l");
  Sink sink;
  link.Connect(&sink, 0);
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) link.Send(pool.Allocate());
    sim.RunUntilIdle();
  }
  if (sink.received != static_cast<uint64_t>(state.iterations()) * 1000) {
    state.SkipWithError("frames lost");
  }
  state.SetItemsProcessed(static_cast<int64_t>(sink.received));
}
BENCHMARK(BM_LinkFrames);

// A whole experiment: racks, workers, real engines, verification.
void BM_Experiment(benchmark::State& state) {
  const int workers = static_cast<int>(state.range(0));
  const int racks = static_cast<int>(state.range(1));
  ExperimentConfig config;
  config.topology.worker_racks = racks;
  config.topology.jobs.push_back(
      JobPlacement{.job = 1, .workers_per_rack = SpreadEvenly(workers, racks)});
  config.workload.values = 1 << 20;
  config.workload.iterations = 2;
  config.impairments.loss = state.range(2) / 1e6;
  config.topology.partitions = static_cast<int>(state.range(3));
  uint64_t frames = 0;
  for (auto _ : state) {
    auto experiment = Experiment::Create(config);
    if (!experiment.ok()) {
      state.SkipWithError("cannot build the experiment");
      return;
    }
    const ExperimentResult result = (*experiment)->Run();
    if (!result.exact) {
      state.SkipWithError("result not exact");
      return;
    }
    frames += result.frame_deliveries;
  }
  state.counters["frames_per_second"] =
      benchmark::Counter(static_cast<double>(frames), benchmark::Counter::kIsRate);
  state.SetItemsProcessed(static_cast<int64_t>(frames));
}
// {workers, racks, loss in parts per million, partitions (threads)}; the
// experiment's setup (the first inputs) is timed too.
BENCHMARK(BM_Experiment)
    ->Args({4, 2, 0, 1})
    ->Args({8, 2, 1000, 1})
    ->Args({32, 4, 0, 1})
    ->Args({32, 4, 0, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace atp::sim

BENCHMARK_MAIN();
