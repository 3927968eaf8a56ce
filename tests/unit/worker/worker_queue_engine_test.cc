// The rules of ATP-SPEC section 5, one test each, on a WorkerQueueEngine
// driven by hand: the test plays switch and PS (a parameter packet usually
// echoes the worker's own payload as the sum) and moves a fake clock.
#include "lib/worker/worker_queue_engine.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "atp/quantize.h"
#include "gtest/gtest.h"
#include "lib/protocol/aggregator_index.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using namespace atp::worker::testing;  // NOLINT(build/namespaces): test helpers

constexpr float kSentinel = -7.0f;

class WorkerQueueEngineTest : public ::testing::Test {
 protected:
  void Start(const WorkerQueueConfig& config) {
    engine_ = MakeEngine(config);
    ASSERT_NE(engine_, nullptr);
  }

  // Enqueue: n ramp values (or `values`); the output starts as kSentinel.
  OperationId Enqueue(size_t n) { return Enqueue(Ramp(n)); }
  OperationId Enqueue(std::vector<float> values) {
    inputs_.push_back(std::move(values));
    outputs_.emplace_back(inputs_.back().size(), kSentinel);
    auto id = engine_->Enqueue(inputs_.back(), outputs_.back());
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  std::vector<wire::AtpMessage> SendNow(size_t max = 4096) { return Send(*engine_, now_, max); }
  void Deliver(const wire::AtpMessage& m) { engine_->OnParameterPacket(m, now_); }
  // AckAll: echoes every message, in order.
  void AckAll(const std::vector<wire::AtpMessage>& sent, AckOptions options = {}) {
    for (const auto& m : sent) Deliver(EchoAck(m, options));
  }
  // AckPositions: echoes the messages of `sent` at these positions.
  void AckPositions(const std::vector<wire::AtpMessage>& sent,
                    std::initializer_list<uint64_t> positions, AckOptions options = {}) {
    for (uint64_t p : positions) {
      auto it = std::find_if(sent.begin(), sent.end(),
                             [p](const wire::AtpMessage& m) { return PositionOf(m) == p; });
      ASSERT_NE(it, sent.end()) << "position " << p << " was not sent";
      Deliver(EchoAck(*it, options));
    }
  }
  WorkerQueueStats stats() const { return engine_->stats(); }

  std::unique_ptr<WorkerQueueEngine> engine_;
  TimePoint now_ = kT0;
  std::deque<std::vector<float>> inputs_;   // deque: stable addresses
  std::deque<std::vector<float>> outputs_;
};

std::vector<uint64_t> Positions(const std::vector<wire::AtpMessage>& messages) {
  std::vector<uint64_t> out;
  for (const auto& m : messages) out.push_back(PositionOf(m));
  return out;
}

// ---- Send ----------------------------------------------------------------

TEST_F(WorkerQueueEngineTest, Rule_FragmentHeaderFields) {
  WorkerQueueConfig config = SmallConfig();
  config.shape = protocol::JobShape::Uniform(kJob, /*racks=*/3, /*workers=*/4);
  config.rack = 2;
  config.worker_in_rack = 1;
  Start(config);
  Enqueue(3 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 3u);
  for (uint32_t p = 0; p < 3; ++p) {
    const wire::AtpHeader& h = sent[p].header;
    EXPECT_EQ(h.job, kJob);
    EXPECT_EQ(h.seq, wire::MakeSeq(kQueue, p));
    EXPECT_EQ(h.queue(), kQueue);
    EXPECT_EQ(h.bitmap0, 1u << 1);  // worker 1 of its rack
    EXPECT_EQ(h.bitmap1, 1u << 2);  // rack 2
    EXPECT_EQ(h.fan_in0, 4);
    EXPECT_EQ(h.fan_in1, 3);
    EXPECT_FALSE(h.edge);
    EXPECT_FALSE(h.resend);
    EXPECT_FALSE(h.collision);
    EXPECT_FALSE(h.ecn);
    EXPECT_FALSE(h.ack);
    EXPECT_FALSE(h.fp);
    EXPECT_EQ(h.aggregator,
              protocol::InitialAggregatorIndex(protocol::IndexPolicy::kHashed, kJob, kQueue, p,
                                               config.slots));
    EXPECT_EQ(wire::ValidateHeader(h), wire::DecodeError::kOk);
  }
}

TEST_F(WorkerQueueEngineTest, Rule_SequentialIndexPolicy) {
  WorkerQueueConfig config = SmallConfig(16, 8);
  config.index_policy = protocol::IndexPolicy::kSequential;
  Start(config);
  Enqueue(2 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].header.aggregator, kQueue * 16 + 0);
  EXPECT_EQ(sent[1].header.aggregator, kQueue * 16 + 1);
}

TEST_F(WorkerQueueEngineTest, Rule_FragmentsZeroPadded) {
  Start(SmallConfig());
  Enqueue(100);  // 62 + 38
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 2u);
  std::vector<int32_t> q(100);
  Quantize(inputs_[0], kDefaultScale, q);
  for (size_t i = 0; i < 62; ++i) EXPECT_EQ(static_cast<int32_t>(sent[0].payload[i]), q[i]);
  for (size_t i = 0; i < 38; ++i) EXPECT_EQ(static_cast<int32_t>(sent[1].payload[i]), q[62 + i]);
  for (size_t i = 38; i < 62; ++i) EXPECT_EQ(sent[1].payload[i], 0u) << i;
}

