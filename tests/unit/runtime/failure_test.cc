// Named failures on a small in-process job over loopback (atp/failure.h):
// a worker that never issues the operation is named by the PS to the others,
// which fail within the stall time and stay unusable; the PS then releases
// the partial state; a PS that is not there fails the operation as
// unreachable; an EmbeddedParameterServer, driven by a framework thread of
// the test, names the missing worker like the threaded PS. Short stall times
// (400 ms) keep each case under a second.
#include "atp/failure.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "atp/parameter_server.h"
#include "atp/transport.h"
#include "atp/transport/frame_pool.h"
#include "atp/worker.h"
#include "gtest/gtest.h"
#include "testbed/local_cluster.h"
#include "tests/unit/runtime/local_job_checks.h"

namespace atp {
namespace {

using testbed::FabricAggregation;
using testbed::LocalCluster;
using testbed::LocalJob;
using testing::EventuallyStats;

constexpr absl::Duration kStall = absl::Milliseconds(400);
// Far beyond the stall time: a handle still running then is a hang.
constexpr absl::Duration kDeadline = absl::Seconds(30);

std::unique_ptr<LocalCluster> Cluster(int workers, bool start_ps) {
  LocalJob job = testing::SmallJob(/*job_id=*/3, workers, kStall);
  job.ps_orphan_timeout = absl::Milliseconds(200);
  job.start_parameter_servers = start_ps;
  // No switch: the PS sees every worker's contribution.
  return testing::StartCluster(std::move(job), FabricAggregation::kNone);
}

// PushPullWithoutWorker2: workers 0 and 1 of the cluster's job push `in`
// into out[0] and out[1]; worker 2 never issues the operation.
void PushPullWithoutWorker2(LocalCluster& cluster, const std::vector<float>& in,
                            std::vector<std::vector<float>>& out, std::vector<Handle>& handles) {
  for (size_t w = 0; w < 2; ++w) {
    absl::StatusOr<Handle> h = cluster.worker(0, w).PushPull(in, out[w]);
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*h);
  }
}

// ExpectWaitingForWorker2: `status` is the named failure "the PS waits for
// worker 2".
void ExpectWaitingForWorker2(const absl::Status& status) {
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  const std::optional<Failure> failure = FailureOf(status);
  ASSERT_TRUE(failure.has_value()) << status;
  EXPECT_EQ(failure->kind, FailureKind::kWaitingForWorkers) << status;
  EXPECT_EQ(failure->workers, (std::vector<int>{2})) << status;
}

TEST(FailureTest, ADeadWorkerIsNamedToTheOthersAndThePsReleasesItsState) {
  auto cluster = Cluster(/*workers=*/3, /*start_ps=*/true);
  ASSERT_NE(cluster, nullptr);
  std::vector<float> in(2000, 0.5f);
  std::vector<std::vector<float>> out(2, std::vector<float>(in.size()));
  std::vector<Handle> handles;
  ASSERT_NO_FATAL_FAILURE(PushPullWithoutWorker2(*cluster, in, out, handles));
  const absl::Time started = absl::Now();
  for (size_t w = 0; w < 2; ++w) {
    const absl::Status status = handles[w].Wait(kDeadline);
    ExpectWaitingForWorker2(status);
    EXPECT_NE(status.message().find("waits for worker(s) 2"), absl::string_view::npos) << status;
  }
  // Not a hang: failed within a few stall times (generous for loaded CI).
  EXPECT_LT(absl::Now() - started, kStall * 20);

  // The Worker is unusable and says why.
  std::vector<float> again(in.size());
  absl::StatusOr<Handle> refused = cluster->worker(0, 0).PushPull(in, again);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(FailureOf(refused.status()).has_value());
  EXPECT_EQ(FailureOf(refused.status())->kind, FailureKind::kWaitingForWorkers);

  // The PS told them, and releases the partial state once they went quiet.
  EXPECT_TRUE(EventuallyStats(*cluster, kDeadline, [](const ParameterServerStats& s) {
    return s.status_sent > 0 && s.orphans_released > 0;
  }));
}

// QueueSink: sends what the embedded PS produces on the queue the frame came in on.
class QueueSink final : public FrameSink {
 public:
  explicit QueueSink(transport::Queue& queue) : queue_(queue) {}
  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override {
    transport::FrameRef ref;
    if (queue_.tx_pool().AllocBurst({&ref, 1}) == 0) return;  // dropped: workers resend
    std::memcpy(ref.data, frame.data(), frame.size());
    ref.length = wire::kFrameBytes;
    if (queue_.TxBurst({&ref, 1}) == 0) transport::ReleaseFrames({&ref, 1});
    queue_.Flush();
  }

