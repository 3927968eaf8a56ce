// WorkerIoLoop driven step by step with a fake clock over a ReflectorQueue
// (a transport that answers instantly): frames carry the right addresses and
// ports, results are exact, back-pressure loses nothing, spare transmit
// frames carried from step to step are neither lost nor leaked, rejects are
// counted, and an abandoned piece finishes its operation. On a queue that offloads
// segmentation the loop sends segmentation jobs, and the frames they become
// are byte for byte those of the TxBurst path.
#include "lib/host/worker_io_loop.h"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "atp/quantize.h"
#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/host/clock.h"
#include "testbed/reflector_queue.h"
#include "lib/host/worker_config.h"

namespace atp::host {
namespace {

using testbed::ReflectorQueue;

constexpr TimePoint kT0 = TimePoint::FromNanoseconds(1'000'000'000);

transport::DeviceAddress Address(const char* ip) {
  const wire::Ipv4Address a = *wire::Ipv4Address::Parse(ip);
  return {a, transport::DefaultMacFor(a)};
}

WorkerOptions OneWorkerJob(int workers_in_rack = 1) {
  WorkerOptions o;
  o.job.job_id = 9;
  o.job.layout = RackLayout::Uniform(1, workers_in_rack);
  o.job.io_threads = 4;
  o.job.slots = 64;
  o.job.initial_window = 16;
  o.parameter_servers.push_back(Address("10.0.0.100"));
  return o;
}

std::unique_ptr<WorkerIoLoop> MakeLoop(const WorkerOptions& o, transport::Queue& queue) {
  WorkerIoLoopConfig config;
  config.self = Address("10.0.0.1");
  config.ps = o.parameter_servers[0];
  config.base_port = o.job.base_port;
  config.max_burst = 8;
  config.total_workers = o.job.layout.total_workers();
  absl::StatusOr<std::unique_ptr<WorkerIoLoop>> loop =
      WorkerIoLoop::Create(config, ToWorkerQueueConfig(o, queue.index()), queue);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return *std::move(loop);
}

std::vector<float> Values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Expected: what a one-worker job returns: dequantize(quantize(x)).
std::vector<float> RoundTrip(const std::vector<float>& in, double scale) {
  std::vector<int32_t> q(in.size());
  Quantize(in, scale, q);
  std::vector<float> out(in.size());
  Dequantize(q, scale, out);
  return out;
}

// StepUntilDone: steps until `op` is done or `max_steps` ran; 10 us per step.
TimePoint StepUntilDone(WorkerIoLoop& loop, const internal::OpState& op, TimePoint now,
              int max_steps = 100000) {
  for (int i = 0; i < max_steps && !op.done(); ++i) {
    loop.Step(now);
    now += TimeDelta::FromMicroseconds(10);
  }
  return now;
}

PieceRequest Piece(std::shared_ptr<internal::OpState> op, const std::vector<float>& in,
                   std::vector<float>& out, Reduction reduction = Reduction::kSum) {
  PieceRequest p;
  p.op = std::move(op);
  p.input = in;
  p.output = out;
  p.reduction = reduction;
  p.fragments = (in.size() + 61) / 62;
  return p;
}

TEST(WorkerIoLoopTest, PieceFarBeyondOneWindowCompletesWithTheExactResult) {
  ReflectorQueue queue(2, ReflectorQueue::Mode::kReflect);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(62 * 500 + 7, 1);
  std::vector<float> out(in.size(), -100.0f);
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out));
  StepUntilDone(*loop, *op, kT0);
  ASSERT_TRUE(op->done());
  EXPECT_TRUE(op->status().ok());
  EXPECT_EQ(out, RoundTrip(in, o.job.scale));
  const WorkerQueueStatistics s = loop->statistics();
  EXPECT_EQ(s.fragments_sent, 501u);
  EXPECT_EQ(s.parameter_packets, 501u);
  EXPECT_EQ(s.frames_sent, 501u);
  EXPECT_EQ(s.retransmissions, 0u);
  EXPECT_EQ(s.fragments_assigned, 501u);
}

TEST(WorkerIoLoopTest, FramesGoFromThisNodeToThePsOnTheQueuesPort) {
  ReflectorQueue queue(3, ReflectorQueue::Mode::kHold);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(62 * 4, 2);
  std::vector<float> out(in.size());
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out));
  loop->Step(kT0);
  ASSERT_EQ(queue.held().size(), 4u);
  for (size_t i = 0; i < queue.held().size(); ++i) {
    wire::FrameFields fields;
    wire::Payload payload;
    ASSERT_EQ(wire::DecodeFrame(queue.held()[i], o.job.base_port, &fields, &payload),
              wire::DecodeError::kOk);
    EXPECT_EQ(fields.src_ip, Address("10.0.0.1").ipv4);
    EXPECT_EQ(fields.src_mac, Address("10.0.0.1").mac);
    EXPECT_EQ(fields.dst_ip, o.parameter_servers[0].ipv4);
    EXPECT_EQ(fields.dst_mac, o.parameter_servers[0].mac);
    EXPECT_EQ(fields.header.job, 9);
    EXPECT_EQ(fields.header.queue(), 3u);
    EXPECT_EQ(fields.header.position(), i);
    EXPECT_FALSE(fields.header.ack);
  }
  EXPECT_FALSE(op->done());
  queue.ReleaseHeld();
  StepUntilDone(*loop, *op, kT0 + TimeDelta::FromMicroseconds(10));
  ASSERT_TRUE(op->done());
  EXPECT_EQ(out, RoundTrip(in, o.job.scale));
}