TEST_F(WorkerQueueEngineTest, Rule_NanSentAsFp) {
  Start(SmallConfig());
  std::vector<float> values = Ramp(124, 0.01f);
  values[70] = std::numeric_limits<float>::quiet_NaN();
  Enqueue(values);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_FALSE(sent[0].header.fp);
  EXPECT_TRUE(sent[1].header.fp);
  EXPECT_FALSE(sent[1].header.resend);  // sent as fp directly, not a resend
  for (size_t i = 0; i < 62; ++i) EXPECT_EQ(sent[1].payload[i], FloatBits(values[62 + i]));
  EXPECT_EQ(stats().fp_fragments_sent, 1u);
}

TEST_F(WorkerQueueEngineTest, Rule_SaturatedSentAsFp) {
  Start(SmallConfig());
  std::vector<float> values = Ramp(62, 0.01f);
  values[3] = 25.0f;  // 2.5e9 after scaling: beyond int32
  Enqueue(values);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_TRUE(sent[0].header.fp);
  EXPECT_EQ(sent[0].payload[3], FloatBits(25.0f));
  EXPECT_EQ(stats().fp_fragments_sent, 1u);
}

// ---- Parameter packets ---------------------------------------------------

TEST_F(WorkerQueueEngineTest, Rule_ParameterPacketStoresResultAndFreesSlot) {
  Start(SmallConfig(/*slots=*/2, /*initial_window=*/2));
  OperationId op = Enqueue(176);  // fragments of 62, 62, 52
  auto sent = SendNow();
  ASSERT_EQ(Positions(sent), (std::vector<uint64_t>{0, 1}));  // both slots used

  wire::Payload sum{};
  for (size_t i = 0; i < 62; ++i) sum[i] = static_cast<uint32_t>((i + 1) * 1000000);  // 0.01 * (i+1)
  Deliver(AckFor(0, sum));
  for (size_t i = 0; i < 62; ++i) {
    EXPECT_EQ(outputs_[0][i], static_cast<float>(static_cast<double>((i + 1) * 1000000) / 1e8));
  }
  EXPECT_EQ(outputs_[0][62], kSentinel);
  EXPECT_EQ(stats().parameter_packets, 1u);
  EXPECT_EQ(stats().in_flight, 1u);
  EXPECT_EQ(stats().lowest_unacked, 1u);
  EXPECT_TRUE(Completions(*engine_).empty());

  // Slot 0 is free again: position 2 goes out.
  auto next = SendNow();
  ASSERT_EQ(Positions(next), (std::vector<uint64_t>{2}));
  AckAll({sent[1]});
  AckAll(next);  // the last fragment's ack carries 62 values; 52 are written
  std::vector<float> expected = RoundTrip(inputs_[0]);
  for (size_t i = 62; i < 176; ++i) EXPECT_EQ(outputs_[0][i], expected[i]) << i;
  EXPECT_EQ(Completions(*engine_), (std::vector<OperationId>{op}));
  EXPECT_EQ(stats().in_flight, 0u);
  EXPECT_EQ(stats().operations_completed, 1u);
  EXPECT_EQ(engine_->NextDeadline(), TimePoint::Infinite());
}

TEST_F(WorkerQueueEngineTest, Rule_FpResultWrittenAsFloats) {
  Start(SmallConfig());
  Enqueue(10);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 1u);
  wire::AtpMessage ack = AckFor(0);
  ack.header.fp = true;
  for (size_t i = 0; i < 62; ++i) ack.payload[i] = FloatBits(1.5f * static_cast<float>(i));
  Deliver(ack);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(outputs_[0][i], 1.5f * static_cast<float>(i));
  EXPECT_EQ(Completions(*engine_).size(), 1u);
}

TEST_F(WorkerQueueEngineTest, Rule_CollisionUpdatesSlotIndex) {
  Start(SmallConfig(/*slots=*/4, /*initial_window=*/4));
  Enqueue(8 * 62);
  auto sent = SendNow();
  ASSERT_EQ(Positions(sent), (std::vector<uint64_t>{0, 1, 2, 3}));
  const uint16_t slot0_index =
      protocol::InitialAggregatorIndex(protocol::IndexPolicy::kHashed, kJob, kQueue, 0, 4);
  const uint16_t slot1_index =
      protocol::InitialAggregatorIndex(protocol::IndexPolicy::kHashed, kJob, kQueue, 1, 4);
  EXPECT_EQ(sent[0].header.aggregator, slot0_index);
  ASSERT_NE(slot0_index, 0xBEEF);

  AckPositions(sent, {0}, AckOptions{.collision = true, .new_index = 0xBEEF});
  EXPECT_EQ(stats().collisions_seen, 1u);
  auto next = SendNow();
  ASSERT_EQ(Positions(next), (std::vector<uint64_t>{4}));
  EXPECT_EQ(next[0].header.aggregator, 0xBEEF);  // slot 0's new index

  AckPositions(sent, {1});  // no collision: slot 1 keeps its index
  next = SendNow();
  ASSERT_EQ(Positions(next), (std::vector<uint64_t>{5}));
  EXPECT_EQ(next[0].header.aggregator, slot1_index);
}

TEST_F(WorkerQueueEngineTest, Rule_UnknownSeqIgnored) {
  Start(SmallConfig());
  Enqueue(2 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 2u);

  Deliver(AckFor(5));  // never sent
  Deliver(AckFor((1u << 20) - 3));  // far in the past (20-bit wrap): not in flight
  EXPECT_EQ(stats().ignored_unknown_seq, 2u);

  wire::AtpMessage other_job = EchoAck(sent[0]);
  other_job.header.job = kJob + 1;
  wire::AtpMessage other_queue = EchoAck(sent[0]);
  other_queue.header.seq = wire::MakeSeq(kQueue + 1, 0);
  wire::AtpMessage not_ack = sent[0];  // a gradient, not a parameter packet
  // A PS control frame for an in-flight seq: never taken as its result.
  wire::AtpMessage control = EchoAck(sent[0]);
  control.header.fp = control.header.resend = control.header.collision = true;
  Deliver(other_job);
  Deliver(other_queue);
  Deliver(not_ack);
  Deliver(control);
  EXPECT_EQ(stats().ignored_foreign, 4u);
  EXPECT_EQ(stats().in_flight, 2u);
  EXPECT_EQ(outputs_[0][0], kSentinel);

  AckAll({sent[0]});
  AckAll({sent[0]});  // duplicate
  EXPECT_EQ(stats().ignored_unknown_seq, 3u);
  EXPECT_EQ(stats().parameter_packets, 1u);
  EXPECT_EQ(stats().in_flight, 1u);
  EXPECT_EQ(outputs_[0][62], kSentinel);
}

