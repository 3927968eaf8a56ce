// A parameter packet of a dead PS that reaches a worker after the worker
// joined the restarted PS (docs/protocol.md "Runs and restarts"): the
// rebuild planned without it, so that worker never resends the fragment and
// the others wait for it. The PS's waiting report asks for joins again; the
// run that joined before joins again (RunTracker's kResync), the new joins
// say who has the result, and it is replayed. And joins that answered the
// dead PS, read by the restarted one, are ignored. And a new run against a
// long-lived PS gets nothing the PS kept of the run before: not while it
// joins, not once the queue is rebuilt for it. Driven message by message on
// a PsShard, with the clock in the test's hands.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "atp/parameter_server.h"
#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/host/ps_shard.h"
#include "lib/ps/run_tracker.h"
#include "lib/protocol/join_message.h"
#include "lib/protocol/op_begin_message.h"
#include "lib/protocol/replay_message.h"
#include "lib/protocol/status_message.h"
#include "lib/wire/control_message.h"
#include "tests/unit/runtime/join_frame.h"

namespace atp::host {
namespace {

constexpr uint8_t kJob = 6;
constexpr int kWorkers = 2;
constexpr uint32_t kSlots = 16;

transport::DeviceAddress Address(const char* ip) {
  const wire::Ipv4Address a = *wire::Ipv4Address::Parse(ip);
  return {a, transport::DefaultMacFor(a)};
}

// Sent: what the PS sent, decoded.
class Sent : public FrameSink {
 public:
  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override {
    wire::FrameFields fields;
    wire::AtpMessage message;
    ASSERT_EQ(wire::DecodeFrame(frame, wire::kDefaultBasePort, &fields, &message.payload),
              wire::DecodeError::kOk);
    message.header = fields.header;
    messages.push_back(message);
  }
  // Statuses: the kStatus bodies sent, in order.
  std::vector<protocol::StatusBody> Statuses() const {
    std::vector<protocol::StatusBody> out;
    for (const wire::AtpMessage& m : messages) {
      wire::ControlMessage control;
      protocol::StatusBody status;
      if (wire::IsControl(m.header) && wire::DecodeControl(m, &control) == wire::ControlError::kOk &&
          protocol::DecodeStatus(control, &status)) {
        out.push_back(status);
      }
    }
    return out;
  }
  // Result: the parameter packet sent for `position`, if any.
  std::optional<wire::AtpMessage> Result(uint32_t position) const {
    for (const wire::AtpMessage& m : messages) {
      if (!wire::IsControl(m.header) && m.header.ack && m.header.position() == position) return m;
    }
    return std::nullopt;
  }
  std::vector<wire::AtpMessage> messages;
};

// ExpectOnlyAReplayRequest: the PS's only status asks `worker` to replay
// positions [first, end).
void ExpectOnlyAReplayRequest(const Sent& sent, uint64_t first, uint64_t end, int worker) {
  const std::vector<protocol::StatusBody> statuses = sent.Statuses();
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].kind, protocol::StatusKind::kReplayRequest);
  EXPECT_EQ(statuses[0].expected, first);
  EXPECT_EQ(statuses[0].received, end);
  EXPECT_EQ(statuses[0].workers.ToVector(), std::vector<int>{worker});
}

wire::AtpMessage Gradient(int worker, uint32_t position, uint32_t value) {
  wire::AtpMessage m;
  m.header.job = kJob;
  m.header.seq = wire::MakeSeq(0, position);
  m.header.bitmap0 = 1u << worker;
  m.header.bitmap1 = 1;
  m.header.fan_in0 = kWorkers;
  m.header.fan_in1 = 1;
  m.payload.fill(value);
  return m;
}

// PsOptions: one one-rack job of kWorkers, multicast, kSlots slots.
ParameterServerOptions PsOptions() {
  ParameterServerOptions options;
  ParameterServerJobOptions job;
  job.job_id = kJob;
  job.layout = RackLayout::Uniform(1, kWorkers);
  job.delivery = ParameterDelivery::kMulticast;
  job.multicast_group = Address("239.1.0.6");
  options.jobs.push_back(job);
  options.slots = kSlots;
  options.waiting_report_interval = absl::Seconds(1);
  return options;
}

