// libFuzzer target for the worker's frame handling: a WorkerQueueEngine
// (lib/worker) configured from the input's first bytes (a job of 1..3 racks
// of 1..3 workers, 1..32 slots, either congestion control, timer jitter)
// with operations in flight (0..1240 values each, NaN and infinities
// included) takes a sequence of actions drawn from the input: parameter
// packets answering fragments it sent (completions, overflow requests,
// collisions, stale and duplicate copies) or arbitrary ones, clock steps
// (retransmission timeouts), new operations, sends and completions. After
// each action it checks what the engine promises: every message it sends is
// a valid gradient of its job, queue and place; the window stays in
// 1..slots; fragments in flight fit the slots; positions stay ordered;
// completions name each operation once; and, at the end, every operation
// whose fragments were all answered has completed.
//
//   build-fuzz/tests/fuzz/worker_engine_fuzzer -max_total_time=60 WORK_DIR \
//       tests/fuzz/seeds/worker_engine_fuzzer
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <set>
#include <vector>

#include "lib/worker/worker_queue_engine.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_messages.h"

namespace atp::worker {
namespace {

constexpr char kTarget[] = "worker_engine_fuzzer";
constexpr int kMaxSteps = 2000;
constexpr size_t kMaxOperations = 8;
constexpr size_t kMaxValues = 20 * wire::kValuesPerFragment;

void Check(bool ok, const char* what) { fuzz::FuzzCheck(ok, kTarget, what); }

struct Buffers {
  std::vector<float> input;
  std::vector<float> output;
};

class Harness {
 public:
  explicit Harness(FuzzedDataProvider& in) : in_(in) {}

  void Run() {
    WorkerQueueConfig config;
    config.shape = fuzz::FuzzShape(in_, in_.ConsumeIntegralInRange<uint8_t>(1, 255));
    config.rack = in_.ConsumeIntegralInRange<int>(0, config.shape.racks() - 1);
    config.worker_in_rack =
        in_.ConsumeIntegralInRange<int>(0, config.shape.workers_in_rack(config.rack) - 1);
    config.queue = in_.ConsumeIntegralInRange<uint32_t>(0, wire::kMaxQueues - 1);
    config.slots = 1u << in_.ConsumeIntegralInRange<int>(0, 5);
    config.initial_window = in_.ConsumeIntegralInRange<uint32_t>(1, config.slots);
    config.congestion_control = in_.ConsumeBool() ? WorkerQueueConfig::CongestionControl::kAimd
                                                  : WorkerQueueConfig::CongestionControl::kFixedWindow;
    config.index_policy =
        in_.ConsumeBool() ? protocol::IndexPolicy::kHashed : protocol::IndexPolicy::kSequential;
    config.rto_jitter_percent = in_.ConsumeIntegralInRange<uint32_t>(0, 50);
    config.timer_seed = in_.ConsumeIntegral<uint64_t>();
    absl::StatusOr<std::unique_ptr<WorkerQueueEngine>> engine = WorkerQueueEngine::Create(config);
    Check(engine.ok(), "a valid configuration refused");
    engine_ = std::move(*engine);
    config_ = engine_->config();

    for (int step = 0; step < kMaxSteps && in_.remaining_bytes() > 0; ++step) {
      switch (in_.ConsumeIntegralInRange<int>(0, 7)) {
        case 0: Enqueue(); break;
        case 1: Advance(); [[fallthrough]];
        case 2: Send(); break;
        case 3: Collect(); break;
        case 4: ArbitraryPacket(); break;
        default: Answer(); break;
      }
      CheckState();
    }
    Collect();
  }

 private:
  void Enqueue() {
    if (buffers_.size() >= kMaxOperations) return;
    const size_t n = in_.ConsumeIntegralInRange<size_t>(0, kMaxValues);
    Buffers& b = buffers_.emplace_back();
    b.input.resize(n);
    const uint8_t kind = in_.ConsumeIntegral<uint8_t>();
    for (size_t i = 0; i < n; ++i) {
      float v = static_cast<float>((static_cast<int>(i) * 37 + kind) % 401 - 200) / 16.0f;
      if (kind % 32 == 1 && i % 61 == 3) v = std::numeric_limits<float>::quiet_NaN();
      if (kind % 32 == 2 && i % 59 == 5) v = std::numeric_limits<float>::infinity();
      if (kind % 32 == 3) v *= 1e30f;  // beyond int32 once scaled: the float path
      b.input[i] = v;
    }
    b.output.assign(n, 0.0f);
    absl::StatusOr<OperationId> id = engine_->Enqueue(b.input, b.output);
    Check(id.ok(), "Enqueue refused same-sized spans");
    Check(*id == next_id_, "operation ids not 1, 2, 3, ... in Enqueue order");
    ++next_id_;
  }

