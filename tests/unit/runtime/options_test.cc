// Options: every bad field is refused at creation with a message naming it.
#include "atp/options.h"

#include <string>
#include <utility>

#include "atp/parameter_server.h"
#include "atp/transport/loopback.h"
#include "atp/transport_factory.h"
#include "atp/worker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace atp {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

WorkerOptions GoodWorker() {
  WorkerOptions o;
  o.job.job_id = 3;
  o.job.layout = RackLayout::Uniform(2, 2);
  o.job.io_threads = 2;
  o.rack = 1;
  o.worker_in_rack = 1;
  o.parameter_servers.push_back({*wire::Ipv4Address::Parse("10.0.0.1"), {}});
  return o;
}

ParameterServerOptions GoodPs() {
  ParameterServerOptions o;
  ParameterServerJobOptions job;
  job.job_id = 3;
  job.layout = RackLayout::Uniform(1, 2);
  job.delivery = ParameterDelivery::kUnicast;
  job.workers = {{*wire::Ipv4Address::Parse("10.0.0.2"), {}},
                 {*wire::Ipv4Address::Parse("10.0.0.3"), {}}};
  o.jobs.push_back(job);
  return o;
}

TEST(OptionsTest, GoodOptionsValidate) {
  EXPECT_TRUE(GoodWorker().Validate().ok()) << GoodWorker().Validate();
  EXPECT_TRUE(GoodPs().Validate().ok()) << GoodPs().Validate();
}

TEST(OptionsTest, RackLayoutRanksAreRackMajor) {
  RackLayout layout;
  layout.workers_per_rack = {3, 1, 2};
  EXPECT_EQ(layout.total_workers(), 6);
  EXPECT_EQ(layout.RankOf(0, 2), 2);
  EXPECT_EQ(layout.RankOf(1, 0), 3);
  EXPECT_EQ(layout.RankOf(2, 1), 5);
  // No such worker: -1, never a rank read past the racks.
  EXPECT_EQ(layout.RankOf(1, 1), -1);
  EXPECT_EQ(layout.RankOf(3, 0), -1);
  EXPECT_EQ(layout.RankOf(100000000, 0), -1);
  EXPECT_EQ(layout.RankOf(-1, 0), -1);
  EXPECT_EQ(layout.RankOf(0, -1), -1);
}

TEST(OptionsTest, AUniformLayoutOutOfRangeIsRefusedNotWrapped) {
  EXPECT_TRUE(RackLayout::Uniform(2, 32).Validate().ok());
  // 258 workers would be 2 as a byte; -254 likewise.
  for (const auto& [racks, workers] : {std::pair{1, 258}, std::pair{2, -254}, std::pair{1, 0},
                                       std::pair{0, 2}, std::pair{1000000000, 2}}) {
    EXPECT_FALSE(RackLayout::Uniform(racks, workers).Validate().ok()) << racks << " x " << workers;
  }
}

struct WorkerCase {
  const char* field;
  void (*mutate)(WorkerOptions&);
};