TEST(PsRejoinTest, AResultOfTheDeadPsThatCameAfterAJoinIsReplayed) {
  auto created = PsShard::Create(PsOptions(), 0, Address("10.0.0.100"));
  ASSERT_TRUE(created.ok()) << created.status();
  PsShard& ps = **created;
  Sent sent;
  TimePoint now = TimePoint::FromNanoseconds(1'000'000);

  // The restarted PS asks; both workers join: positions 0..4 done, 5..7 in
  // flight, no result of them anywhere. The rebuilt queue waits for 5..7.
  ps.OnMessage(Gradient(1, 5, 2), now, sent);
  ASSERT_EQ(ps.engine().counters().gradients, 1u);
  for (int w = 0; w < kWorkers; ++w) {
    ps.OnMessage(testing::JoinMessage(kJob, w, kWorkers, 0, testing::JoinAt(kWorkers, kSlots, 5, 8)),
                 now, sent);
  }
  // Then the dead PS's packet for 5 reaches worker 0: it is past 5 and
  // never resends it. Worker 1 resends 5; both send 6 and 7, which complete.
  ps.OnMessage(Gradient(1, 5, 2), now, sent);
  for (uint32_t p = 6; p < 8; ++p) {
    for (int w = 0; w < kWorkers; ++w) ps.OnMessage(Gradient(w, p, 1), now, sent);
  }
  ASSERT_TRUE(sent.Result(6).has_value());
  ASSERT_TRUE(sent.Result(7).has_value());
  ASSERT_FALSE(sent.Result(5).has_value());

  // Position 5 waits for worker 0 for a report interval: the PS names it
  // and asks for joins.
  sent.messages.clear();
  now += TimeDelta::FromSeconds(2);
  ASSERT_EQ(ps.ReportWaiting(now, sent), 1u);
  std::vector<protocol::StatusBody> statuses = sent.Statuses();
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].kind, protocol::StatusKind::kWaitingForWorkers);
  EXPECT_EQ(statuses[0].workers.ToVector(), std::vector<int>{0});
  EXPECT_EQ(statuses[1].kind, protocol::StatusKind::kJoinRequest);

  // The new joins: worker 0 has 5..7, worker 1 has 6 and 7 but not 5.
  sent.messages.clear();
  ps.OnMessage(testing::JoinMessage(kJob, 0, kWorkers, 0, testing::JoinAt(kWorkers, kSlots, 8, 8)),
               now, sent);
  protocol::JoinBody lagging = testing::JoinAt(kWorkers, kSlots, 5, 8);
  lagging.acked_after_lowest[0] = 0b11;  // 6 and 7
  lagging.acked_end = 8;
  ps.OnMessage(testing::JoinMessage(kJob, 1, kWorkers, 0, lagging), now, sent);
  ExpectOnlyAReplayRequest(sent, /*first=*/5, /*end=*/6, /*worker=*/0);

  // Worker 0 replays the packet it got; the PS multicasts it bit for bit.
  sent.messages.clear();
  wire::AtpMessage original = Gradient(0, 5, 0);
  original.header.ack = true;
  original.header.bitmap0 = 0b11;
  std::array<uint8_t, wire::kPayloadBytes> bytes;
  bytes.fill(0x5A);
  for (const protocol::ReplayPart& part : protocol::SplitReplay(5, original.header, bytes)) {
    wire::ControlMessage control;
    protocol::EncodeReplay(part, control);
    ps.OnMessage(testing::WorkerControl(kJob, 0, kWorkers, 0, 5, control), now, sent);
  }
  const std::optional<wire::AtpMessage> result = sent.Result(5);
  ASSERT_TRUE(result.has_value());
  for (uint32_t word : result->payload) EXPECT_EQ(word, 0x5A5A5A5Au);
  EXPECT_EQ(ps.engine().counters().replays_applied, 1u);
}

