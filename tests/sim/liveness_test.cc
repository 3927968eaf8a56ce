// Liveness (ATP-SPEC section 8, invariant 3): every job of every valid
// configuration finishes, also without random loss, where only tail drops
// lose frames. The runs attack the patterns that once stalled a job forever
// or for seconds (see docs/protocol.md, "Liveness under tail drop"): egress
// queues smaller than the number of frames that arrive together, incast of
// unaggregated float32 fragments, heavy duplication, several jobs on one
// bottleneck, and a seeded random sweep of configurations. Each run is
// bounded in simulated time; the whole file takes about 2 s (RelWithDebInfo).
#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "sim/experiment.h"
#include "sim/random.h"

namespace atp::sim {
namespace {

// kBound: simulated time a run may take (a stalled job never finishes; the
// bound costs no wall time unless it is reached). The slowest run here, of
// the sweep, needs about 9 s: with forward-only switches, window 1 and
// two-frame queues, every position's first transmissions are an incast that
// loses all but two of them, so each position costs a timeout (see
// docs/protocol.md). The named cases need at most 0.5 s.
constexpr TimeDelta kBound = TimeDelta::FromSeconds(60);

struct Shape {
  int racks = 1;
  int workers = 4;
  int jobs = 1;
};

// Lossless: `shape`'s jobs of `fragments` fragments each, every egress queue
// `queue_frames` frames, no random loss.
ExperimentConfig Lossless(Shape shape, uint32_t queue_frames, size_t fragments) {
  ExperimentConfig config;
  config.topology.worker_racks = shape.racks;
  for (int j = 0; j < shape.jobs; ++j) {
    config.topology.jobs.push_back(
        JobPlacement{.job = static_cast<uint8_t>(j + 1),
                     .workers_per_rack = SpreadEvenly(shape.workers, shape.racks)});
  }
  config.topology.host_link.queue_capacity_packets = queue_frames;
  config.topology.fabric_link.queue_capacity_packets = queue_frames;
  config.workload.values = 62 * fragments;
  config.workload.start_jitter = TimeDelta::FromMicroseconds(10);
  config.time_limit = kBound;
  config.seed = 5;
  return config;
}

// Describe: what a failing run was, for the failure message.
std::string Describe(const ExperimentConfig& c) {
  const TopologyConfig& t = c.topology;
  int workers = 0;
  for (int w : t.jobs.front().workers_per_rack) workers += w;
  return absl::StrCat("racks=", t.worker_racks, " jobs=", t.jobs.size(), " workers/job=", workers,
                      " queue=", t.host_link.queue_capacity_packets,
                      " window=", t.worker.initial_window, " slots=", t.worker.slots,
                      " aggregators=", t.switches.aggregators,
                      " levels=", static_cast<int>(t.aggregation),
                      " cc=", static_cast<int>(t.worker.congestion_control),
                      " values=", c.workload.values, " overflow_every=", c.workload.overflow_every,
                      " duplicate=", c.impairments.duplicate, " partitions=", t.partitions,
                      " seed=", c.seed);
}

// ExpectFinishesExactly: the run completes within kBound, every result exact.
ExperimentResult ExpectFinishesExactly(const ExperimentConfig& config) {
  auto experiment = Experiment::Create(config);
  EXPECT_TRUE(experiment.ok()) << experiment.status() << " " << Describe(config);
  if (!experiment.ok()) return {};
  ExperimentResult result = (*experiment)->Run();
  EXPECT_TRUE(result.completed) << Describe(config);
  EXPECT_TRUE(result.exact) << Describe(config);
  for (const JobResult& job : result.jobs) {
    EXPECT_TRUE(job.exact) << "job " << +job.job << ": " << job.first_error << " "
                           << Describe(config);
  }
  return result;
}

// atp-sim --queue_frames=1, the default 4-worker job (4229 fragments): it
// stalled after 394 fragments because every worker's timer fired in the same
// nanosecond and the one-frame queue toward the PS kept the same worker's
// resend every round. The job's traffic reached the PS through collisions
// of its own slots; since a job's slots take one run of aggregator indices
// (lib/protocol/aggregator_index.h) they do not collide with an aggregator
// per slot, so the switch gets fewer aggregators than slots here.
TEST(LivenessTest, DefaultJobThroughOneFrameQueuesFinishes) {
  ExperimentConfig config = Lossless({.racks = 1, .workers = 4}, 1, 4229);
  config.topology.switches.aggregators = 64;
  const ExperimentResult result = ExpectFinishesExactly(config);
  EXPECT_GT(result.tail_drops, 0u);  // the queues did overflow
}

struct TinyQueueCase {
  Shape shape;
  uint32_t queue_frames;
};

class TinyQueueTest : public ::testing::TestWithParam<TinyQueueCase> {};

TEST_P(TinyQueueTest, EveryJobFinishesExactly) {
  const TinyQueueCase& c = GetParam();
  ExpectFinishesExactly(Lossless(c.shape, c.queue_frames, 200));
}

INSTANTIATE_TEST_SUITE_P(
    Queues, TinyQueueTest,
    ::testing::Values(TinyQueueCase{{1, 4, 1}, 2}, TinyQueueCase{{1, 4, 1}, 3},
                      TinyQueueCase{{2, 8, 1}, 1}, TinyQueueCase{{2, 8, 1}, 2},
                      TinyQueueCase{{4, 16, 1}, 3}, TinyQueueCase{{4, 32, 1}, 1}));

// Float32 fragments are never aggregated by switches (rule 3): every worker's
// copy reaches the PS, fan-in frames per position into queues smaller than
// the fan-in, and every overflow request is multicast to every worker.
TEST(LivenessTest, FloatPathIncastIntoAQueueSmallerThanTheFanInFinishes) {
  ExperimentConfig config = Lossless({.racks = 1, .workers = 8}, 4, 200);
  config.workload.overflow_every = 1;
  ExpectFinishesExactly(config);
  config = Lossless({.racks = 2, .workers = 16}, 4, 200);
  config.workload.overflow_every = 3;
  ExpectFinishesExactly(config);
  config = Lossless({.racks = 2, .workers = 8}, 2, 200);
  config.workload.overflow_every = 1;
  ExpectFinishesExactly(config);
}

TEST(LivenessTest, HeavyDuplicationIntoTinyQueuesFinishes) {
  ExperimentConfig config = Lossless({.racks = 1, .workers = 4}, 4, 200);
  config.impairments.duplicate = 0.5;
  ExpectFinishesExactly(config);
  config = Lossless({.racks = 2, .workers = 8}, 2, 200);
  config.impairments.duplicate = 0.9;
  const ExperimentResult result = ExpectFinishesExactly(config);
  EXPECT_GT(result.filter_actions, 0u);
}

TEST(LivenessTest, SeveralJobsOnOneBottleneckFinish) {
  ExperimentConfig config = Lossless({.racks = 2, .workers = 4, .jobs = 8}, 2, 200);
  config.topology.switches.aggregators = 64;  // collisions too
  ExpectFinishesExactly(config);
  config = Lossless({.racks = 2, .workers = 8, .jobs = 4}, 1, 200);
  ExpectFinishesExactly(config);
}

// A seeded random sweep over the knobs that shape tail drops: racks, workers,
// jobs, queue sizes, windows, slots, aggregators, aggregation levels, CC,
// the float path and duplication, on one thread or two (partitions).
// Deterministic: the same list every run.
TEST(LivenessTest, RandomSweepOfLosslessConfigurationsFinishes) {
  constexpr int kRuns = 40;
  Random random(20261201);
  for (int run = 0; run < kRuns; ++run) {
    Shape shape;
    shape.racks = 1 + static_cast<int>(random.Below(4));
    shape.workers = shape.racks + static_cast<int>(random.Below(static_cast<uint64_t>(
                                      std::min(16, 32 * shape.racks) - shape.racks + 1)));
    shape.jobs = 1 + static_cast<int>(random.Below(3));
    const uint32_t queue = 1 + static_cast<uint32_t>(random.Below(16));
    const size_t fragments = 1 + random.Below(150);
    ExperimentConfig config = Lossless(shape, queue, fragments);
    config.seed = 100 + static_cast<uint64_t>(run);
    config.workload.seed = config.seed;
    worker::WorkerQueueConfig& w = config.topology.worker;
    w.slots = 1u << random.Below(9);  // 1..256
    w.initial_window = 1 + static_cast<uint32_t>(random.Below(w.slots));
    w.congestion_control = random.Chance(0.5) ? worker::CongestionController::Mode::kAimd
                                              : worker::CongestionController::Mode::kFixedWindow;
    config.topology.switches.aggregators = random.Chance(0.5) ? 64 : 4096;
    const uint64_t levels = random.Below(3);
    config.topology.aggregation = levels == 0   ? AggregationMode::kTwoLevel
                                  : levels == 1 ? AggregationMode::kRackOnly
                                                : AggregationMode::kNone;
    const uint32_t overflow_choices[] = {0, 0, 1, 3, 17};
    config.workload.overflow_every = overflow_choices[random.Below(5)];
    const double duplicate_choices[] = {0.0, 0.0, 0.1, 0.5};
    config.impairments.duplicate = duplicate_choices[random.Below(4)];
    // Every other multi-rack run on two threads (sim/network.h), without a
    // draw, so the sweep's configurations stay the ones they were.
    if (shape.racks >= 2 && run % 2 == 0) config.topology.partitions = 2;
    SCOPED_TRACE(absl::StrCat("sweep run ", run));
    ExpectFinishesExactly(config);
  }
}

}  // namespace
}  // namespace atp::sim
