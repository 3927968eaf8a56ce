// A late operation confirmation of the run before reaches a new run's worker
// (docs/protocol.md "Mismatches are errors"): the worker must not take it as
// its own. Taken, it stopped the worker's kOpBegin resends while the PS had
// dropped its only declaration (the queue was held back for the new run's
// joins), and the queue stalled for good (about 1 in 100 repetitions of
// MismatchTest.ANewRunMayChangeTheScaleButItsWorkersMustAgree). Two
// WorkerIoLoops and a PsShard wired by hand, frame by frame, with the clock
// in the test's hands: the interleaving is the test's, not the scheduler's.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "atp/parameter_server.h"
#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/host/op_state.h"
#include "lib/host/ps_shard.h"
#include "lib/host/worker_config.h"
#include "lib/host/worker_io_loop.h"
#include "lib/protocol/op_begin_message.h"
#include "lib/protocol/status_message.h"
#include "lib/wire/control_message.h"
#include "testbed/reflector_queue.h"

namespace atp::host {
namespace {

using testbed::ReflectorQueue;
using Frame = ReflectorQueue::Frame;

constexpr uint8_t kJob = 6;
constexpr int kWorkers = 2;
constexpr uint32_t kSlots = 16;
constexpr size_t kValues = 62 * 3;  // three fragments per operation

transport::DeviceAddress Address(const char* ip) {
  const wire::Ipv4Address a = *wire::Ipv4Address::Parse(ip);
  return {a, transport::DefaultMacFor(a)};
}

const transport::DeviceAddress kPs = Address("10.0.0.100");

ParameterServerOptions PsOptions() {
  ParameterServerOptions options;
  ParameterServerJobOptions job;
  job.job_id = kJob;
  job.layout = RackLayout::Uniform(1, kWorkers);
  job.delivery = ParameterDelivery::kMulticast;
  job.multicast_group = Address("239.1.0.6");
  options.jobs.push_back(job);
  options.slots = kSlots;
  return options;
}

// Decoded: `frame` as a message (ASSERTs it decodes).
wire::AtpMessage Decoded(std::span<const uint8_t> frame) {
  wire::FrameFields fields;
  wire::AtpMessage message;
  EXPECT_EQ(wire::DecodeFrame(frame, wire::kDefaultBasePort, &fields, &message.payload),
            wire::DecodeError::kOk);
  message.header = fields.header;
  return message;
}

// StatusOf: the kStatus body `frame` carries, if it is one.
std::optional<protocol::StatusBody> StatusOf(std::span<const uint8_t> frame) {
  const wire::AtpMessage m = Decoded(frame);
  wire::ControlMessage control;
  protocol::StatusBody status;
  if (!wire::IsControl(m.header) || wire::DecodeControl(m, &control) != wire::ControlError::kOk ||
      !protocol::DecodeStatus(control, &status)) {
    return std::nullopt;
  }
  return status;
}

// AtpMessageOf: a decoded frame's header and payload as one message.
wire::AtpMessage AtpMessageOf(const wire::FrameFields& fields, const wire::Payload& payload) {
  wire::AtpMessage m;
  m.header = fields.header;
  m.payload = payload;
  return m;
}

// OpBeginOf: the kOpBegin body `frame` carries, if it is one.
std::optional<protocol::OpBeginBody> OpBeginOf(std::span<const uint8_t> frame) {
  const wire::AtpMessage m = Decoded(frame);
  wire::ControlMessage control;
  protocol::OpBeginBody body;
  if (!wire::IsControl(m.header) || wire::DecodeControl(m, &control) != wire::ControlError::kOk ||
      !protocol::DecodeOpBegin(control, &body)) {
    return std::nullopt;
  }
  return body;
}

// FromPs: the PS's frames, in the order it sent them.
class FromPs : public FrameSink {
 public:
  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override {
    Frame f;
    std::copy(frame.begin(), frame.end(), f.begin());
    frames.push_back(f);
  }
  std::vector<Frame> frames;
};

// Node: one worker (one queue), its transport holding what it sends.
struct Node {
  Node(int worker, uint64_t incarnation) : queue(0, ReflectorQueue::Mode::kHold, 16384) {
    WorkerOptions o;
    o.job.job_id = kJob;
    o.job.layout = RackLayout::Uniform(1, kWorkers);
    o.job.io_threads = 1;
    o.job.slots = kSlots;
    o.job.initial_window = 8;
    o.worker_in_rack = worker;
    o.parameter_servers.push_back(kPs);
    WorkerIoLoopConfig config;
    config.self = Address(worker == 0 ? "10.0.0.1" : "10.0.0.2");
    config.ps = kPs;
    config.total_workers = kWorkers;
    config.incarnation = incarnation;
    config.io_threads = 1;
    config.join_at_start = true;
    config.confirm_operations = true;
    auto created = WorkerIoLoop::Create(config, ToWorkerQueueConfig(o, 0), queue);
    EXPECT_TRUE(created.ok()) << created.status();
    loop = *std::move(created);
  }
  // Submit: one operation of kValues, every value `value`.
  std::shared_ptr<internal::OpState> Submit(float value) {
    inputs.emplace_back(kValues, value);
    outputs.emplace_back(kValues, -1.0f);
    auto op = std::make_shared<internal::OpState>(next_op++, 1);
    PieceRequest piece;
    piece.op = op;
    piece.input = inputs.back();
    piece.output = outputs.back();
    piece.fragments = 3;
    piece.op_values = kValues;
    loop->Submit(std::move(piece));
    return op;
  }
  // Sent: the frames sent since the last call.
  std::vector<Frame> Sent() {
    const std::span<const Frame> held = queue.held();
    std::vector<Frame> out(held.begin() + static_cast<std::ptrdiff_t>(taken), held.end());
    taken = held.size();
    return out;
  }