TEST(OptionsTest, EachBadWorkerFieldIsNamed) {
  const WorkerCase cases[] = {
      {"WorkerOptions.job.job_id", [](WorkerOptions& o) { o.job.job_id = 0; }},
      {"WorkerOptions.job.layout.workers_per_rack[1]",
       [](WorkerOptions& o) { o.job.layout.workers_per_rack[1] = 33; }},
      {"WorkerOptions.job.layout.workers_per_rack",
       [](WorkerOptions& o) { o.job.layout.workers_per_rack.clear(); }},
      {"WorkerOptions.job.io_threads", [](WorkerOptions& o) { o.job.io_threads = 17; }},
      {"WorkerOptions.job.scale", [](WorkerOptions& o) { o.job.scale = -1; }},
      {"WorkerOptions.job.scale", [](WorkerOptions& o) { o.job.scale = 1e-300; }},
      {"WorkerOptions.job.scale", [](WorkerOptions& o) { o.job.scale = kMinScale / 2; }},
      {"WorkerOptions.job.slots", [](WorkerOptions& o) { o.job.slots = 300; }},
      {"WorkerOptions.job.initial_window",
       [](WorkerOptions& o) { o.job.initial_window = o.job.slots + 1; }},
      {"WorkerOptions.job.retransmission_floor",
       [](WorkerOptions& o) { o.job.retransmission_floor = absl::ZeroDuration(); }},
      {"WorkerOptions.job.initial_retransmission_timeout",
       [](WorkerOptions& o) { o.job.initial_retransmission_timeout = absl::Microseconds(1); }},
      {"WorkerOptions.job.max_retransmission_timeout",
       [](WorkerOptions& o) { o.job.max_retransmission_timeout = absl::Milliseconds(2); }},
      {"WorkerOptions.job.base_port", [](WorkerOptions& o) { o.job.base_port = 65530; }},
      {"WorkerOptions.job.scheduler.max_piece_fragments",
       [](WorkerOptions& o) { o.job.scheduler.max_piece_fragments = 1; }},
      {"WorkerOptions.rack", [](WorkerOptions& o) { o.rack = 2; }},
      {"WorkerOptions.worker_in_rack", [](WorkerOptions& o) { o.worker_in_rack = -1; }},
      {"WorkerOptions.parameter_servers", [](WorkerOptions& o) { o.parameter_servers.clear(); }},
      {"WorkerOptions.parameter_servers[0].ipv4",
       [](WorkerOptions& o) { o.parameter_servers[0].ipv4.value = 0; }},
      {"WorkerOptions.polling.max_sleep",
       [](WorkerOptions& o) { o.polling.max_sleep = absl::Seconds(5); }},
      {"WorkerOptions.max_burst", [](WorkerOptions& o) { o.max_burst = 0; }},
      {"WorkerOptions.parameter_source_check",
       [](WorkerOptions& o) { o.parameter_source_check = static_cast<SourceCheck>(9); }},
  };
  for (const WorkerCase& c : cases) {
    WorkerOptions o = GoodWorker();
    c.mutate(o);
    const absl::Status s = o.Validate();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.field;
    EXPECT_THAT(Message(s), StartsWith(std::string(c.field) + ":")) << s;
  }
}

struct PsCase {
  const char* field;
  void (*mutate)(ParameterServerOptions&);
};

TEST(OptionsTest, EachBadParameterServerFieldIsNamed) {
  const PsCase cases[] = {
      {"ParameterServerOptions.jobs", [](ParameterServerOptions& o) { o.jobs.clear(); }},
      {"ParameterServerOptions.jobs[0].job_id",
       [](ParameterServerOptions& o) { o.jobs[0].job_id = 0; }},
      {"ParameterServerOptions.jobs[1].job_id",
       [](ParameterServerOptions& o) { o.jobs.push_back(o.jobs[0]); }},
      {"ParameterServerOptions.jobs[0].workers",
       [](ParameterServerOptions& o) { o.jobs[0].workers.pop_back(); }},
      {"ParameterServerOptions.jobs[0].multicast_group",
       [](ParameterServerOptions& o) { o.jobs[0].delivery = ParameterDelivery::kMulticast; }},
      {"ParameterServerOptions.slots", [](ParameterServerOptions& o) { o.slots = 3; }},
      {"ParameterServerOptions.server_index",
       [](ParameterServerOptions& o) { o.server_index = 1; }},
      {"ParameterServerOptions.io_threads",
       [](ParameterServerOptions& o) {
         o.server_count = 4;
         o.io_threads = 5;
       }},
      {"ParameterServerOptions.orphan_timeout",
       [](ParameterServerOptions& o) { o.orphan_timeout = absl::ZeroDuration(); }},
      {"ParameterServerOptions.gradient_source_check",
       [](ParameterServerOptions& o) { o.gradient_source_check = static_cast<SourceCheck>(9); }},
  };
  for (const PsCase& c : cases) {
    ParameterServerOptions o = GoodPs();
    c.mutate(o);
    const absl::Status s = o.Validate();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.field;
    EXPECT_THAT(Message(s), StartsWith(std::string(c.field) + ":")) << s;
  }
}