TEST_F(WorkerQueueEngineTest, Rule_OverflowRequestResendsAsFp) {
  Start(SmallConfig());
  Enqueue(Ramp(62, 0.01f));
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_FALSE(sent[0].header.fp);

  Deliver(OverflowRequest(0));
  EXPECT_EQ(stats().overflow_requests, 1u);
  EXPECT_EQ(stats().in_flight, 1u);  // not a completion
  auto resent = SendNow();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].header.seq, sent[0].header.seq);
  EXPECT_TRUE(resent[0].header.resend);
  EXPECT_TRUE(resent[0].header.fp);
  EXPECT_EQ(resent[0].header.aggregator, sent[0].header.aggregator);
  for (size_t i = 0; i < 62; ++i) EXPECT_EQ(resent[0].payload[i], FloatBits(inputs_[0][i]));
  EXPECT_EQ(stats().resends_overflow, 1u);

  // Later resends of that fragment stay float32.
  now_ = engine_->NextDeadline();
  auto timed_out = SendNow();
  ASSERT_EQ(timed_out.size(), 1u);
  EXPECT_TRUE(timed_out[0].header.fp);
  EXPECT_TRUE(timed_out[0].header.resend);

  // The float32 result completes the operation.
  EXPECT_EQ(stats().float_results, 0u);
  AckAll(timed_out);
  EXPECT_EQ(outputs_[0], inputs_[0]);
  EXPECT_EQ(Completions(*engine_).size(), 1u);
  EXPECT_EQ(stats().float_results, 1u);
}

TEST_F(WorkerQueueEngineTest, RepeatedOverflowRequestResendsAgain) {
  Start(SmallConfig());
  Enqueue(62);
  SendNow();
  Deliver(OverflowRequest(0));
  ASSERT_EQ(SendNow().size(), 1u);
  Deliver(OverflowRequest(0));  // the PS repeats it (our fp resend was lost)
  auto again = SendNow();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].header.fp);
  EXPECT_EQ(stats().resends_overflow, 2u);
  // Two requests, one fragment: one float32 result completes it.
  AckAll(again);
  EXPECT_EQ(stats().overflow_requests, 2u);
  EXPECT_EQ(stats().float_results, 1u);
  EXPECT_EQ(stats().parameter_packets, 1u);
}

// ---- Loss detection ------------------------------------------------------

TEST_F(WorkerQueueEngineTest, Rule_ThreeOutOfOrderAcksTriggerResend) {
  Start(SmallConfig(16, 8));
  Enqueue(5 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 5u);
  AckPositions(sent, {1, 2});
  EXPECT_TRUE(SendNow().empty());
  AckPositions(sent, {3});
  auto resent = SendNow();
  ASSERT_EQ(Positions(resent), (std::vector<uint64_t>{0}));
  EXPECT_TRUE(resent[0].header.resend);
  EXPECT_EQ(stats().loss_events, 1u);
  EXPECT_EQ(stats().resends_loss, 1u);
  // Slow start took the window 8 -> 11 on the three acks, then the loss halved it.
  EXPECT_EQ(stats().window, 5u);
}

TEST_F(WorkerQueueEngineTest, Rule_LossWithoutRecentEcnResendsButKeepsTheWindow) {
  WorkerQueueConfig config = SmallConfig(16, 8);
  config.loss_response = CongestionController::LossResponse::kHalveOnlyWithEcn;
  Start(config);
  Enqueue(5 * 62);
  auto sent = SendNow();
  AckPositions(sent, {1, 2, 3});
  auto resent = SendNow();
  ASSERT_EQ(Positions(resent), (std::vector<uint64_t>{0}));
  EXPECT_EQ(stats().loss_events, 1u);
  EXPECT_EQ(stats().window, 11u);  // slow start on the three acks, no halving
  EXPECT_EQ(engine_->cc_debug_state().losses_without_ecn, 1u);
}

TEST_F(WorkerQueueEngineTest, Rule_ResendCarriesSameData) {
  Start(SmallConfig(16, 8));
  std::vector<float> values = Ramp(4 * 62, 0.0123f, -1.0f);
  Enqueue(values);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 4u);
  AckPositions(sent, {1, 2, 3});
  auto resent = SendNow();
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].payload, sent[0].payload);
  EXPECT_EQ(resent[0].header.seq, sent[0].header.seq);
  EXPECT_EQ(resent[0].header.aggregator, sent[0].header.aggregator);
  EXPECT_EQ(resent[0].header.fp, sent[0].header.fp);
}

