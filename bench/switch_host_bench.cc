// bench/switch_host_bench.cc: frames per second through the switch host
// (switchd::SwitchHost: the ingress check, the pipeline, routing, staging),
// with and without ingress admission, side by side in one run (issue 12
// part 1: what the per-port, per-job check costs).
//
//   build/bench/switch_host_bench --benchmark_min_time=1 --benchmark_repetitions=5
//
// BM_SwitchHost/admission:A/aggregators:N: one ingress port (a rack's 4
// workers) and one port toward the PS. Each Step receives a burst of 32
// frames (4 workers' fragments for N aggregators, worker by worker; the 4th
// contribution completes and goes to the PS port, whose queue takes and frees
// it). A = 0: no job restricted (the check is skipped); A = 1: job 1
// restricted to its ports (every frame checked, every one admitted); A = 2:
// as 1, with 1 frame in 8 a forged parameter packet from the worker port
// (refused and freed: what a flood costs). The receive side writes each
// frame from a template (the NIC's DMA, the same in every arm). The run
// checks every result: the completions' sums and the refusal counts.
// BM_IngressCheck: the check alone, per frame.
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "atp/transport.h"
#include "atp/transport/frame_pool.h"
#include "atp/wire.h"
#include "benchmark/benchmark.h"
#include "switch_emulator/host/switch_host.h"

namespace atp::switchd {
namespace {

constexpr int kWorkers = 4;
constexpr uint16_t kBase = wire::kDefaultBasePort;
constexpr size_t kBurst = 32;

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

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }

std::array<uint8_t, wire::kFrameBytes> Template(bool ack) {
  wire::FrameFields f;
  f.src_ip = Ip(ack ? "10.1.200.1" : "10.1.0.1");
  f.dst_ip = Ip(ack ? "239.1.0.1" : "10.1.200.1");
  f.header.job = 1;
  f.header.ack = ack;
  f.header.bitmap0 = ack ? 0 : 1;
  f.header.bitmap1 = ack ? 0 : 1;
  f.header.fan_in0 = kWorkers;
  f.header.fan_in1 = 1;
  wire::Payload payload;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint32_t>(i + 1);
  std::array<uint8_t, wire::kFrameBytes> frame{};
  wire::EncodeFrame(f, payload, kBase, frame);
  return frame;
}

// ScriptQueue: RxBurst writes the next frames of the script into its pool's
// buffers; TxBurst frees what it is given and checks completions.
class ScriptQueue final : public transport::Queue {
 public:
  ScriptQueue(size_t aggregators, bool forged) : aggregators_(aggregators), forged_(forged) {
    rx_pool_ = *transport::HeapFramePool::Create({.frames = 256});
    tx_pool_ = *transport::HeapFramePool::Create({.frames = 256});
    gradient_ = Template(false);
    ack_ = Template(true);
    order_.resize(aggregators);
    std::iota(order_.begin(), order_.end(), 0u);
    std::shuffle(order_.begin(), order_.end(), std::mt19937(42));
  }
  uint32_t index() const override { return 0; }
  const transport::QueueCapabilities& capabilities() const override { return caps_; }
  size_t RxBurst(std::span<transport::FrameRef> frames) override {
    if (!producing) return 0;
    const size_t n = rx_pool_->AllocBurst(frames.first(std::min(frames.size(), kBurst)));
    for (size_t b = 0; b < n; ++b) {
      uint8_t* f = frames[b].data;
      frames[b].length = wire::kFrameBytes;
      if (forged_ && (sent_++ & 7) == 7) {
        std::memcpy(f, ack_.data(), wire::kFrameBytes);
        ++forged_sent;
        continue;
      }
      std::memcpy(f, gradient_.data(), wire::kFrameBytes);
      const uint32_t index = order_[k_];
      StoreBig32(f + wire::kAtpOffset, (1u << wire::kSeqBits) | index);
      StoreBig32(f + wire::kAtpOffset + 4, 1u << w_);
      StoreBig16(f + wire::kAtpOffset + 14, static_cast<uint16_t>(index));
      if (++k_ == aggregators_) {
        k_ = 0;
        if (++w_ == kWorkers) w_ = 0;
      }
    }
    return n;
  }
  size_t TxBurst(std::span<const transport::FrameRef> frames) override {
    for (const transport::FrameRef& f : frames) {
      ++completed;
      const uint8_t* payload = f.data + wire::kPayloadOffset;
      wrong += static_cast<uint64_t>(LoadBig32(payload) != kWorkers) +
               static_cast<uint64_t>(LoadBig32(payload + 61 * 4) != kWorkers * 62);
    }
    transport::ReleaseFrames(frames);
    return frames.size();
  }
  size_t TxSegmented(const transport::SegmentationJob&) override { return 0; }
  size_t Flush() override { return 0; }
  transport::FramePool& rx_pool() override { return *rx_pool_; }
  transport::FramePool& tx_pool() override { return *tx_pool_; }
  transport::QueueStats stats() const override { return {}; }