TEST(WorkerIoLoopTest, FramesAreByteForByteWhatWireEncodeFrameWrites) {
  // The loop encodes the L2-L4 headers once and only the ATP header and
  // payload per frame; the result must equal wire::EncodeFrame's.
  ReflectorQueue queue(5, ReflectorQueue::Mode::kHold);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  std::vector<float> in = Values(62 * 3, 7);
  in[70] = std::numeric_limits<float>::infinity();  // fragment 1 goes as fp
  std::vector<float> out(in.size());
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out));
  loop->Step(kT0);
  ASSERT_EQ(queue.held().size(), 3u);
  for (const ReflectorQueue::Frame& frame : queue.held()) {
    wire::FrameFields fields;
    wire::Payload payload;
    ASSERT_EQ(wire::DecodeFrame(frame, o.job.base_port, &fields, &payload),
              wire::DecodeError::kOk);
    ReflectorQueue::Frame expected{};
    wire::EncodeFrame(fields, payload, o.job.base_port, expected);
    EXPECT_EQ(frame, expected);
  }
}

TEST(WorkerIoLoopTest, AverageDividesTheSumByTheWorkerCount) {
  ReflectorQueue queue(0, ReflectorQueue::Mode::kReflect);
  WorkerOptions o = OneWorkerJob(/*workers_in_rack=*/4);
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(300, 3);
  std::vector<float> out(in.size());
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out, Reduction::kAverage));
  StepUntilDone(*loop, *op, kT0);
  ASSERT_TRUE(op->done());
  // The reflector's answer is this worker's own contribution: the "sum".
  std::vector<float> expected = RoundTrip(in, o.job.scale);
  for (float& v : expected) v /= 4.0f;
  EXPECT_EQ(out, expected);
}

TEST(WorkerIoLoopTest, BackPressureLosesNothing) {
  // The receive side holds 3 frames: TxBurst takes only part of most bursts.
  ReflectorQueue queue(1, ReflectorQueue::Mode::kReflect, /*capacity=*/3);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(62 * 200, 4);
  std::vector<float> out(in.size());
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out));
  StepUntilDone(*loop, *op, kT0);
  ASSERT_TRUE(op->done());
  EXPECT_EQ(out, RoundTrip(in, o.job.scale));
  EXPECT_GT(queue.stats().tx_backpressure, 0u);
  EXPECT_EQ(loop->statistics().retransmissions, 0u);
}