TEST_F(WorkerQueueEngineTest, Rule_LossHalvesWindowOncePerRtt) {
  Start(SmallConfig(16, 8));
  Enqueue(20 * 62);
  auto flight1 = SendNow();
  ASSERT_EQ(Positions(flight1), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7}));

  // 0 and 1 lost. Acks 2, 3, 4 declare 0 lost: the window (grown 8 -> 11 in
  // slow start) halves to 5. Everything sent so far is below 16 (the
  // controller's send_bound): that is the reduction epoch.
  AckPositions(flight1, {2, 3, 4});
  EXPECT_EQ(stats().window, 5u);
  EXPECT_EQ(engine_->cc_debug_state().reduction_epoch_end, 16u);
  auto resend0 = SendNow();
  ASSERT_EQ(Positions(resend0), (std::vector<uint64_t>{0}));  // 5 still in flight
  EXPECT_TRUE(resend0[0].header.resend);
  AckAll(resend0);

  // Now 1 is expected; acks 5, 6, 7 declare it lost too, but it was sent
  // before the reduction: the same congestion event, no second halving.
  AckPositions(flight1, {5, 6, 7});
  EXPECT_EQ(stats().loss_events, 2u);
  EXPECT_EQ(stats().window, 5u);
  EXPECT_EQ(engine_->cc_debug_state().reductions, 1u);
  auto flight2 = SendNow();  // the resend first, then new fragments up to 5 in flight
  ASSERT_EQ(Positions(flight2), (std::vector<uint64_t>{1, 8, 9, 10, 11}));
  EXPECT_TRUE(flight2[0].header.resend);
  AckAll(flight2);

  // 12..15 are inside the epoch (no growth); 16 is lost. Acks 17, 18, 19
  // declare it lost, and it was sent after the reduction: the window halves
  // again.
  auto flight3 = SendNow();
  ASSERT_EQ(Positions(flight3), (std::vector<uint64_t>{12, 13, 14, 15, 16}));
  AckPositions(flight3, {12, 13, 14, 15});
  EXPECT_EQ(stats().window, 5u);
  auto flight4 = SendNow();
  ASSERT_EQ(Positions(flight4), (std::vector<uint64_t>{17, 18, 19}));
  AckAll(flight4);
  EXPECT_EQ(stats().loss_events, 3u);
  EXPECT_EQ(stats().window, 2u);
  EXPECT_EQ(engine_->cc_debug_state().reductions, 2u);
  auto resend16 = SendNow();
  ASSERT_EQ(Positions(resend16), (std::vector<uint64_t>{16}));
  EXPECT_TRUE(resend16[0].header.resend);
}

TEST_F(WorkerQueueEngineTest, Rule_TimeoutResendsOldestUnackedWithinCollapsedWindow) {
  Start(SmallConfig(16, 8));
  Enqueue(5 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 5u);
  EXPECT_EQ(engine_->NextDeadline(), kT0 + Ms(10));  // initial RTO

  now_ = kT0 + Ms(1);
  AckPositions(sent, {1});
  // RTT sample 1 ms: RTO = 1 + 4 * 0.5 = 3 ms, restarted by the ack.
  EXPECT_EQ(stats().rto, Ms(3));
  EXPECT_EQ(engine_->NextDeadline(), now_ + Ms(3));

  now_ = kT0 + Ms(4) - TimeDelta::FromNanoseconds(1);
  EXPECT_TRUE(SendNow().empty());
  now_ = kT0 + Ms(4);
  // The window collapses to one fragment: only the oldest unacked is resent.
  auto resent = SendNow();
  ASSERT_EQ(Positions(resent), (std::vector<uint64_t>{0}));
  EXPECT_TRUE(resent[0].header.resend);
  EXPECT_EQ(resent[0].payload, sent[0].payload);
  EXPECT_EQ(stats().timeouts, 1u);
  EXPECT_EQ(stats().resends_timeout, 1u);
  EXPECT_EQ(stats().window, 1u);
  EXPECT_EQ(stats().in_flight, 4u);           // still unacknowledged
  EXPECT_EQ(stats().window_in_flight, 1u);    // only the resend counts
  EXPECT_FALSE(engine_->WantsToSend());
  EXPECT_EQ(engine_->NextDeadline(), now_ + Ms(6));  // backed off

  // Its ack slow starts the window to 2: the next two presumed-lost
  // fragments are resent (position 1 was acknowledged: skipped).
  AckPositions(resent, {0});
  EXPECT_EQ(stats().window, 2u);
  auto next = SendNow();
  EXPECT_EQ(Positions(next), (std::vector<uint64_t>{2, 3}));
  for (const auto& m : next) EXPECT_TRUE(m.header.resend);
  EXPECT_EQ(stats().resends_timeout, 3u);
}