TEST(PsRejoinTest, JoinsThatAnsweredTheDeadPsAreIgnored) {
  // The dead PS asked for joins; the answers were still queued for it when
  // the PS restarted, and the restarted one reads them. They describe the
  // streams as they stood then (no result of 5); worker 0 has since received
  // the dead PS's results of 5..7. Taken, they would make a decision that
  // never asks worker 0 to replay 5, and the PS would ask for no more joins.
  auto created = PsShard::Create(PsOptions(), 0, Address("10.0.0.100"));
  ASSERT_TRUE(created.ok()) << created.status();
  PsShard& ps = **created;
  Sent sent;
  const TimePoint now = TimePoint::FromNanoseconds(1'000'000);
  constexpr uint64_t kDeadPs = 0xDEAD;
  ASSERT_NE(ps.incarnation(), kDeadPs);
  for (int w = 0; w < kWorkers; ++w) {
    protocol::JoinBody stale = testing::JoinAt(kWorkers, kSlots, 5, 8);
    stale.answers = kDeadPs;
    ps.OnMessage(testing::JoinMessage(kJob, w, kWorkers, 0, stale), now, sent);
  }
  ParameterServerStats stats;
  ps.AddTo(stats);
  EXPECT_EQ(stats.stale_joins, 2u);
  EXPECT_EQ(stats.rebuilds, 0u);
  EXPECT_TRUE(sent.messages.empty());

  // Worker 1 resends 5: the queue is not synchronized, so the PS asks.
  ps.OnMessage(Gradient(1, 5, 2), now, sent);
  std::vector<protocol::StatusBody> statuses = sent.Statuses();
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].kind, protocol::StatusKind::kJoinRequest);

  // The answers to this PS: worker 0 has 5..7, worker 1 none of them.
  sent.messages.clear();
  protocol::JoinBody ahead = testing::JoinAt(kWorkers, kSlots, 8, 8);
  ahead.answers = ps.incarnation();
  ps.OnMessage(testing::JoinMessage(kJob, 0, kWorkers, 0, ahead), now, sent);
  protocol::JoinBody lagging = testing::JoinAt(kWorkers, kSlots, 5, 8);
  lagging.answers = ps.incarnation();
  ps.OnMessage(testing::JoinMessage(kJob, 1, kWorkers, 0, lagging), now, sent);
  ExpectOnlyAReplayRequest(sent, /*first=*/5, /*end=*/8, /*worker=*/0);
  stats = {};
  ps.AddTo(stats);
  EXPECT_EQ(stats.stale_joins, 2u);
  EXPECT_EQ(stats.rebuilds, 1u);
}

// Resend: a gradient a worker sends again after a timeout (the PS answers a
// completed position's resend with its stored packet).
wire::AtpMessage Resend(int worker, uint32_t position, uint32_t value) {
  wire::AtpMessage m = Gradient(worker, position, value);
  m.header.resend = true;
  return m;
}

// Join: worker `worker`'s join on queue 0 as run `run`, its stream at
// `next` (nothing acknowledged), with `scale`.
void Join(PsShard& ps, Sent& sent, TimePoint now, int worker, int run, uint64_t next = 0,
          double scale = 1.0) {
  protocol::JoinBody join = testing::JoinAt(kWorkers, kSlots, 0, next);
  join.scale = scale;
  ps.OnMessage(testing::JoinMessage(kJob, worker, kWorkers, 0, join, run), now, sent);
}

// Mismatches: the workers named by the kMismatch statuses sent, in order.
std::vector<std::vector<int>> Mismatches(const Sent& sent) {
  std::vector<std::vector<int>> named;
  for (const protocol::StatusBody& status : sent.Statuses()) {
    if (status.kind == protocol::StatusKind::kMismatch) named.push_back(status.workers.ToVector());
  }
  return named;
}

// RunCompletes: every worker joins as `run`, then positions [0, positions)
// complete with every worker contributing 1.
void RunCompletes(PsShard& ps, Sent& sent, TimePoint now, int run, uint32_t positions) {
  for (int w = 0; w < kWorkers; ++w) Join(ps, sent, now, w, run);
  for (uint32_t p = 0; p < positions; ++p) {
    for (int w = 0; w < kWorkers; ++w) ps.OnMessage(Gradient(w, p, 1), now, sent);
    ASSERT_TRUE(sent.Result(p).has_value()) << p;
  }
}

// OpBegin: worker `worker`'s kOpBegin of a one-fragment operation of
// `values` values at 0, as run `run`.
wire::AtpMessage OpBegin(int worker, int run, uint64_t values = 62) {
  wire::ControlMessage op_begin;
  protocol::EncodeOpBegin(
      {.piece = 0, .first_position = 0, .positions = 1, .op_values = values}, op_begin);
  return testing::WorkerControl(kJob, worker, kWorkers, 0, 0, op_begin, run);
}

uint64_t UnsynchronizedGradients(const PsShard& ps) {
  ParameterServerStats stats;
  ps.AddTo(stats);
  return stats.unsynchronized_gradients;
}

// A PS that serves the job of PsOptions, fed by hand.
class PsNewRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = PsShard::Create(PsOptions(), 0, Address("10.0.0.100"));
    ASSERT_TRUE(created.ok()) << created.status();
    ps_ = std::move(*created);
  }
  std::unique_ptr<PsShard> ps_;
  Sent sent_;
  const TimePoint now_ = TimePoint::FromNanoseconds(1'000'000);
};