TEST(WorkerIoLoopTest, OneFrameAStepKeepsItsSpareFramesAndLosesNone) {
  // A window of one: each step sends one frame out of a burst of 8 allocated,
  // so the spares carry over step after step, past several bursts' worth.
  ReflectorQueue queue(0, ReflectorQueue::Mode::kReflect);
  WorkerOptions o = OneWorkerJob();
  o.job.initial_window = 1;
  o.job.congestion_control = CongestionControl::kFixedWindow;
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(62 * 40, 9);
  std::vector<float> out(in.size());
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out));
  const size_t pool_frames = queue.tx_pool().capacity();
  TimePoint now = kT0;
  for (int step = 0; step < 1000 && !op->done(); ++step) {
    loop->Step(now);
    now += TimeDelta::FromMicroseconds(10);
    // The queue gives every sent frame back at once: the pool's buffers are
    // free or the loop's spares, never more than a burst of them.
    ASSERT_LE(loop->spare_tx_frames(), 8u) << step;
    ASSERT_EQ(queue.tx_pool().free_count() + loop->spare_tx_frames(), pool_frames) << step;
  }
  ASSERT_TRUE(op->done());
  EXPECT_EQ(out, RoundTrip(in, o.job.scale));
  const WorkerQueueStatistics s = loop->statistics();
  EXPECT_EQ(s.frames_sent, 40u);
  EXPECT_EQ(s.retransmissions, 0u);
  loop.reset();
  EXPECT_EQ(queue.tx_pool().free_count(), pool_frames) << "the spares go back with the loop";
}

TEST(WorkerIoLoopTest, ManyPiecesFinishTheirOwnOperations) {
  ReflectorQueue queue(0, ReflectorQueue::Mode::kReflect);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  std::vector<std::vector<float>> ins, outs;
  std::vector<std::shared_ptr<internal::OpState>> ops;
  for (uint32_t i = 0; i < 20; ++i) {
    ins.push_back(Values(1 + i * 97, 10 + i));
    outs.emplace_back(ins.back().size());
    ops.push_back(std::make_shared<internal::OpState>(i + 1, 1));
  }
  for (size_t i = 0; i < ops.size(); ++i) loop->Submit(Piece(ops[i], ins[i], outs[i]));
  StepUntilDone(*loop, *ops.back(), kT0);
  for (size_t i = 0; i < ops.size(); ++i) {
    ASSERT_TRUE(ops[i]->done()) << i;
    EXPECT_EQ(outs[i], RoundTrip(ins[i], o.job.scale)) << i;
  }
}

TEST(WorkerIoLoopTest, RejectedFramesAreCountedAndIgnored) {
  ReflectorQueue queue(0, ReflectorQueue::Mode::kHold);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  std::vector<uint8_t> garbage(wire::kFrameBytes, 0xAB);
  ASSERT_TRUE(queue.InjectRx(garbage));
  loop->Step(kT0);
  const WorkerQueueStatistics s = loop->statistics();
  EXPECT_EQ(s.frames_received, 1u);
  EXPECT_EQ(s.decode_errors, 1u);
  EXPECT_EQ(s.parameter_packets, 0u);
}

TEST(WorkerIoLoopTest, ExpiredTimerResendsAndTheDeadlineSaysWhen) {
  ReflectorQueue queue(0, ReflectorQueue::Mode::kHold);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(62, 5);
  std::vector<float> out(in.size());
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out));
  const StepResult first = loop->Step(kT0);
  ASSERT_EQ(queue.held().size(), 1u);
  ASSERT_FALSE(first.deadline.IsInfinite());
  // The initial RTO, stretched by the engine's timer jitter (at most 25%).
  const TimeDelta initial_rto = ToTimeDelta(o.job.initial_retransmission_timeout);
  EXPECT_GE(first.deadline, kT0 + initial_rto);
  EXPECT_LT(first.deadline, kT0 + initial_rto + initial_rto / 4);
  loop->Step(first.deadline);
  ASSERT_EQ(queue.held().size(), 2u);  // the resend
  wire::FrameFields fields;
  ASSERT_EQ(wire::DecodeFrame(queue.held()[1], o.job.base_port, &fields, nullptr),
            wire::DecodeError::kOk);
  EXPECT_TRUE(fields.header.resend);
  queue.ReleaseHeld();
  StepUntilDone(*loop, *op, first.deadline + TimeDelta::FromMicroseconds(1));
  ASSERT_TRUE(op->done());
  EXPECT_EQ(out, RoundTrip(in, o.job.scale));
}