  ReflectorQueue queue;
  std::unique_ptr<WorkerIoLoop> loop;
  size_t taken = 0;
  uint64_t next_op = 1;
  // Each operation's buffers (the spans stay valid as these grow).
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> outputs;
};

class OpConfirmRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = PsShard::Create(PsOptions(), 0, kPs);
    ASSERT_TRUE(created.ok()) << created.status();
    ps_ = std::move(*created);
  }
  static std::unique_ptr<Node> MakeNode(int worker, uint64_t incarnation) {
    auto node = std::make_unique<Node>(worker, incarnation);
    node->inputs.reserve(16);
    node->outputs.reserve(16);
    return node;
  }
  // ToPs: what `node` sent since the last call, to the PS, in order.
  void ToPs(Node& node) {
    for (const Frame& f : node.Sent()) ps_->OnMessage(Decoded(f), now_, from_ps_);
  }
  // ToWorkers: what the PS sent since the last call, to every node (multicast).
  void ToWorkers(const std::vector<Node*>& nodes) {
    for (size_t i = delivered_; i < from_ps_.frames.size(); ++i) {
      for (Node* n : nodes) ASSERT_TRUE(n->queue.InjectRx(from_ps_.frames[i]));
    }
    delivered_ = from_ps_.frames.size();
  }
  // Pump: steps every node, carries frames both ways and moves the clock by
  // 100 us, until every op in `ops` is done or `rounds` ran out.
  void Pump(const std::vector<Node*>& nodes,
            const std::vector<std::shared_ptr<internal::OpState>>& ops, int rounds = 20000) {
    const auto all_done = [&] {
      for (const auto& op : ops) {
        if (!op->done()) return false;
      }
      return true;
    };
    for (int r = 0; r < rounds && !all_done(); ++r) {
      for (Node* n : nodes) n->loop->Step(now_);
      for (Node* n : nodes) ToPs(*n);
      ToWorkers(nodes);
      now_ += TimeDelta::FromMicroseconds(100);
    }
  }