  bool producing = false;
  uint64_t completed = 0;
  uint64_t wrong = 0;
  uint64_t forged_sent = 0;

 private:
  transport::QueueCapabilities caps_;
  std::unique_ptr<transport::HeapFramePool> rx_pool_;
  std::unique_ptr<transport::HeapFramePool> tx_pool_;
  std::array<uint8_t, wire::kFrameBytes> gradient_{};
  std::array<uint8_t, wire::kFrameBytes> ack_{};
  std::vector<uint32_t> order_;
  const size_t aggregators_;
  const bool forged_;
  size_t k_ = 0;
  int w_ = 0;
  uint64_t sent_ = 0;
};

class ScriptDevice final : public transport::Device {
 public:
  ScriptDevice(size_t aggregators, bool forged) : queue_(aggregators, forged) {}
  std::string_view backend() const override { return "script"; }
  const transport::DeviceAddress& address() const override { return address_; }
  uint16_t base_port() const override { return kBase; }
  uint32_t num_queues() const override { return 1; }
  transport::Queue& queue(uint32_t) override { return queue_; }
  ScriptQueue queue_;

 private:
  transport::DeviceAddress address_{Ip("10.255.0.1"), transport::DefaultMacFor(Ip("10.255.0.1"))};
};

void BM_SwitchHost(benchmark::State& state) {
  const int64_t admission = state.range(0);
  const size_t aggregators = static_cast<size_t>(state.range(1));
  ScriptDevice workers(aggregators, admission == 2), ps(aggregators, false);
  SwitchHostOptions options;
  options.pipeline.aggregator_count = aggregators;
  options.pipeline.jobs.push_back({.job = 1,
                                   .levels = switch_emulator::JobLevels::kLevel1,
                                   .multicast_group = Ip("239.1.0.1").value});
  if (!options.routes.Add(Ip("10.1.200.1"), 32, 1).ok() ||
      !options.multicast.Add(Ip("239.1.0.1"), {0}).ok()) {
    state.SkipWithError("tables");
    return;
  }
  if (admission != 0) {
    const uint32_t ps_side[] = {1}, worker_side[] = {0};
    if (!options.admission.Restrict(1, ps_side, worker_side).ok()) {
      state.SkipWithError("admission");
      return;
    }
  }
  auto host = SwitchHost::Create(std::move(options), {{"w", &workers}, {"ps", &ps}});
  if (!host.ok()) {
    state.SkipWithError(std::string(host.status().message()).c_str());
    return;
  }
  workers.queue_.producing = true;
  TimePoint now = TimePoint::FromNanoseconds(1);
  while (state.KeepRunningBatch(kBurst)) {
    (*host)->PollPort(0, now);
    now += TimeDelta::FromNanoseconds(100);
  }
  const SwitchdStats s = (*host)->Collect();
  const uint64_t refused = s.ports[0].counters.rx_refused();
  state.SetItemsProcessed(state.iterations());
  state.counters["completed"] = static_cast<double>(ps.queue_.completed);
  state.counters["refused"] = static_cast<double>(refused);
  if (ps.queue_.wrong != 0 || refused != workers.queue_.forged_sent ||
      s.pipeline.malformed != 0 || s.pipeline.collisions != 0) {
    state.SkipWithError("wrong result or refusal count");
  }
  state.SetLabel(admission == 0 ? "no job restricted"
                 : admission == 1 ? "job restricted, all admitted"
                                  : "job restricted, 1 in 8 forged");
}
BENCHMARK(BM_SwitchHost)
    ->ArgNames({"admission", "aggregators"})
    ->ArgsProduct({{0, 1, 2}, {64, 4096}});

// BM_IngressCheck: IngressAdmission::Check alone over a burst of 32 frames
// in L1 (what the host adds per received frame when a job is restricted).
void BM_IngressCheck(benchmark::State& state) {
  IngressAdmission admission;
  const uint32_t ps_side[] = {1}, worker_side[] = {0};
  if (!admission.Restrict(1, ps_side, worker_side).ok()) {
    state.SkipWithError("admission");
    return;
  }
  admission.AddPorts(2);
  std::array<std::array<uint8_t, wire::kFrameBytes>, kBurst> frames;
  for (size_t b = 0; b < kBurst; ++b) frames[b] = Template(b % 8 == 7);
  uint64_t refused = 0;
  while (state.KeepRunningBatch(kBurst)) {
    for (size_t b = 0; b < kBurst; ++b) {
      benchmark::DoNotOptimize(frames[b]);
      refused += admission.Check(0, frames[b], kBase) != IngressRefusal::kAdmitted;
    }
  }
  benchmark::DoNotOptimize(refused);
  if (refused != static_cast<uint64_t>(state.iterations()) / 8) state.SkipWithError("count");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_IngressCheck);

}  // namespace
}  // namespace atp::switchd

BENCHMARK_MAIN();
