// The threaded ParameterServer frees the partial state of a dead worker's
// fragments by itself, on its I/O thread's clock, with no more traffic
// (ATP-SPEC invariant 5), and reports it in ParameterServerStats.
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "atp/parameter_server.h"
#include "atp/transport/frame_pool.h"
#include "atp/transport/loopback.h"
#include "atp/wire.h"
#include "gtest/gtest.h"
#include "tests/unit/runtime/join_frame.h"

namespace atp {
namespace {

transport::DeviceAddress Address(const char* ip) {
  const wire::Ipv4Address a = *wire::Ipv4Address::Parse(ip);
  return {a, transport::DefaultMacFor(a)};
}

// SendFrame: `frame` out of `worker`'s queue 0.
void SendFrame(transport::Device& worker, std::span<const uint8_t, wire::kFrameBytes> frame) {
  transport::Queue& q = worker.queue(0);
  transport::FrameRef ref;
  ASSERT_EQ(q.tx_pool().AllocBurst({&ref, 1}), 1u);
  std::memcpy(ref.data, frame.data(), frame.size());
  ref.length = wire::kFrameBytes;
  ASSERT_EQ(q.TxBurst({&ref, 1}), 1u);
  q.Flush();
}

// SendGradient: worker `w` of a one-rack, two-worker job 5 sends its fragment
// at (queue 0, `position`) to the PS.
void SendGradient(transport::Device& worker, int w, uint32_t position, int32_t value) {
  wire::FrameFields f;
  f.src_ip = worker.address().ipv4;
  f.src_mac = worker.address().mac;
  f.dst_ip = Address("10.0.0.100").ipv4;
  f.dst_mac = Address("10.0.0.100").mac;
  f.header.job = 5;
  f.header.seq = wire::MakeSeq(0, position);
  f.header.bitmap0 = 1u << w;
  f.header.bitmap1 = 1;
  f.header.fan_in0 = 2;
  f.header.fan_in1 = 1;
  wire::Payload payload;
  payload.fill(static_cast<uint32_t>(value));
  std::array<uint8_t, wire::kFrameBytes> frame{};
  wire::EncodeFrame(f, payload, wire::kDefaultBasePort, frame);
  SendFrame(worker, frame);
}

// WaitFor: polls `done` until it holds or 10 s pass.
template <typename Pred>
bool WaitFor(Pred done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(PsOrphanTest, ThreadedServerReleasesADeadWorkersFragmentsOnItsOwn) {
  std::shared_ptr<transport::LoopbackWire> wire = transport::LoopbackWire::Create({});
  transport::LoopbackEndpointOptions ps_end;
  ps_end.address = Address("10.0.0.100");
  ps_end.device.num_queues = 1;
  transport::LoopbackEndpointOptions worker_end;
  worker_end.address = Address("10.0.0.1");
  worker_end.device.num_queues = 1;
  auto ps_device = wire->AddEndpoint(ps_end);
  auto worker = wire->AddEndpoint(worker_end);
  ASSERT_TRUE(ps_device.ok()) << ps_device.status();
  ASSERT_TRUE(worker.ok()) << worker.status();

  ParameterServerOptions options;
  ParameterServerJobOptions job;
  job.job_id = 5;
  job.layout = RackLayout::Uniform(1, 2);
  job.delivery = ParameterDelivery::kUnicast;
  job.workers = {Address("10.0.0.1"), Address("10.0.0.2")};
  options.jobs.push_back(job);
  options.slots = 16;
  options.orphan_timeout = absl::Milliseconds(30);
  options.polling.spin_iterations = 16;  // a 2-core machine: back off soon
  auto ps = ParameterServer::Start(options, std::move(*ps_device));
  ASSERT_TRUE(ps.ok()) << ps.status();

  // Both workers joined at their start, as Workers do (both from this device:
  // the PS admits any address of the job's workers); then worker 0 sends
  // three fragments and worker 1, dead, never does.
  for (int w = 0; w < 2; ++w) {
    SendFrame(**worker, testing::JoinFrame(5, w, 2, /*queue=*/0, options.slots,
                                           (*worker)->address(), Address("10.0.0.100")));
  }
  const absl::Time first = absl::Now();
  for (uint32_t p = 0; p < 3; ++p) SendGradient(**worker, 0, p, 7);
  ASSERT_TRUE(WaitFor([&] { return (*ps)->stats().contributions == 3; }))
      << "contributions " << (*ps)->stats().contributions;
  ASSERT_TRUE(WaitFor([&] { return (*ps)->stats().orphans_released == 3; }))
      << "orphans_released " << (*ps)->stats().orphans_released;
  EXPECT_GE(absl::Now() - first, absl::Milliseconds(30)) << "released before the timeout";
  const ParameterServerStats s = (*ps)->stats();
  EXPECT_EQ(s.completed, 0u);
  EXPECT_EQ(s.frames_sent, 0u);
  EXPECT_EQ(s.gradients, s.contributions);
}

}  // namespace
}  // namespace atp