  std::unique_ptr<PsShard> ps_;
  FromPs from_ps_;
  size_t delivered_ = 0;
  TimePoint now_ = TimePoint::FromNanoseconds(1'000'000'000);
};

// AsOlderPs: `frame` as a PS from before StatusBody::run sent it: a
// kOpConfirmed with `run` 0 and no declaration named; other frames as they are.
Frame AsOlderPs(const Frame& frame) {
  std::optional<protocol::StatusBody> status = StatusOf(frame);
  if (!status.has_value() || status->kind != protocol::StatusKind::kOpConfirmed) return frame;
  status->run = 0;
  status->workers = protocol::WorkerSet{};
  status->received = 0;
  wire::FrameFields fields;
  wire::AtpMessage original;
  EXPECT_EQ(wire::DecodeFrame(frame, wire::kDefaultBasePort, &fields, &original.payload),
            wire::DecodeError::kOk);
  wire::ControlMessage control;
  EXPECT_EQ(wire::DecodeControl(AtpMessageOf(fields, original.payload), &control),
            wire::ControlError::kOk);
  protocol::EncodeStatus(*status, control);
  const wire::AtpMessage rewritten =
      wire::MakePsControl(fields.header.job, fields.header.fan_in0, fields.header.fan_in1,
                          fields.header.queue(), fields.header.position(), control);
  fields.header = rewritten.header;
  Frame out;
  wire::EncodeFrame(fields, rewritten.payload, wire::kDefaultBasePort, out);
  return out;
}

// Redeclared: how many of `frames` declare piece `piece` (kOpBegin).
int Redeclared(const std::vector<Frame>& frames, uint64_t piece) {
  int n = 0;
  for (const Frame& f : frames) {
    const std::optional<protocol::OpBeginBody> body = OpBeginOf(f);
    if (body.has_value() && body->piece == piece) ++n;
  }
  return n;
}

TEST_F(OpConfirmRunTest, ALateConfirmationOfTheRunBeforeIsNotANewRunsWorkersOwn) {
  // Run 0 (incarnations 100, 101): two operations, confirmed and exact.
  std::unique_ptr<Node> a1 = MakeNode(0, 100);
  std::unique_ptr<Node> b1 = MakeNode(1, 101);
  const auto op_a1 = a1->Submit(1.0f);
  const auto op_b1 = b1->Submit(2.0f);
  const auto op_a1_next = a1->Submit(1.0f);
  const auto op_b1_next = b1->Submit(2.0f);
  std::array<Frame, 2> b1_declarations{};
  for (Node* n : {a1.get(), b1.get()}) n->loop->Step(now_);
  for (const Frame& f : b1->Sent()) {
    if (const std::optional<protocol::OpBeginBody> body = OpBeginOf(f); body.has_value()) {
      ASSERT_LT(body->piece, 2u);
      b1_declarations[body->piece] = f;
    }
    ps_->OnMessage(Decoded(f), now_, from_ps_);
  }
  Pump({a1.get(), b1.get()}, {op_a1, op_b1, op_a1_next, op_b1_next});
  for (const auto& op : {op_a1, op_b1, op_a1_next, op_b1_next}) {
    ASSERT_TRUE(op->done());
    ASSERT_TRUE(op->status().ok()) << op->status();
  }
  EXPECT_EQ(a1->outputs[1], std::vector<float>(kValues, 3.0f));

  // Resends of worker 1's declarations (their confirmations were late) reach
  // the PS after run 0 is done: it confirms pieces 0 and 1 again, naming
  // those declarations and run 0. The confirmations are on their way.
  std::array<Frame, 2> late{};
  std::array<protocol::StatusBody, 2> late_status{};
  for (uint64_t piece : {0u, 1u}) {
    const size_t before = from_ps_.frames.size();
    ps_->OnMessage(Decoded(b1_declarations[piece]), now_, from_ps_);
    ASSERT_EQ(from_ps_.frames.size(), before + 1);
    late[piece] = from_ps_.frames.back();
    const std::optional<protocol::StatusBody> status = StatusOf(late[piece]);
    ASSERT_TRUE(status.has_value());
    ASSERT_EQ(status->kind, protocol::StatusKind::kOpConfirmed);
    EXPECT_EQ(status->expected, piece);
    EXPECT_EQ(status->workers.ToVector(), std::vector<int>{1});
    EXPECT_EQ(status->received, 101u);
    EXPECT_NE(status->run, 0u);
    late_status[piece] = *status;
  }
  EXPECT_EQ(late_status[0].run, late_status[1].run);
  delivered_ = from_ps_.frames.size();
  a1.reset();
  b1.reset();

  // Run 1 (incarnations 200, 201). Worker 0 starts first and declares piece
  // 0; the late confirmation of piece 0 reaches both workers before the PS
  // saw anything of run 1.
  std::unique_ptr<Node> a2 = MakeNode(0, 200);
  std::unique_ptr<Node> b2 = MakeNode(1, 201);
  const auto op_a2 = a2->Submit(5.0f);
  a2->loop->Step(now_);
  b2->loop->Step(now_);  // joins; no operation yet
  const std::vector<Frame> a2_first = a2->Sent();
  ASSERT_EQ(Redeclared(a2_first, 0), 1);
  for (Node* n : {a2.get(), b2.get()}) ASSERT_TRUE(n->queue.InjectRx(late[0]));
  a2->loop->Step(now_);
  b2->loop->Step(now_);
  // Not its own: worker 0 declares piece 0 again at once, to be answered.
  EXPECT_EQ(Redeclared(a2->Sent(), 0), 1);

  // The PS now gets worker 0's first frames: its join holds the queue back,
  // and its declaration is dropped as another run's (had the late
  // confirmation been taken, worker 0 would never declare piece 0 again and
  // the queue would stall). Then worker 1 joins (the new run's decision)
  // and declares.
  for (const Frame& f : a2_first) ps_->OnMessage(Decoded(f), now_, from_ps_);
  ParameterServerStats stats;
  ps_->AddTo(stats);
  EXPECT_GE(stats.unsynchronized_declarations, 1u);
  ToPs(*b2);
  const auto op_b2 = b2->Submit(7.0f);
  Pump({a2.get(), b2.get()}, {op_a2, op_b2});
  ASSERT_TRUE(op_a2->done()) << "worker 0's queue stalled";
  ASSERT_TRUE(op_b2->done()) << "worker 1's queue stalled";
  ASSERT_TRUE(op_a2->status().ok()) << op_a2->status();
  ASSERT_TRUE(op_b2->status().ok()) << op_b2->status();
  EXPECT_EQ(a2->outputs[0], std::vector<float>(kValues, 12.0f));
  EXPECT_EQ(b2->outputs[0], std::vector<float>(kValues, 12.0f));

  // Worker 0 now knows its run. The late confirmation of piece 1 reaches it
  // once it declared piece 1, before the PS saw that declaration: still not
  // taken (it declares again at once), and the piece completes once the PS
  // confirms it for run 1.
  const auto op_a2_next = a2->Submit(5.0f);
  a2->loop->Step(now_);
  const std::vector<Frame> a2_second = a2->Sent();
  ASSERT_EQ(Redeclared(a2_second, 1), 1);
  ASSERT_TRUE(a2->queue.InjectRx(late[1]));
  a2->loop->Step(now_);
  EXPECT_EQ(Redeclared(a2->Sent(), 1), 1);
  for (const Frame& f : a2_second) ps_->OnMessage(Decoded(f), now_, from_ps_);
  const auto op_b2_next = b2->Submit(7.0f);
  Pump({a2.get(), b2.get()}, {op_a2_next, op_b2_next});
  ASSERT_TRUE(op_a2_next->done() && op_b2_next->done()) << "a queue stalled";
  EXPECT_TRUE(op_a2_next->status().ok()) << op_a2_next->status();
  EXPECT_EQ(a2->outputs[1], std::vector<float>(kValues, 12.0f));

  // Run 1's confirmations name run 1.
  uint64_t run1 = 0;
  for (size_t i = 0; i < from_ps_.frames.size(); ++i) {
    const std::optional<protocol::StatusBody> s = StatusOf(from_ps_.frames[i]);
    if (s.has_value() && s->kind == protocol::StatusKind::kOpConfirmed && s->received >= 200) {
      if (run1 == 0) run1 = s->run;
      EXPECT_EQ(s->run, run1);
    }
  }
  EXPECT_NE(run1, 0u);
  EXPECT_NE(run1, late_status[0].run);
}

TEST_F(OpConfirmRunTest, AnOlderPsConfirmationWithoutARunIsTakenAsBefore) {
  // A PS from before `run`: its confirmations name no run and no
  // declaration; the workers take them by piece, as they always did.
  std::unique_ptr<Node> a = MakeNode(0, 300);
  std::unique_ptr<Node> b = MakeNode(1, 301);
  const auto op_a = a->Submit(1.0f);
  const auto op_b = b->Submit(2.0f);
  size_t rewritten = 0;
  for (int r = 0; r < 20000 && !(op_a->done() && op_b->done()); ++r) {
    for (Node* n : {a.get(), b.get()}) n->loop->Step(now_);
    for (Node* n : {a.get(), b.get()}) ToPs(*n);
    for (; delivered_ < from_ps_.frames.size(); ++delivered_) {
      const Frame older = AsOlderPs(from_ps_.frames[delivered_]);
      if (older != from_ps_.frames[delivered_]) ++rewritten;
      for (Node* n : {a.get(), b.get()}) ASSERT_TRUE(n->queue.InjectRx(older));
    }
    now_ += TimeDelta::FromMicroseconds(100);
  }
  EXPECT_GE(rewritten, 1u) << "the job's confirmation went out as an older PS's";
  ASSERT_TRUE(op_a->done() && op_b->done()) << "a queue stalled";
  EXPECT_TRUE(op_a->status().ok()) << op_a->status();
  EXPECT_EQ(a->outputs[0], std::vector<float>(kValues, 3.0f));
  EXPECT_EQ(b->outputs[0], std::vector<float>(kValues, 3.0f));
}

}  // namespace
}  // namespace atp::host