TEST_F(PsNewRunTest, ANewRunGetsNothingOfTheRunBefore) {
  // Run 0: positions 0..2 complete with the sum 1 + 1.
  RunCompletes(*ps_, sent_, now_, /*run=*/0, /*positions=*/3);

  // Run 1 starts at position 0 again; worker 0 has joined, worker 1's join is
  // still on its way. Resends of positions the PS completed for run 0, from
  // either worker: the PS holds them back, answers none with run 0's packet,
  // and asks for joins.
  sent_.messages.clear();
  Join(*ps_, sent_, now_, /*worker=*/0, /*run=*/1);
  ps_->OnMessage(Resend(0, 0, 5), now_, sent_);
  ps_->OnMessage(Resend(1, 1, 7), now_, sent_);
  EXPECT_FALSE(sent_.Result(0).has_value());
  EXPECT_FALSE(sent_.Result(1).has_value());
  std::vector<protocol::StatusBody> statuses = sent_.Statuses();
  ASSERT_EQ(statuses.size(), 1u);  // one request per 20 ms and queue
  EXPECT_EQ(statuses[0].kind, protocol::StatusKind::kJoinRequest);
  EXPECT_EQ(UnsynchronizedGradients(*ps_), 2u);

  // Worker 1 joins as run 1: a new run. Every position run 0 completed waits
  // again, and run 1's resends make run 1's sums, not run 0's.
  sent_.messages.clear();
  Join(*ps_, sent_, now_, /*worker=*/1, /*run=*/1);
  for (uint32_t p = 0; p < 3; ++p) {
    ps_->OnMessage(Resend(0, p, 5), now_, sent_);
    EXPECT_FALSE(sent_.Result(p).has_value()) << "answered before worker 1 sent " << p;
    ps_->OnMessage(Resend(1, p, 7), now_, sent_);
    const std::optional<wire::AtpMessage> result = sent_.Result(p);
    ASSERT_TRUE(result.has_value()) << p;
    for (uint32_t word : result->payload) EXPECT_EQ(word, 12u) << p;
  }
  EXPECT_EQ(UnsynchronizedGradients(*ps_), 2u);
  ParameterServerStats stats;
  ps_->AddTo(stats);
  EXPECT_EQ(stats.rebuilds, 1u);  // run 1's (run 0's first decision changed no slot)
}

TEST_F(PsNewRunTest, ANewRunWhoseJoinIsLostIsHeldBackFromItsOpBegin) {
  RunCompletes(*ps_, sent_, now_, /*run=*/0, /*positions=*/1);

  // Run 1's joins are lost; worker 0's kOpBegin for its first operation
  // arrives, then resends of 0 from both workers.
  sent_.messages.clear();
  ps_->OnMessage(OpBegin(/*worker=*/0, /*run=*/1), now_, sent_);
  ps_->OnMessage(Resend(0, 0, 5), now_, sent_);
  ps_->OnMessage(Resend(1, 0, 7), now_, sent_);
  EXPECT_FALSE(sent_.Result(0).has_value()) << "run 0's result handed to run 1";
  std::vector<protocol::StatusBody> statuses = sent_.Statuses();
  ASSERT_FALSE(statuses.empty());
  EXPECT_EQ(statuses[0].kind, protocol::StatusKind::kJoinRequest);
  EXPECT_EQ(UnsynchronizedGradients(*ps_), 2u);

  // Asked, run 1 joins: a new run, and 0 completes with run 1's sum.
  sent_.messages.clear();
  for (int w = 0; w < kWorkers; ++w) Join(*ps_, sent_, now_, w, /*run=*/1, /*next=*/1);
  ps_->OnMessage(Resend(0, 0, 5), now_, sent_);
  ps_->OnMessage(Resend(1, 0, 7), now_, sent_);
  const std::optional<wire::AtpMessage> result = sent_.Result(0);
  ASSERT_TRUE(result.has_value());
  for (uint32_t word : result->payload) EXPECT_EQ(word, 12u);
}