 private:
  transport::Queue& queue_;
};

// FrameworkThread: a framework's receive loop handing every frame of the PS
// device to an EmbeddedParameterServer; stopped and joined when destroyed.
class FrameworkThread {
 public:
  FrameworkThread(EmbeddedParameterServer& ps, transport::Device& device)
      : thread_([this, &ps, &device] {
          std::vector<QueueSink> sinks;
          for (uint32_t q = 0; q < device.num_queues(); ++q) sinks.emplace_back(device.queue(q));
          transport::FrameRef burst[32];
          while (!stop_.load(std::memory_order_acquire)) {
            size_t handled = 0;
            for (uint32_t q = 0; q < device.num_queues(); ++q) {
              const size_t n = device.queue(q).RxBurst(burst);
              for (size_t k = 0; k < n; ++k) ps.HandleFrame(burst[k].bytes(), sinks[q]);
              transport::ReleaseFrames({burst, n});
              handled += n;
            }
            // The framework's idle policy, not synchronisation: a short nap.
            if (handled == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
          }
        }) {}
  ~FrameworkThread() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(FailureTest, AnEmbeddedParameterServerNamesTheWorkersItWaitsFor) {
  auto cluster = Cluster(/*workers=*/3, /*start_ps=*/false);
  ASSERT_NE(cluster, nullptr);
  ParameterServerOptions options;
  ParameterServerJobOptions job;
  job.job_id = 3;
  job.layout = RackLayout::Uniform(1, 3);
  job.delivery = ParameterDelivery::kMulticast;
  job.multicast_group = LocalCluster::GroupAddress(3);
  options.jobs.push_back(job);
  options.slots = 64;
  options.io_threads = 1;
  options.orphan_timeout = absl::Milliseconds(200);
  options.waiting_report_interval = kStall / 4;
  transport::Device& device = cluster->parameter_server_device(0, 0);
  absl::StatusOr<std::unique_ptr<EmbeddedParameterServer>> ps =
      EmbeddedParameterServer::Create(options, device.address());
  ASSERT_TRUE(ps.ok()) << ps.status();
  FrameworkThread framework(**ps, device);

  std::vector<float> in(2000, 0.5f);
  std::vector<std::vector<float>> out(2, std::vector<float>(in.size()));
  std::vector<Handle> handles;
  ASSERT_NO_FATAL_FAILURE(PushPullWithoutWorker2(*cluster, in, out, handles));
  for (size_t w = 0; w < 2; ++w) {
    const absl::Status status = handles[w].Wait(kDeadline);
    ExpectWaitingForWorker2(status);
  }
  EXPECT_GT((*ps)->stats().status_sent, 0u);
}

TEST(FailureTest, AnAbsentParameterServerIsUnreachable) {
  auto cluster = Cluster(/*workers=*/2, /*start_ps=*/false);
  ASSERT_NE(cluster, nullptr);
  std::vector<float> in(500, 1.0f);
  std::vector<float> out(in.size());
  absl::StatusOr<Handle> h = cluster->worker(0, 0).PushPull(in, out);
  ASSERT_TRUE(h.ok()) << h.status();
  const absl::Status status = h->Wait(kDeadline);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  const std::optional<Failure> failure = FailureOf(status);
  ASSERT_TRUE(failure.has_value()) << status;
  EXPECT_EQ(failure->kind, FailureKind::kPsUnreachable);
  EXPECT_NE(status.message().find("unreachable"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("stall_timeout"), absl::string_view::npos) << status;
}

TEST(FailureTest, AStallTimeBelowTwoRetransmissionTimeoutsIsRefused) {
  JobOptions job;
  job.job_id = 1;
  job.layout = RackLayout::Uniform(1, 1);
  job.max_retransmission_timeout = absl::Seconds(1);
  job.stall_timeout = absl::Milliseconds(1500);
  const absl::Status status = job.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("JobOptions.stall_timeout"), absl::string_view::npos) << status;
  job.stall_timeout = absl::InfiniteDuration();
  EXPECT_TRUE(job.Validate().ok());
}

}  // namespace
}  // namespace atp