TEST_F(WorkerQueueEngineTest, Rule_ABurstOfAcksRestartsTheTimerOnceWithTheRtoOfItsSample) {
  // The engine works a restart's deadline out only when it is read (or the
  // RTO changes without a restart): the timer must still fire at the last
  // acknowledgement's time plus the RTO after the burst's sample (one per
  // receive instant: the first timed packet's), and the timeout check in
  // CollectSends must see that deadline unasked.
  Start(SmallConfig(16, 8));
  Enqueue(5 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 5u);
  // A timeout first, so that the RTO is backed off when the burst comes.
  now_ = kT0 + Ms(10);
  auto resent = SendNow();
  ASSERT_EQ(Positions(resent), (std::vector<uint64_t>{0}));
  EXPECT_EQ(stats().rto, Ms(20));  // the initial 10 ms, doubled

  // Three parameter packets at one instant: the resend's (no sample: Karn),
  // then two originals, 11 ms after they left: one sample of the instant.
  now_ = kT0 + Ms(11);
  AckPositions(resent, {0});
  AckPositions(sent, {1, 2});
  EXPECT_EQ(stats().rtt_samples, 1u);
  // RFC 6298 after one sample of 11 ms (srtt 11, rttvar 5.5), the backoff
  // undone by the progress (backed off it would be twice that).
  const TimeDelta rto = stats().rto;
  EXPECT_EQ(rto, TimeDelta::FromMicroseconds(33'000));
  // Not asked for the deadline: the next send's timeout check finds it.
  now_ = kT0 + Ms(11) + rto - TimeDelta::FromNanoseconds(1);
  EXPECT_TRUE(SendNow().empty());
  EXPECT_EQ(stats().timeouts, 1u);
  EXPECT_EQ(engine_->NextDeadline(), kT0 + Ms(11) + rto);
  now_ = kT0 + Ms(11) + rto;
  EXPECT_EQ(Positions(SendNow()), (std::vector<uint64_t>{3}));
  EXPECT_EQ(stats().timeouts, 2u);
}

TEST_F(WorkerQueueEngineTest, Rule_LateAckOfAnOriginalRemovesItFromTheRecovery) {
  Start(SmallConfig(16, 8));
  Enqueue(4 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 4u);
  now_ = engine_->NextDeadline();
  ASSERT_EQ(Positions(SendNow()), (std::vector<uint64_t>{0}));
  // The originals of 1 and 2 were only late: their acks take them out of
  // the recovery (and count against nothing).
  AckPositions(sent, {1, 2});
  EXPECT_EQ(stats().window_in_flight, 1u);
  EXPECT_EQ(stats().window, 3u);  // slow start in the timeout's recovery
  AckPositions(sent, {0});
  EXPECT_EQ(stats().window_in_flight, 0u);
  // Position 3 is above the highest original answered (2): most likely on
  // its way as well, it is not resent at once (RecoveryMaySend)...
  EXPECT_TRUE(SendNow().empty());
  EXPECT_EQ(stats().recovery_pending, 1u);
  // ... but at the next timeout, as the position that timeout resends first.
  now_ = engine_->NextDeadline();
  EXPECT_EQ(Positions(SendNow()), (std::vector<uint64_t>{3}));
  EXPECT_EQ(stats().recovery_pending, 0u);
  EXPECT_EQ(stats().resends_timeout, 2u);
  EXPECT_EQ(stats().timeouts, 2u);
}

TEST_F(WorkerQueueEngineTest, Rule_TimeoutRecoveryResendsPositionsPassedOverByAnsweredOriginals) {
  Start(SmallConfig(16, 8));
  Enqueue(6 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 6u);
  now_ = engine_->NextDeadline();
  ASSERT_EQ(Positions(SendNow()), (std::vector<uint64_t>{0}));
  // 0 answered, then the original of 4 (window 3): 1..3 were passed over
  // (lost) and are resent; 5 may still come and is not.
  AckPositions(sent, {0, 4});
  EXPECT_EQ(stats().window, 3u);
  EXPECT_EQ(Positions(SendNow()), (std::vector<uint64_t>{1, 2, 3}));
  AckPositions(sent, {1, 2, 3});
  EXPECT_TRUE(SendNow().empty());
  EXPECT_EQ(stats().recovery_pending, 1u);  // 5
  EXPECT_EQ(stats().resends_timeout, 4u);
}

TEST_F(WorkerQueueEngineTest, Rule_NewPositionsWaitForTheTimeoutRecovery) {
  Start(SmallConfig(16, 4));
  Enqueue(8 * 62);
  auto sent = SendNow();
  ASSERT_EQ(Positions(sent), (std::vector<uint64_t>{0, 1, 2, 3}));
  now_ = engine_->NextDeadline();
  auto r0 = SendNow();
  ASSERT_EQ(Positions(r0), (std::vector<uint64_t>{0}));
  AckAll(r0);  // window 2
  auto r1 = SendNow();
  ASSERT_EQ(Positions(r1), (std::vector<uint64_t>{1, 2}));
  // Window 3 (ssthresh 2, then one per window): the last presumed-lost
  // fragment first, then new positions.
  AckAll(r1);
  auto r2 = SendNow();
  ASSERT_EQ(Positions(r2), (std::vector<uint64_t>{3, 4, 5}));
  EXPECT_TRUE(r2[0].header.resend);
  for (size_t i = 1; i < r2.size(); ++i) EXPECT_FALSE(r2[i].header.resend);
}

TEST_F(WorkerQueueEngineTest, Rule_RtoBackoffAndFloor) {
  Start(SmallConfig(16, 8));
  Enqueue(2 * 62);
  ASSERT_EQ(SendNow().size(), 2u);
  EXPECT_EQ(engine_->NextDeadline(), kT0 + Ms(10));  // initial_rto
  now_ = kT0 + Ms(10);
  ASSERT_EQ(SendNow().size(), 1u);  // the window collapsed to one
  EXPECT_EQ(engine_->NextDeadline(), kT0 + Ms(30));  // 10 + 2 * 10
  now_ = kT0 + Ms(30);
  auto resent = SendNow();
  ASSERT_EQ(Positions(resent), (std::vector<uint64_t>{0}));
  EXPECT_EQ(engine_->NextDeadline(), kT0 + Ms(70));  // 30 + 4 * 10
  EXPECT_EQ(stats().timeouts, 2u);

  // Acks of resent fragments give no RTT sample (Karn), but progress resets
  // the backoff: the path works.
  AckAll(resent);
  EXPECT_FALSE(engine_->rtt_debug_state().has_sample);
  EXPECT_EQ(stats().rto, Ms(10));
  AckAll(SendNow());
  EXPECT_EQ(engine_->NextDeadline(), TimePoint::Infinite());

  // A fragment sent once gives a 10 us sample: the RTO (30 us computed) is
  // held at the 1 ms floor.
  now_ = kT0 + Ms(100);
  Enqueue(62);
  auto fresh = SendNow();
  ASSERT_EQ(fresh.size(), 1u);
  EXPECT_EQ(engine_->NextDeadline(), now_ + Ms(10));
  now_ += Us(10);
  AckAll(fresh);
  EXPECT_EQ(stats().srtt, Us(10));
  EXPECT_EQ(stats().rto, Ms(1));
}

TEST_F(WorkerQueueEngineTest, Rule_ProgressResetsTheRtoBackoff) {
  // A fixed window: every timeout resends all three, so no ack is a sample.
  WorkerQueueConfig config = SmallConfig(16, 8);
  config.congestion_control = WorkerQueueConfig::CongestionControl::kFixedWindow;
  Start(config);
  Enqueue(3 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 3u);
  now_ = kT0 + Ms(10);
  ASSERT_EQ(SendNow().size(), 3u);
  now_ = kT0 + Ms(30);
  ASSERT_EQ(SendNow().size(), 3u);
  EXPECT_EQ(stats().rto, Ms(40));
  // An ack of a position above the lowest unacked one: no progress, still
  // backed off (and Karn: no sample).
  AckPositions(sent, {2});
  EXPECT_EQ(stats().rto, Ms(40));
  // The lowest unacked position advances: back to the unbacked RTO.
  AckPositions(sent, {0});
  EXPECT_EQ(stats().rto, Ms(10));
  EXPECT_EQ(engine_->NextDeadline(), now_ + Ms(10));
}

TEST_F(WorkerQueueEngineTest, Rule_TimeoutCollapsesTheWindowThenSlowStarts) {
  Start(SmallConfig(/*slots=*/64, /*initial_window=*/8));
  Enqueue(40 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 8u);
  now_ = engine_->NextDeadline();
  auto r = SendNow();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(stats().window, 1u);
  EXPECT_EQ(stats().ssthresh, 4u);  // half the window before the timeout
  // Slow start through the recovery: 1, 2, 4 resends per round trip.
  std::vector<size_t> flights;
  while (!r.empty() && flights.size() < 3) {
    flights.push_back(r.size());
    AckAll(r);
    r = SendNow();
  }
  EXPECT_EQ(flights, (std::vector<size_t>{1, 2, 4}));
  // The third flight's four acks were at ssthresh: congestion avoidance,
  // one more per window of acks.
  EXPECT_EQ(stats().window, 5u);
  EXPECT_EQ(stats().timeouts, 1u);
}

TEST_F(WorkerQueueEngineTest, FixedWindowTimeoutResendsTheWholeWindow) {
  WorkerQueueConfig config = SmallConfig(16, 4);
  config.congestion_control = WorkerQueueConfig::CongestionControl::kFixedWindow;
  Start(config);
  Enqueue(4 * 62);
  ASSERT_EQ(SendNow().size(), 4u);
  now_ = engine_->NextDeadline();
  EXPECT_EQ(Positions(SendNow()), (std::vector<uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(stats().window, 4u);
}

// ---- Congestion control --------------------------------------------------

TEST_F(WorkerQueueEngineTest, Rule_SlowStartThenCongestionAvoidance) {
  Start(SmallConfig(/*slots=*/64, /*initial_window=*/4));
  Enqueue(100 * 62);
  auto flight1 = SendNow();
  ASSERT_EQ(flight1.size(), 4u);
  // Slow start: +1 per parameter packet.
  for (size_t i = 0; i < 4; ++i) {
    AckAll({flight1[i]});
    EXPECT_EQ(stats().window, 5u + i);
  }
  auto flight2 = SendNow();
  ASSERT_EQ(Positions(flight2).front(), 4u);
  ASSERT_EQ(flight2.size(), 8u);
  // An ecn mark ends slow start: window and ssthresh 4.
  AckAll({flight2[0]}, AckOptions{.ecn = true});
  EXPECT_EQ(stats().window, 4u);
  EXPECT_EQ(stats().ssthresh, 4u);
  // The rest of flight 2 was sent before the reduction: no growth.
  AckAll(std::vector<wire::AtpMessage>(flight2.begin() + 1, flight2.end()));
  EXPECT_EQ(stats().window, 4u);
  // Congestion avoidance: +1 after a whole window (4) of parameter packets.
  auto flight3 = SendNow();
  ASSERT_EQ(flight3.size(), 4u);
  AckAll(std::vector<wire::AtpMessage>(flight3.begin(), flight3.begin() + 3));
  EXPECT_EQ(stats().window, 4u);
  AckAll({flight3[3]});
  EXPECT_EQ(stats().window, 5u);
  EXPECT_FALSE(engine_->cc_debug_state().in_slow_start);
}

TEST_F(WorkerQueueEngineTest, Rule_EcnHalvesWindow) {
  Start(SmallConfig(16, 8));
  Enqueue(8 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 8u);
  AckAll({sent[0]}, AckOptions{.ecn = true});
  EXPECT_EQ(stats().window, 4u);
  EXPECT_EQ(stats().ecn_marks, 1u);
}

TEST_F(WorkerQueueEngineTest, Rule_WindowNeverBelowOneOrAboveSlots) {
  Start(SmallConfig(/*slots=*/16, /*initial_window=*/8));
  Enqueue(600 * 62);
  // No marks: slow start stops at the slot count.
  for (int round = 0; round < 30; ++round) {
    auto sent = SendNow();
    EXPECT_LE(sent.size(), 16u);
    EXPECT_LE(stats().in_flight, 16u);
    AckAll(sent);
  }
  EXPECT_EQ(stats().window, 16u);
  // Every parameter packet marked: down to 1 and no lower.
  for (int round = 0; round < 30; ++round) {
    auto sent = SendNow();
    EXPECT_LE(stats().in_flight, std::max<uint64_t>(1, stats().window));
    AckAll(sent, AckOptions{.ecn = true});
  }
  EXPECT_EQ(stats().window, 1u);
  auto one = SendNow();
  EXPECT_EQ(one.size(), 1u);
}

TEST_F(WorkerQueueEngineTest, FixedWindowIgnoresMarksAndLosses) {
  WorkerQueueConfig config = SmallConfig(16, 8);
  config.congestion_control = WorkerQueueConfig::CongestionControl::kFixedWindow;
  Start(config);
  Enqueue(40 * 62);
  for (int round = 0; round < 5; ++round) {
    auto sent = SendNow();
    ASSERT_EQ(sent.size(), 8u);
    AckAll(sent, AckOptions{.ecn = true});
    EXPECT_EQ(stats().window, 8u);
  }
}

// ---- Window slots --------------------------------------------------------

TEST_F(WorkerQueueEngineTest, Rule_SlotNotReusedBeforeAck) {
  WorkerQueueConfig config = SmallConfig(/*slots=*/4, /*initial_window=*/4);
  config.congestion_control = WorkerQueueConfig::CongestionControl::kFixedWindow;
  Start(config);
  Enqueue(8 * 62);
  auto sent = SendNow();
  ASSERT_EQ(Positions(sent), (std::vector<uint64_t>{0, 1, 2, 3}));
  AckPositions(sent, {1, 2, 3});
  // Position 4 would take slot 0, still held by position 0: only 0's resend
  // (three acks beyond it) may go out.
  auto next = SendNow();
  EXPECT_EQ(Positions(next), (std::vector<uint64_t>{0}));
  EXPECT_EQ(stats().next_position, 4u);
  AckPositions(sent, {0});
  EXPECT_EQ(Positions(SendNow()), (std::vector<uint64_t>{4, 5, 6, 7}));
}

TEST_F(WorkerQueueEngineTest, Rule_WindowsOfTwoWorkersMoveTogether) {
  // Two workers of one rack, one scripted PS: the same parameter packets
  // reach both in the same order; their send patterns differ (burst sizes),
  // a few gradients are lost and a few parameter packets carry ecn. After
  // every parameter packet their windows are equal.
  std::vector<std::unique_ptr<WorkerQueueEngine>> workers;
  for (int w = 0; w < 2; ++w) {
    WorkerQueueConfig config = SmallConfig(/*slots=*/128, /*initial_window=*/16);
    config.shape = protocol::JobShape::Uniform(kJob, 1, 2);
    config.worker_in_rack = w;
    config.initial_rto = TimeDelta::FromSeconds(1);
    config.max_rto = TimeDelta::FromSeconds(10);
    workers.push_back(MakeEngine(config));
    ASSERT_NE(workers.back(), nullptr);
  }
  std::vector<float> input = Ramp(3000 * 62, 0.001f);
  std::vector<std::vector<float>> outputs(2, std::vector<float>(input.size()));
  for (int w = 0; w < 2; ++w) ASSERT_TRUE(workers[w]->Enqueue(input, outputs[w]).ok());

  struct Pending {
    uint32_t bitmap = 0;
    wire::AtpMessage ack;
    bool done = false;
  };
  std::map<uint32_t, Pending> ps;
  std::mt19937 rng(12345);
  uint64_t compared = 0;
  TimePoint now = kT0;
  std::vector<wire::AtpMessage> burst(8);
  int timeouts = 0;
  for (int round = 0; round < 100000; ++round) {
    if (workers[0]->stats().operations_completed == 1 &&
        workers[1]->stats().operations_completed == 1) {
      break;
    }
    now += Us(1);
    int w = static_cast<int>(rng() % 2);
    size_t limit = w == 0 ? 1 + rng() % 3 : 1 + rng() % 7;
    size_t n = workers[w]->CollectSends(now, std::span(burst).first(limit));
    if (n == 0 && !workers[0]->WantsToSend() && !workers[1]->WantsToSend()) {
      // Stuck (a loss with too few fragments behind it to detect it): let
      // both retransmission timers fire, before any further parameter packet
      // (a zero-sized burst handles the timeout and sends nothing). A timeout
      // leaves the window alone and rearms loss detection with ACK-stream
      // values only, so workers that time out between the same two
      // parameter packets stay identical.
      now = std::max(workers[0]->NextDeadline(), workers[1]->NextDeadline());
      ASSERT_FALSE(now.IsInfinite());
      for (auto& worker : workers) worker->CollectSends(now, {});
      ++timeouts;
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      const wire::AtpMessage& m = burst[i];
      if (rng() % 100 < 3) continue;  // gradient lost
      Pending& p = ps[m.header.seq];
      if (p.done) {
        if (m.header.resend) {
          for (auto& worker : workers) worker->OnParameterPacket(p.ack, now);
        }
        continue;
      }
      if (p.bitmap & m.header.bitmap0) continue;  // duplicate
      p.bitmap |= m.header.bitmap0;
      if (p.bitmap != 3) continue;
      p.done = true;
      // Both workers send the same data; the echo stands for the sum.
      p.ack = EchoAck(m, AckOptions{.ecn = rng() % 100 < 4});
      for (auto& worker : workers) worker->OnParameterPacket(p.ack, now);
      ASSERT_EQ(workers[0]->stats().window, workers[1]->stats().window)
          << "after the parameter packet for seq " << m.header.seq;
      ASSERT_EQ(workers[0]->stats().ssthresh, workers[1]->stats().ssthresh);
      ++compared;
    }
  }
  EXPECT_EQ(workers[0]->stats().operations_completed, 1u);
  EXPECT_EQ(workers[1]->stats().operations_completed, 1u);
  EXPECT_EQ(compared, 3000u);
  EXPECT_GT(timeouts, 0);
  EXPECT_EQ(workers[0]->stats().timeouts, workers[1]->stats().timeouts);
  EXPECT_GT(workers[0]->cc_debug_state().reductions, 2u);
  EXPECT_GT(workers[0]->stats().loss_events, 0u);
  EXPECT_EQ(outputs[0], outputs[1]);
}

// ---- Operations and API --------------------------------------------------

TEST_F(WorkerQueueEngineTest, EnqueueRejectsMismatchedSizes) {
  Start(SmallConfig());
  std::vector<float> in(10);
  std::vector<float> out(9);
  EXPECT_EQ(engine_->Enqueue(in, out).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(WorkerQueueEngineTest, EmptyOperationCompletesAtOnce) {
  Start(SmallConfig());
  OperationId op = Enqueue(0);
  EXPECT_TRUE(SendNow().empty());
  EXPECT_EQ(Completions(*engine_), (std::vector<OperationId>{op}));
}

TEST_F(WorkerQueueEngineTest, OperationIdsAreSequentialFromOne) {
  Start(SmallConfig());
  EXPECT_EQ(Enqueue(1), 1u);
  EXPECT_EQ(Enqueue(1), 2u);
  EXPECT_EQ(Enqueue(0), 3u);
}

TEST_F(WorkerQueueEngineTest, OperationsMayCompleteOutOfOrder) {
  Start(SmallConfig());
  OperationId a = Enqueue(62);
  OperationId b = Enqueue(30);
  OperationId c = Enqueue(62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 3u);
  AckPositions(sent, {1});
  EXPECT_EQ(Completions(*engine_), (std::vector<OperationId>{b}));
  AckPositions(sent, {2, 0});
  EXPECT_EQ(Completions(*engine_), (std::vector<OperationId>{c, a}));
  EXPECT_EQ(outputs_[1], RoundTrip(inputs_[1]));
}

TEST_F(WorkerQueueEngineTest, CompletionsCollectedInPieces) {
  Start(SmallConfig());
  for (int i = 0; i < 5; ++i) Enqueue(62);
  AckAll(SendNow());
  std::array<OperationId, 2> out{};
  EXPECT_EQ(engine_->CollectCompletions(out), 2u);
  EXPECT_EQ(out[0], 1u);
  EXPECT_EQ(out[1], 2u);
  EXPECT_EQ(engine_->CollectCompletions(out), 2u);
  EXPECT_EQ(out[0], 3u);
  EXPECT_EQ(engine_->CollectCompletions(out), 1u);
  EXPECT_EQ(out[0], 5u);
  EXPECT_EQ(engine_->CollectCompletions(out), 0u);
}

TEST_F(WorkerQueueEngineTest, SendsAreLimitedByTheOutputSpan) {
  Start(SmallConfig(16, 8));
  Enqueue(8 * 62);
  EXPECT_TRUE(engine_->WantsToSend());
  EXPECT_EQ(SendNow(3).size(), 3u);
  EXPECT_TRUE(engine_->WantsToSend());
  EXPECT_EQ(Positions(SendNow(100)), (std::vector<uint64_t>{3, 4, 5, 6, 7}));
  EXPECT_FALSE(engine_->WantsToSend());
}

TEST_F(WorkerQueueEngineTest, ResendsGoFirstAndWaitForRoom) {
  Start(SmallConfig(16, 8));
  Enqueue(12 * 62);
  auto sent = SendNow();
  ASSERT_EQ(sent.size(), 8u);
  // Three losses detected by reordering, queued together (not limited by
  // the window), then sent in pieces before anything new.
  AckPositions(sent, {3, 4, 5});
  AckPositions(sent, {6});
  AckPositions(sent, {7});
  ASSERT_EQ(stats().loss_events, 1u);
  Deliver(OverflowRequest(1));
  Deliver(OverflowRequest(2));
  auto first = SendNow(2);
  EXPECT_EQ(Positions(first), (std::vector<uint64_t>{0, 1}));
  EXPECT_TRUE(engine_->WantsToSend());
  auto rest = SendNow(1);
  EXPECT_EQ(Positions(rest), (std::vector<uint64_t>{2}));
  for (const auto& m : rest) EXPECT_TRUE(m.header.resend);
}

TEST_F(WorkerQueueEngineTest, Rule_OverflowRequestAndItsFpResendGiveRttSamples) {
  Start(SmallConfig());
  Enqueue(Ramp(62, 0.01f));
  ASSERT_EQ(SendNow().size(), 1u);
  // The request answers the integer fragment, sent once: a 20 us sample.
  now_ += Us(20);
  Deliver(OverflowRequest(0));
  EXPECT_EQ(stats().rtt_samples, 1u);
  EXPECT_EQ(stats().srtt, Us(20));
  // The float32 resend is the only transmission outstanding: its ack is a
  // sample (10 us) although the fragment was sent twice.
  auto fp = SendNow();
  ASSERT_EQ(fp.size(), 1u);
  now_ += Us(10);
  AckAll(fp);
  EXPECT_EQ(stats().rtt_samples, 2u);
  EXPECT_EQ(engine_->rtt_debug_state().latest_rtt, Us(10));
}

TEST_F(WorkerQueueEngineTest, RepeatedOverflowRequestGivesNoSample) {
  Start(SmallConfig());
  Enqueue(Ramp(62, 0.01f));
  ASSERT_EQ(SendNow().size(), 1u);
  now_ += Us(20);
  Deliver(OverflowRequest(0));
  auto fp1 = SendNow();
  ASSERT_EQ(fp1.size(), 1u);
  // A second request: two float32 resends, the answer is ambiguous (Karn).
  Deliver(OverflowRequest(0));
  ASSERT_EQ(SendNow().size(), 1u);
  now_ += Us(10);
  AckAll(fp1);
  EXPECT_EQ(stats().rtt_samples, 1u);
}

TEST_F(WorkerQueueEngineTest, NoDeadlineWhileIdle) {
  Start(SmallConfig());
  EXPECT_EQ(engine_->NextDeadline(), TimePoint::Infinite());
  EXPECT_FALSE(engine_->WantsToSend());
  EXPECT_TRUE(SendNow().empty());
}

}  // namespace
}  // namespace atp::worker