TEST_F(PsNewRunTest, AStaleOpBeginOfADeadRunCostsOneRoundOfJoins) {
  for (int w = 0; w < kWorkers; ++w) Join(*ps_, sent_, now_, w, /*run=*/1);
  // A kOpBegin of run 0 (dead) arrives late: held back until the run the
  // queue serves joins again (kResync), then everything goes on.
  ps_->OnMessage(OpBegin(/*worker=*/1, /*run=*/0), now_, sent_);
  ps_->OnMessage(Gradient(0, 0, 1), now_, sent_);
  EXPECT_EQ(UnsynchronizedGradients(*ps_), 1u);
  for (int w = 0; w < kWorkers; ++w) Join(*ps_, sent_, now_, w, /*run=*/1);
  sent_.messages.clear();
  for (int w = 0; w < kWorkers; ++w) ps_->OnMessage(Gradient(w, 0, 1), now_, sent_);
  ASSERT_TRUE(sent_.Result(0).has_value());
  EXPECT_EQ(UnsynchronizedGradients(*ps_), 1u);
}

// Confirmations: the pieces confirmed by the kOpConfirmed statuses sent.
std::vector<uint64_t> Confirmations(const Sent& sent) {
  std::vector<uint64_t> pieces;
  for (const protocol::StatusBody& status : sent.Statuses()) {
    if (status.kind == protocol::StatusKind::kOpConfirmed) pieces.push_back(status.expected);
  }
  return pieces;
}

TEST_F(PsNewRunTest, ALateDeclarationOfTheRunBeforeIsNoMismatchWithTheNewRuns) {
  // Run 0 declares piece 0 as 62 values, confirmed.
  RunCompletes(*ps_, sent_, now_, /*run=*/0, /*positions=*/1);
  for (int w = 0; w < kWorkers; ++w) ps_->OnMessage(OpBegin(w, /*run=*/0), now_, sent_);
  EXPECT_EQ(Confirmations(sent_), std::vector<uint64_t>{0});
  // Run 1's worker 0 joins and declares its piece 0 as 100 values; a resend
  // of run 0's worker 1 declaration, late, comes between two of worker 0's.
  sent_.messages.clear();
  Join(*ps_, sent_, now_, /*worker=*/0, /*run=*/1);
  ps_->OnMessage(OpBegin(0, /*run=*/1, /*values=*/100), now_, sent_);
  ps_->OnMessage(OpBegin(1, /*run=*/0), now_, sent_);
  ps_->OnMessage(OpBegin(0, /*run=*/1, /*values=*/100), now_, sent_);
  EXPECT_TRUE(Mismatches(sent_).empty());
  EXPECT_TRUE(Confirmations(sent_).empty());
  ParameterServerStats stats;
  ps_->AddTo(stats);
  EXPECT_EQ(stats.unsynchronized_declarations, 3u);
  // Run 1 is decided; its declarations, made again, are confirmed.
  Join(*ps_, sent_, now_, /*worker=*/1, /*run=*/1);
  for (int w = 0; w < kWorkers; ++w) ps_->OnMessage(OpBegin(w, /*run=*/1, 100), now_, sent_);
  EXPECT_TRUE(Mismatches(sent_).empty());
  EXPECT_EQ(Confirmations(sent_), std::vector<uint64_t>{0});
}

TEST_F(PsNewRunTest, AWorkerRestartedAloneGetsNoResultOfTheRunItLeft) {
  RunCompletes(*ps_, sent_, now_, /*run=*/0, /*positions=*/1);

  // Worker 1 restarts alone (a new incarnation; worker 0 is still run 0's)
  // and resends position 0: no decision is possible, and the PS must not
  // hand it run 0's result of 0 as its own.
  sent_.messages.clear();
  Join(*ps_, sent_, now_, /*worker=*/1, /*run=*/1);
  ps_->OnMessage(Resend(1, 0, 7), now_, sent_);
  EXPECT_FALSE(sent_.Result(0).has_value());
  EXPECT_EQ(UnsynchronizedGradients(*ps_), 1u);
  ParameterServerStats stats;
  ps_->AddTo(stats);
  EXPECT_EQ(stats.rebuilds, 0u);
}

