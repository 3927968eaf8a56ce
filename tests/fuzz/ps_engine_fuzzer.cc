// libFuzzer target for the parameter server's frame handling: a sequence of
// messages (and clock steps) drawn from the input goes into a PsEngine
// (lib/ps) configured from the input's first bytes (1..3 racks of 1..3
// workers, 1..16 slots so that positions wrap quickly, shards, a short
// orphan timeout). After every message it checks what the engine promises:
// every message counted in exactly one outcome (PsCounters::Outcomes), every
// message sent a valid parameter packet or overflow request of the message's
// job, one send per completion, overflow request and resent packet, and the
// live and float-path state bounded by the slots.
//
//   build-fuzz/tests/fuzz/ps_engine_fuzzer -max_total_time=60 WORK_DIR \
//       tests/fuzz/seeds/ps_engine_fuzzer
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>

#include "lib/protocol/message_sink.h"
#include "lib/ps/ps_engine.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_messages.h"

namespace atp::ps {
namespace {

constexpr char kTarget[] = "ps_engine_fuzzer";
constexpr int kMaxSteps = 2000;

void Check(bool ok, const char* what) { fuzz::FuzzCheck(ok, kTarget, what); }

// CheckingSink: checks each message the engine sends for the message being
// handled, and counts them.
class CheckingSink final : public protocol::MessageSink {
 public:
  void Send(const wire::AtpMessage& message) override {
    ++sent_;
    const wire::AtpHeader& h = message.header;
    Check(wire::ValidateHeader(h) == wire::DecodeError::kOk, "the PS sent an invalid header");
    Check(h.ack, "the PS sent something that is not a parameter packet");
    Check(h.job == job_, "the PS answered for another job");
    Check(h.seq == seq_, "the PS answered for another seq");
  }
  void Expect(const wire::AtpHeader& h) {
    job_ = h.job;
    seq_ = h.seq;
  }
  uint64_t sent() const { return sent_; }

 private:
  uint8_t job_ = 0;
  uint32_t seq_ = 0;
  uint64_t sent_ = 0;
};

void CheckCounters(const PsEngine& engine, uint64_t sent) {
  const PsCounters& c = engine.counters();
  Check(c.gradients == c.Outcomes(), "a message not counted in exactly one outcome");
  Check(c.fp_completed + c.switch_completed <= c.completed, "completion counters disagree");
  Check(c.param_sent == c.completed, "a completion without its parameter packet");
  Check(sent == c.param_sent + c.overflow_requests + c.param_resent,
        "sends disagree with the counters");
  Check(engine.live_slots() <= engine.total_slots(), "more live slots than slots");
  Check(engine.fp_buffers_in_use() <= engine.live_slots(), "a float buffer outside a live slot");
}

void Run(FuzzedDataProvider& in) {
  PsConfig config;
  config.jobs.push_back(fuzz::FuzzShape(in, 7));
  if (in.ConsumeBool()) config.jobs.push_back(fuzz::FuzzShape(in, 9));
  config.slots = 1u << in.ConsumeIntegralInRange<int>(0, 4);
  config.shard_count = in.ConsumeIntegralInRange<uint32_t>(1, 2);
  config.shard_index = in.ConsumeIntegralInRange<uint32_t>(0, config.shard_count - 1);
  config.fp_pool_buffers = in.ConsumeIntegralInRange<uint32_t>(0, 2);
  config.orphan_scan_per_message = in.ConsumeIntegralInRange<uint32_t>(0, 2);
  const int64_t orphan_us = in.ConsumeIntegralInRange<int64_t>(1, 1000);
  config.orphan_timeout = TimeDelta::FromMicroseconds(orphan_us);
  const std::vector<protocol::JobShape> shapes = config.jobs;
  const uint32_t positions = 4 * config.slots;
  absl::StatusOr<PsEngine> engine = PsEngine::Create(std::move(config));
  Check(engine.ok(), "a valid configuration refused");

  CheckingSink sink;
  int64_t now_ns = 0;
  for (int step = 0; step < kMaxSteps && in.remaining_bytes() > 0; ++step) {
    const uint8_t action = in.ConsumeIntegral<uint8_t>();
    if (action % 8 == 0) {  // time passes with no traffic: the owner's idle scan
      now_ns += in.ConsumeIntegralInRange<int64_t>(0, 3 * orphan_us) * 1000;
      engine->ScanOrphans(TimePoint::FromNanoseconds(now_ns), in.ConsumeIntegralInRange<size_t>(0, 64));
      CheckCounters(*engine, sink.sent());
      continue;
    }
    const protocol::JobShape& shape = shapes[action % shapes.size()];
    wire::AtpMessage message;
    message.header = fuzz::FuzzGradientHeader(in, shape, 4, positions);
    fuzz::FillPayload(in, message.header.fp, message.payload);
    now_ns += in.ConsumeIntegralInRange<int64_t>(0, 20) * 1000;
    sink.Expect(message.header);
    engine->OnGradient(message, TimePoint::FromNanoseconds(now_ns), sink);
    CheckCounters(*engine, sink.sent());
  }
}

}  // namespace
}  // namespace atp::ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  atp::ps::Run(in);
  return 0;
}