TEST(WorkerIoLoopTest, AbandonFinishesPendingOperationsWithTheStatus) {
  ReflectorQueue queue(0, ReflectorQueue::Mode::kHold);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(620, 6);
  std::vector<float> out(in.size());
  auto in_engine = std::make_shared<internal::OpState>(1, 1);
  auto in_inbox = std::make_shared<internal::OpState>(2, 1);
  loop->Submit(Piece(in_engine, in, out));
  loop->Step(kT0);
  loop->Submit(Piece(in_inbox, in, out));
  loop->Abandon(absl::CancelledError("stop"));
  EXPECT_TRUE(absl::IsCancelled(in_engine->status()));
  EXPECT_TRUE(absl::IsCancelled(in_inbox->status()));
}

// A queue that offloads segmentation (as kernel UDP GSO and mlx5 TSO do).
constexpr transport::TxSegmentation kOffload = transport::TxSegmentation::kKernelGso;

TEST(WorkerIoLoopTest, OffloadingQueueGetsSegmentationJobsAndExactResults) {
  ReflectorQueue queue(2, ReflectorQueue::Mode::kReflect, 4096, kOffload);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(62 * 500 + 7, 1);
  std::vector<float> out(in.size(), -100.0f);
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out));
  StepUntilDone(*loop, *op, kT0);
  ASSERT_TRUE(op->done());
  EXPECT_EQ(out, RoundTrip(in, o.job.scale));
  const transport::QueueStats q = queue.stats();
  EXPECT_EQ(q.tx_offloaded_segments, 501u);
  // Runs of several segments, not one job per fragment: the window (16)
  // opens in bursts of the loop's max_burst (8).
  EXPECT_GT(q.tx_segmentation_jobs, 0u);
  EXPECT_LT(q.tx_segmentation_jobs, 501u / 2);
  EXPECT_EQ(loop->statistics().frames_sent, 501u);
}

TEST(WorkerIoLoopTest, SegmentedFramesAreByteForByteTheTxBurstOnes) {
  // The same piece through both paths, with an fp fragment (its header
  // differs, so it breaks the run) and a tail fragment.
  std::vector<float> in = Values(62 * 20 + 5, 8);
  in[62 * 7 + 3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<ReflectorQueue::Frame>> sent;
  for (transport::TxSegmentation mode : {transport::TxSegmentation::kSoftware, kOffload}) {
    ReflectorQueue queue(4, ReflectorQueue::Mode::kHold, 4096, mode);
    WorkerOptions o = OneWorkerJob();
    o.job.initial_window = 64;
    auto loop = MakeLoop(o, queue);
    std::vector<float> out(in.size());
    auto op = std::make_shared<internal::OpState>(1, 1);
    loop->Submit(Piece(op, in, out));
    loop->Step(kT0);
    sent.emplace_back(queue.held().begin(), queue.held().end());
    EXPECT_EQ(queue.stats().tx_segmentation_jobs > 0, mode == kOffload);
  }
  ASSERT_EQ(sent[0].size(), 21u);
  EXPECT_EQ(sent[0], sent[1]);
}

TEST(WorkerIoLoopTest, SegmentationBackPressureLosesNothing) {
  ReflectorQueue queue(1, ReflectorQueue::Mode::kReflect, /*capacity=*/3, kOffload);
  WorkerOptions o = OneWorkerJob();
  auto loop = MakeLoop(o, queue);
  const std::vector<float> in = Values(62 * 200, 4);
  std::vector<float> out(in.size());
  auto op = std::make_shared<internal::OpState>(1, 1);
  loop->Submit(Piece(op, in, out));
  StepUntilDone(*loop, *op, kT0);
  ASSERT_TRUE(op->done());
  EXPECT_EQ(out, RoundTrip(in, o.job.scale));
  EXPECT_GT(queue.stats().tx_backpressure, 0u);
  EXPECT_EQ(loop->statistics().retransmissions, 0u);
}

}  // namespace
}  // namespace atp::host