TEST_F(PsNewRunTest, ARunChecksItsOwnScaleNotOneOfAWorkerRestartedAlone) {
  RunCompletes(*ps_, sent_, now_, /*run=*/0, /*positions=*/1);
  // Worker 1 restarts alone with another scale: nothing to check it against
  // (its queue stalls); no mismatch, and it binds no later run.
  sent_.messages.clear();
  Join(*ps_, sent_, now_, /*worker=*/1, /*run=*/1, /*next=*/0, /*scale=*/2.0);
  EXPECT_TRUE(Mismatches(sent_).empty());
  // A new run at the first scale (worker 1's join first, replacing its
  // restarted one's): decided, no mismatch, results flow.
  for (int w = kWorkers - 1; w >= 0; --w) Join(*ps_, sent_, now_, w, /*run=*/2);
  EXPECT_TRUE(Mismatches(sent_).empty());
  sent_.messages.clear();
  for (int w = 0; w < kWorkers; ++w) ps_->OnMessage(Gradient(w, 0, 1), now_, sent_);
  EXPECT_TRUE(sent_.Result(0).has_value());
  // A new run whose workers disagree: worker 1 is named, at its decision.
  sent_.messages.clear();
  Join(*ps_, sent_, now_, /*worker=*/0, /*run=*/3, /*next=*/0, /*scale=*/4.0);
  EXPECT_TRUE(Mismatches(sent_).empty());
  Join(*ps_, sent_, now_, /*worker=*/1, /*run=*/3, /*next=*/0, /*scale=*/8.0);
  EXPECT_EQ(Mismatches(sent_), (std::vector<std::vector<int>>{{1}}));
}

TEST_F(PsNewRunTest, ANewRunIsDecidedWithoutTheJoinOfAWorkerThatRestartedAloneAndDied) {
  RunCompletes(*ps_, sent_, now_, /*run=*/0, /*positions=*/1);
  // Worker 1 restarts alone (run 1), joins, and dies; the job stalls.
  Join(*ps_, sent_, now_, /*worker=*/1, /*run=*/1);
  // Later a whole new run (2) starts; its worker 0 joins first. Worker 1's
  // join of run 1 is too old to decide with, so the PS waits for run 2's.
  const TimePoint later = now_ + ps::RunTracker::kJoinLifetime * 3;
  Join(*ps_, sent_, later, /*worker=*/0, /*run=*/2);
  Join(*ps_, sent_, later, /*worker=*/1, /*run=*/2);
  sent_.messages.clear();
  for (int w = 0; w < kWorkers; ++w) ps_->OnMessage(Resend(w, 0, 3), later, sent_);
  const std::optional<wire::AtpMessage> result = sent_.Result(0);
  ASSERT_TRUE(result.has_value()) << "held back: " << UnsynchronizedGradients(*ps_);
  for (uint32_t word : result->payload) EXPECT_EQ(word, 6u);
}

TEST_F(PsNewRunTest, ANewRunDecidedWithTheJoinOfADeadLoneRestartIsRedoneWithItsOwnWorker) {
  RunCompletes(*ps_, sent_, now_, /*run=*/0, /*positions=*/1);
  // Worker 1 restarts alone (run 1), joins, and dies. Within that join's
  // lifetime a whole new run (2) starts, and its worker 0 joins first: a new
  // run, decided with run 1's worker 1 (nothing tells it from run 2's yet).
  const TimeDelta step = TimeDelta::FromMilliseconds(100);
  TimePoint t = now_;
  Join(*ps_, sent_, t += step, /*worker=*/1, /*run=*/1);
  Join(*ps_, sent_, t += step, /*worker=*/0, /*run=*/2);
  // Run 2's worker 1 joins: held back like a worker restarted alone; both
  // workers' resends are held back, and the PS asks for joins.
  Join(*ps_, sent_, t += step, /*worker=*/1, /*run=*/2);
  sent_.messages.clear();
  for (int w = 0; w < kWorkers; ++w) ps_->OnMessage(Resend(w, 0, 3), t, sent_);
  EXPECT_FALSE(sent_.Result(0).has_value());
  EXPECT_EQ(UnsynchronizedGradients(*ps_), 2u);
  const std::vector<protocol::StatusBody> statuses = sent_.Statuses();
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[0].kind, protocol::StatusKind::kJoinRequest);
  // Worker 0 answers, at 0 like worker 1: the new run is decided again with
  // its own workers, and 0 completes with run 2's sum.
  Join(*ps_, sent_, t += step, /*worker=*/0, /*run=*/2);
  sent_.messages.clear();
  for (int w = 0; w < kWorkers; ++w) ps_->OnMessage(Resend(w, 0, 3), t, sent_);
  const std::optional<wire::AtpMessage> result = sent_.Result(0);
  ASSERT_TRUE(result.has_value()) << "held back: " << UnsynchronizedGradients(*ps_);
  for (uint32_t word : result->payload) EXPECT_EQ(word, 6u);
  EXPECT_TRUE(Mismatches(sent_).empty());
}

}  // namespace
}  // namespace atp::host
