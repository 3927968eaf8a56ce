// tests/unit/ps/ps_test_util.h: scripted gradient messages and a recording
// sink for PsEngine tests.
#ifndef ATP_TESTS_UNIT_PS_PS_TEST_UTIL_H_
#define ATP_TESTS_UNIT_PS_PS_TEST_UTIL_H_

#include <bit>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/protocol/job_shape.h"
#include "lib/protocol/message_sink.h"
#include "lib/ps/ps_engine.h"

namespace atp::ps::testing {

inline constexpr TimePoint kNow = TimePoint::FromNanoseconds(1000);

// RecordingSink: keeps every message the engine sends, and checks that each is
// a valid parameter packet or overflow request.
class RecordingSink : public protocol::MessageSink {
 public:
  void Send(const wire::AtpMessage& message) override {
    EXPECT_EQ(wire::ValidateHeader(message.header), wire::DecodeError::kOk);
    EXPECT_TRUE(message.header.ack);
    sent.push_back(message);
  }
  // TakeAll: what was sent since the last call.
  std::vector<wire::AtpMessage> TakeAll() {
    std::vector<wire::AtpMessage> out;
    out.swap(sent);
    return out;
  }
  std::vector<wire::AtpMessage> sent;
};

inline wire::Payload Fill(int32_t value) {
  wire::Payload payload;
  payload.fill(static_cast<uint32_t>(value));
  return payload;
}

// Ramp: value i = base + i * step.
inline wire::Payload Ramp(int32_t base, int32_t step) {
  wire::Payload payload;
  for (size_t i = 0; i < payload.size(); ++i) {
    payload[i] = static_cast<uint32_t>(base + static_cast<int32_t>(i) * step);
  }
  return payload;
}

inline wire::Payload FloatFill(float value) {
  wire::Payload payload;
  payload.fill(std::bit_cast<uint32_t>(value));
  return payload;
}

inline int32_t IntAt(const wire::Payload& payload, size_t i) {
  return static_cast<int32_t>(payload[i]);
}
inline float FloatAt(const wire::Payload& payload, size_t i) {
  return std::bit_cast<float>(payload[i]);
}

// Level1: workers `workers` of `rack` (edge 0), as a worker or a level-1 flush sends it.
inline wire::AtpMessage Level1(const protocol::JobShape& shape, uint32_t seq, int rack,
                               uint32_t workers, const wire::Payload& payload,
                               uint16_t aggregator = 77) {
  wire::AtpMessage message;
  message.header.job = shape.job;
  message.header.seq = seq;
  message.header.bitmap0 = workers;
  message.header.bitmap1 = 1u << rack;
  message.header.fan_in0 = static_cast<uint8_t>(shape.workers_in_rack(rack));
  message.header.fan_in1 = static_cast<uint8_t>(shape.racks());
  message.header.aggregator = aggregator;
  message.payload = payload;
  return message;
}

// Worker: one worker's integer gradient.
inline wire::AtpMessage Worker(const protocol::JobShape& shape, uint32_t seq, int rack, int worker,
                               const wire::Payload& payload, uint16_t aggregator = 77) {
  return Level1(shape, seq, rack, 1u << worker, payload, aggregator);
}

// FpWorker: one worker's float32 gradient (the overflow path).
inline wire::AtpMessage FpWorker(const protocol::JobShape& shape, uint32_t seq, int rack,
                                 int worker, const wire::Payload& payload,
                                 uint16_t aggregator = 77) {
  wire::AtpMessage message = Worker(shape, seq, rack, worker, payload, aggregator);
  message.header.fp = true;
  return message;
}

// Level2: the complete racks `racks` (edge 1), as a level-1 completion or a
// level-2 switch sends it.
inline wire::AtpMessage Level2(const protocol::JobShape& shape, uint32_t seq, uint32_t racks,
                               const wire::Payload& payload, uint16_t aggregator = 77) {
  wire::AtpMessage message;
  int first_rack = std::countr_zero(racks);
  message.header.job = shape.job;
  message.header.seq = seq;
  message.header.edge = true;
  message.header.bitmap0 = shape.RackBitmap(first_rack);
  message.header.bitmap1 = racks;
  message.header.fan_in0 = static_cast<uint8_t>(shape.workers_in_rack(first_rack));
  message.header.fan_in1 = static_cast<uint8_t>(shape.racks());
  message.header.aggregator = aggregator;
  message.payload = payload;
  return message;
}

inline PsConfig ConfigFor(std::initializer_list<protocol::JobShape> jobs, uint32_t slots = 8) {
  PsConfig config;
  config.jobs = jobs;
  config.slots = slots;
  return config;
}

inline PsEngine MakeEngine(const PsConfig& config) {
  absl::StatusOr<PsEngine> engine = PsEngine::Create(config);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

}  // namespace atp::ps::testing

#endif  // ATP_TESTS_UNIT_PS_PS_TEST_UTIL_H_