// AddDevice: an endpoint of `wire` at `ip` with `queues` queues.
absl::StatusOr<std::unique_ptr<transport::Device>> AddDevice(transport::LoopbackWire& wire,
                                                             const char* ip, uint32_t queues) {
  transport::LoopbackEndpointOptions endpoint;
  endpoint.address = {*wire::Ipv4Address::Parse(ip), {}};
  endpoint.device.num_queues = queues;
  return wire.AddEndpoint(endpoint);
}

TEST(OptionsTest, WorkerCreateRefusesBadOptionsAndMismatchedDevices) {
  const std::shared_ptr<transport::LoopbackWire> wire = transport::LoopbackWire::Create({});
  absl::StatusOr<std::unique_ptr<transport::Device>> device = AddDevice(*wire, "10.0.0.2", 1);
  ASSERT_TRUE(device.ok()) << device.status();

  WorkerOptions bad = GoodWorker();
  bad.job.slots = 100;
  EXPECT_THAT(Message(Worker::Create(bad, **device).status()),
              HasSubstr("WorkerOptions.job.slots"));

  WorkerOptions too_many_threads = GoodWorker();  // 2 threads, 1 device queue
  EXPECT_THAT(Message(Worker::Create(too_many_threads, **device).status()),
              HasSubstr("WorkerOptions.job.io_threads"));

  WorkerOptions port = GoodWorker();
  port.job.io_threads = 1;
  port.job.base_port = 40000;
  EXPECT_THAT(Message(Worker::Create(port, **device).status()),
              HasSubstr("WorkerOptions.job.base_port"));
}

TEST(OptionsTest, ParameterServerStartRefusesThreadsWithoutQueues) {
  const std::shared_ptr<transport::LoopbackWire> wire = transport::LoopbackWire::Create({});
  absl::StatusOr<std::unique_ptr<transport::Device>> device = AddDevice(*wire, "10.0.0.1", 1);
  ASSERT_TRUE(device.ok());
  ParameterServerOptions o = GoodPs();
  o.io_threads = 2;
  EXPECT_THAT(Message(ParameterServer::Start(o, **device).status()),
              HasSubstr("ParameterServerOptions.io_threads"));
}

// Two endpoints on one device queue would each take the other's frames: the
// second is refused naming the queue and the first; once the first is gone,
// the queue is free again.
TEST(OptionsTest, AQueueAnotherEndpointRunsOnIsRefused) {
  const std::shared_ptr<transport::LoopbackWire> wire = transport::LoopbackWire::Create({});
  absl::StatusOr<std::unique_ptr<transport::Device>> device = AddDevice(*wire, "10.0.0.2", 2);
  ASSERT_TRUE(device.ok()) << device.status();
  WorkerOptions o = GoodWorker();
  o.job.io_threads = 1;  // queue 0
  absl::StatusOr<std::unique_ptr<Worker>> first = Worker::Create(o, **device);
  ASSERT_TRUE(first.ok()) << first.status();

  const absl::Status second = Worker::Create(o, **device).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(second)) << second;
  EXPECT_THAT(Message(second), HasSubstr("queue 0 of this loopback device (10.0.0.2) is used by "
                                         "a Worker already; a Worker needs queues"));
  ParameterServerOptions ps = GoodPs();  // serves every queue of the device
  const absl::Status beside = ParameterServer::Start(ps, **device).status();
  EXPECT_THAT(Message(beside), HasSubstr("queue 0 of this loopback device (10.0.0.2) is used by "
                                         "a Worker already; a ParameterServer needs"));

  first->reset();
  EXPECT_TRUE(Worker::Create(o, **device).ok());
}

TEST(OptionsTest, TransportOptionsNameTheMissingPiece) {
  TransportOptions t;
  t.kind = TransportKind::kLoopback;
  EXPECT_THAT(Message(OpenTransport(t).status()), HasSubstr("TransportOptions.loopback_wire"));
  EXPECT_EQ(*ParseTransportKind("kernel_udp"), TransportKind::kKernelUdp);
  EXPECT_EQ(*ParseTransportKind("loopback"), TransportKind::kLoopback);
  EXPECT_FALSE(ParseTransportKind("carrier-pigeon").ok());
}

}  // namespace
}  // namespace atp
