// tests/unit/worker/worker_test_util.h: helpers for driving a WorkerQueueEngine
// by hand: the test plays switch and PS, with a fake clock.
#ifndef ATP_TESTS_UNIT_WORKER_WORKER_TEST_UTIL_H_
#define ATP_TESTS_UNIT_WORKER_WORKER_TEST_UTIL_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "atp/quantize.h"
#include "atp/time.h"
#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/protocol/job_shape.h"
#include "lib/worker/worker_queue_engine.h"

namespace atp::worker::testing {

inline constexpr uint8_t kJob = 7;
inline constexpr uint32_t kQueue = 3;
inline constexpr TimePoint kT0 = TimePoint::FromNanoseconds(1'000'000'000);

inline TimeDelta Us(int64_t us) { return TimeDelta::FromMicroseconds(us); }
inline TimeDelta Ms(int64_t ms) { return TimeDelta::FromMilliseconds(ms); }

// SmallConfig: job 7, one rack of one worker, queue 3; an RTO of 10 ms
// before the first sample, floor 1 ms; a detected loss halves the window
// (the spec's rule; the default only halves with recent ecn). No timer
// jitter, so tests can name exact deadlines (TimerJitterTest covers it).
inline WorkerQueueConfig SmallConfig(uint32_t slots = 16, uint32_t initial_window = 8) {
  WorkerQueueConfig config;
  config.shape = protocol::JobShape::Uniform(kJob, 1, 1);
  config.rack = 0;
  config.worker_in_rack = 0;
  config.queue = kQueue;
  config.slots = slots;
  config.initial_window = initial_window;
  config.rto_floor = Ms(1);
  config.initial_rto = Ms(10);
  config.max_rto = TimeDelta::FromSeconds(1);
  config.rto_backoff = 2.0;
  config.loss_response = CongestionController::LossResponse::kHalve;
  config.rto_jitter_percent = 0;
  return config;
}

inline std::unique_ptr<WorkerQueueEngine> MakeEngine(const WorkerQueueConfig& config) {
  auto engine = WorkerQueueEngine::Create(config);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(engine).value() : nullptr;
}

// Send: everything the engine wants to send at `now` (up to `max`).
inline std::vector<wire::AtpMessage> Send(WorkerQueueEngine& engine, TimePoint now,
                                          size_t max = 4096) {
  std::vector<wire::AtpMessage> out(max);
  out.resize(engine.CollectSends(now, out));
  return out;
}

inline uint64_t PositionOf(const wire::AtpMessage& m) { return m.header.position(); }

struct AckOptions {
  bool ecn = false;
  bool collision = false;
  uint16_t new_index = 0;
};

// EchoAck: the parameter packet a PS would send if `sent` were the only
// contribution: same job and seq, `ack` set, the payload as the sum.
inline wire::AtpMessage EchoAck(const wire::AtpMessage& sent, AckOptions options = {}) {
  wire::AtpMessage ack;
  ack.header.job = sent.header.job;
  ack.header.seq = sent.header.seq;
  ack.header.ack = true;
  ack.header.edge = true;
  ack.header.fp = sent.header.fp;
  ack.header.ecn = options.ecn;
  ack.header.collision = options.collision;
  ack.header.bitmap0 = sent.header.bitmap0;
  ack.header.bitmap1 = options.collision ? options.new_index : sent.header.bitmap1;
  ack.header.fan_in0 = sent.header.fan_in0;
  ack.header.fan_in1 = sent.header.fan_in1;
  ack.header.aggregator = sent.header.aggregator;
  ack.payload = sent.payload;
  return ack;
}

// AckFor: a parameter packet for `position` of queue kQueue of job kJob with
// `payload` as the sum.
inline wire::AtpMessage AckFor(uint64_t position, const wire::Payload& payload = {},
                               AckOptions options = {}) {
  wire::AtpMessage sent;
  sent.header.job = kJob;
  sent.header.seq = wire::MakeSeq(kQueue, static_cast<uint32_t>(position));
  sent.header.bitmap0 = 1;
  sent.header.bitmap1 = 1;
  sent.payload = payload;
  return EchoAck(sent, options);
}

// OverflowRequest: the PS asks every worker to resend `position` as float32.
inline wire::AtpMessage OverflowRequest(uint64_t position) {
  wire::AtpMessage m = AckFor(position);
  m.header.resend = true;
  m.header.fp = false;
  return m;
}

// Ramp: n values i * step + offset (exactly quantizable for small steps).
inline std::vector<float> Ramp(size_t n, float step = 0.01f, float offset = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + step * static_cast<float>(i % 1000);
  return v;
}

// RoundTrip: what a single worker gets back for its own input through the
// integer path: Dequantize(Quantize(x)).
inline std::vector<float> RoundTrip(std::span<const float> in, double scale = kDefaultScale) {
  std::vector<int32_t> q(in.size());
  Quantize(in, scale, q);
  std::vector<float> out(in.size());
  Dequantize(q, scale, out);
  return out;
}

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline std::vector<OperationId> Completions(WorkerQueueEngine& engine) {
  std::vector<OperationId> out(1024);
  out.resize(engine.CollectCompletions(out));
  return out;
}

}  // namespace atp::worker::testing

#endif  // ATP_TESTS_UNIT_WORKER_WORKER_TEST_UTIL_H_
