// Wire codec throughput, in frames (or messages) per second: EncodeFrame,
// DecodeFrame with and without the payload, ValidateFrame (what a software
// switch runs per packet), IsAtpFrame, and the 264-byte message codec that a
// UDP socket transport uses.
//
//   ninja -C build wire_bench && build/bench/wire_bench
//
// Each benchmark cycles through 256 different valid frames (random headers,
// fixed seed, about 77 KiB: L2-resident), so neither branch prediction nor
// the compiler sees one constant frame. Every decode is checked inside the
// timed loop (a failure aborts), and encoders are checked against a decode
// after timing, so no work can be elided and a wrong fast path cannot pass.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "atp/wire.h"
#include "benchmark/benchmark.h"

namespace {

using atp::wire::AtpHeader;
using atp::wire::AtpMessage;
using atp::wire::DecodeError;
using atp::wire::FrameFields;
using atp::wire::Payload;

constexpr size_t kDistinctFrames = 256;  // a power of two: index with a mask
constexpr uint16_t kBasePort = atp::wire::kDefaultBasePort;

using Frame = std::array<uint8_t, atp::wire::kFrameBytes>;
using MessageBytes = std::array<uint8_t, atp::wire::kMessageBytes>;

[[noreturn]] void Fail(const char* what, DecodeError error) {
  std::fprintf(stderr, "wire_bench: %s: %s\n", what,
               std::string(atp::wire::DecodeErrorName(error)).c_str());
  std::abort();
}

// Inputs: kDistinctFrames valid level-1 and level-2 gradients of random jobs,
// queues, fan-ins and values, as fields and as encoded frames.
struct Inputs {
  std::vector<FrameFields> fields;
  std::vector<Payload> payloads;
  std::vector<Frame> frames;
  std::vector<MessageBytes> messages;

  Inputs() {
    std::mt19937_64 rng(0x3A7B);
    for (size_t i = 0; i < kDistinctFrames; ++i) {
      FrameFields f;
      f.dst_mac.bytes = {0x02, 0, 0, 0, 0, 0x10};
      f.src_mac.bytes = {0x02, 0, 0, 0, 1, static_cast<uint8_t>(i)};
      f.src_ip.value = 0xC0000200u | (i & 0xFF);
      f.dst_ip.value = 0xC0000264u;
      f.ip_tos = (i % 8 == 0) ? atp::wire::kTosCe : atp::wire::kTosEct0;
      AtpHeader& h = f.header;
      h.job = static_cast<uint8_t>(1 + rng() % 255);
      h.seq = static_cast<uint32_t>(rng()) & atp::wire::kSeqMask;
      h.fan_in0 = static_cast<uint8_t>(1 + rng() % 32);
      h.fan_in1 = static_cast<uint8_t>(1 + rng() % 32);
      h.edge = (i % 2) == 1;
      h.bitmap0 = 1u << (rng() % h.fan_in0);
      h.bitmap1 = 1u << (rng() % h.fan_in1);
      h.aggregator = static_cast<uint16_t>(rng());
      if (atp::wire::ValidateHeader(h) != DecodeError::kOk) Fail("input", atp::wire::ValidateHeader(h));
      Payload p;
      for (uint32_t& v : p) v = static_cast<uint32_t>(rng());
      Frame frame;
      atp::wire::EncodeFrame(f, p, kBasePort, frame);
      MessageBytes message;
      atp::wire::EncodeMessage(AtpMessage{h, p}, message);
      fields.push_back(f);
      payloads.push_back(p);
      frames.push_back(frame);
      messages.push_back(message);
    }
  }
};

const Inputs& GetInputs() {
  static const Inputs* const inputs = new Inputs();
  return *inputs;
}

void BM_EncodeFrame(benchmark::State& state) {
  const Inputs& in = GetInputs();
  std::vector<Frame> out(kDistinctFrames);
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ & (kDistinctFrames - 1);
    atp::wire::EncodeFrame(in.fields[k], in.payloads[k], kBasePort, out[k]);
    benchmark::DoNotOptimize(out[k].data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  for (size_t k = 0; k < std::min<size_t>(i, kDistinctFrames); ++k) {
    if (out[k] != in.frames[k]) Fail("EncodeFrame wrote other bytes", DecodeError::kOk);
  }
}
BENCHMARK(BM_EncodeFrame);

// BM_DecodeFrame: arg 1 decodes the payload too, arg 0 only the fields.
void BM_DecodeFrame(benchmark::State& state) {
  const Inputs& in = GetInputs();
  const bool with_payload = state.range(0) != 0;
  FrameFields fields;
  Payload payload;
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ & (kDistinctFrames - 1);
    const DecodeError error =
        atp::wire::DecodeFrame(in.frames[k], kBasePort, &fields, with_payload ? &payload : nullptr);
    if (error != DecodeError::kOk) Fail("DecodeFrame", error);
    if (fields.header.seq != in.fields[k].header.seq) Fail("DecodeFrame seq", error);
    benchmark::DoNotOptimize(fields);
    benchmark::DoNotOptimize(payload);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  if (with_payload && i > 0) {
    const size_t k = (i - 1) & (kDistinctFrames - 1);
    if (payload != in.payloads[k]) Fail("DecodeFrame payload", DecodeError::kOk);
  }
}
BENCHMARK(BM_DecodeFrame)->ArgName("with_payload")->Arg(1)->Arg(0);

void BM_ValidateFrame(benchmark::State& state) {
  const Inputs& in = GetInputs();
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ & (kDistinctFrames - 1);
    const DecodeError error = atp::wire::ValidateFrame(in.frames[k], kBasePort);
    if (error != DecodeError::kOk) Fail("ValidateFrame", error);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_ValidateFrame);

void BM_IsAtpFrame(benchmark::State& state) {
  const Inputs& in = GetInputs();
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ & (kDistinctFrames - 1);
    if (!atp::wire::IsAtpFrame(in.frames[k], kBasePort)) Fail("IsAtpFrame", DecodeError::kOk);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_IsAtpFrame);

void BM_EncodeMessage(benchmark::State& state) {
  const Inputs& in = GetInputs();
  std::vector<MessageBytes> out(kDistinctFrames);
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ & (kDistinctFrames - 1);
    atp::wire::EncodeMessage(AtpMessage{in.fields[k].header, in.payloads[k]}, out[k]);
    benchmark::DoNotOptimize(out[k].data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  for (size_t k = 0; k < std::min<size_t>(i, kDistinctFrames); ++k) {
    if (out[k] != in.messages[k]) Fail("EncodeMessage wrote other bytes", DecodeError::kOk);
  }
}
BENCHMARK(BM_EncodeMessage);

void BM_DecodeMessage(benchmark::State& state) {
  const Inputs& in = GetInputs();
  AtpMessage message;
  size_t i = 0;
  for (auto _ : state) {
    const size_t k = i++ & (kDistinctFrames - 1);
    const DecodeError error = atp::wire::DecodeMessage(in.messages[k], &message);
    if (error != DecodeError::kOk) Fail("DecodeMessage", error);
    if (message.header.aggregator != in.fields[k].header.aggregator) Fail("DecodeMessage", error);
    benchmark::DoNotOptimize(message);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_DecodeMessage);

}  // namespace

BENCHMARK_MAIN();