  void Advance() {
    now_ns_ += in_.ConsumeIntegralInRange<int64_t>(0, 250'000'000);  // up to 2.5 max RTOs
  }

  void Send() {
    std::array<wire::AtpMessage, 8> burst;
    const size_t n = engine_->CollectSends(TimePoint::FromNanoseconds(now_ns_), burst);
    Check(n <= burst.size(), "CollectSends wrote past its span");
    for (size_t i = 0; i < n; ++i) {
      const wire::AtpHeader& h = burst[i].header;
      Check(wire::ValidateHeader(h) == wire::DecodeError::kOk, "the worker sent an invalid header");
      Check(!h.ack, "the worker sent a parameter packet");
      Check(h.job == config_.shape.job, "the worker sent for another job");
      Check(h.queue() == config_.queue, "the worker sent on another queue");
      Check(!h.edge && h.bitmap1 == (1u << config_.rack) &&
                h.bitmap0 == (1u << config_.worker_in_rack) &&
                h.fan_in0 == config_.shape.workers_in_rack(config_.rack) &&
                h.fan_in1 == config_.shape.racks(),
            "the worker sent a gradient that does not name exactly itself");
      sent_.push_back(burst[i]);
      if (sent_.size() > 256) sent_.pop_front();
    }
  }

  void Collect() {
    std::array<OperationId, 4> done;
    for (;;) {
      const size_t n = engine_->CollectCompletions(done);
      for (size_t i = 0; i < n; ++i) {
        Check(done[i] >= 1 && done[i] < next_id_, "a completion of an operation never enqueued");
        Check(completed_.insert(done[i]).second, "an operation completed twice");
      }
      if (n < done.size()) return;
    }
  }

  // Answer: the PS's reply to a fragment sent earlier (maybe long ago).
  void Answer() {
    if (sent_.empty()) return;
    const size_t pick = in_.ConsumeIntegralInRange<size_t>(0, sent_.size() - 1);
    wire::AtpMessage reply;
    reply.header = sent_[pick].header;
    wire::AtpHeader& h = reply.header;
    const uint8_t flags = in_.ConsumeIntegral<uint8_t>();
    h.ack = true;
    h.edge = true;
    h.resend = (flags & 0x03) == 0x03;  // overflow request, 1 in 4
    h.fp = !h.resend && (flags & 0x04) != 0;
    h.ecn = (flags & 0x08) != 0;
    h.collision = (flags & 0x10) != 0;
    h.fan_in1 = static_cast<uint8_t>(config_.shape.racks());
    h.bitmap1 = h.collision ? in_.ConsumeIntegral<uint16_t>() : config_.shape.AllRacksBitmap();
    if (h.resend) {
      h.bitmap0 = 0;
      h.bitmap1 = h.collision ? h.bitmap1 : 0;
    }
    fuzz::FillPayload(in_, h.fp, reply.payload);
    now_ns_ += in_.ConsumeIntegralInRange<int64_t>(0, 100'000);
    engine_->OnParameterPacket(reply, TimePoint::FromNanoseconds(now_ns_));
  }

  void ArbitraryPacket() {
    wire::AtpMessage m;
    m.header = fuzz::FuzzGradientHeader(in_, config_.shape, wire::kMaxQueues, 1u << 20);
    m.header.ack = in_.ConsumeBool() || m.header.ack;
    fuzz::FillPayload(in_, m.header.fp, m.payload);
    engine_->OnParameterPacket(m, TimePoint::FromNanoseconds(now_ns_));
  }

  void CheckState() {
    const WorkerQueueStats s = engine_->stats();
    Check(s.window >= 1 && s.window <= config_.slots, "the window left 1..slots");
    Check(s.in_flight <= config_.slots, "more fragments in flight than slots");
    Check(s.window_in_flight <= s.in_flight, "more counted against the window than in flight");
    Check(s.lowest_unacked <= s.next_position, "the expected position passed the next one");
    Check(s.next_position - s.lowest_unacked <= config_.slots,
          "positions in flight span more than the slots");
    Check(s.operations_completed <= next_id_ - 1, "more completions than operations");
    Check(s.operations_completed >= completed_.size(), "collected more than completed");
  }

  FuzzedDataProvider& in_;
  std::unique_ptr<WorkerQueueEngine> engine_;
  WorkerQueueConfig config_;
  std::deque<Buffers> buffers_;  // stable: the engine holds spans into them
  std::deque<wire::AtpMessage> sent_;
  std::set<OperationId> completed_;
  OperationId next_id_ = 1;
  int64_t now_ns_ = 0;
};

}  // namespace
}  // namespace atp::worker

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  atp::worker::Harness(in).Run();
  return 0;
}
