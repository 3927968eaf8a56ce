// embedded-ps: a framework that owns its threads and its network I/O drives
// ATP's parameter server itself (EmbeddedParameterServer), the way a custom
// PS framework (BytePS-like) would embed it.
//
// The "framework" here has --framework_threads threads. Each owns some
// receive queues of the PS's transport device (an in-process loopback wire),
// polls them in its own loop, hands every frame to
// EmbeddedParameterServer::HandleFrame, and sends the frames the PS hands
// back through a FrameSink on the same queue. The workers are ordinary
// atp::Worker instances; every result is verified.
//
//   embedded-ps --workers=3 --framework_threads=2 --tensor_floats=200000
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "atp/parameter_server.h"
#include "atp/transport.h"
#include "atp/transport/frame_pool.h"
#include "atp/transport/loopback.h"
#include "atp/worker.h"
#include "testbed/oracle.h"
#include "lib/tool/command_line.h"
#include "lib/tool/flag_checks.h"

ABSL_FLAG(int, workers, 2, "Workers in the job (one rack), 1..32.");
ABSL_FLAG(int, io_threads, 2,
          "I/O threads (queues) per worker, 1..16; the PS device gets as many queues.");
ABSL_FLAG(int, framework_threads, 2,
          "The framework's own threads driving the PS, 1..--io_threads (each owns queues q with "
          "q mod framework_threads == its index); also the PS's lock shards.");
ABSL_FLAG(int64_t, tensor_floats, 100000, "Floats per worker per iteration, >= 1.");
ABSL_FLAG(int, iterations, 3, "Aggregations to run, >= 1.");

namespace atp::examples {
namespace {

constexpr char kUsage[] =
    "a framework drives ATP's parameter server from its own threads\n"
    "(EmbeddedParameterServer::HandleFrame + a FrameSink), workers aggregate through it,\n"
    "and every result is verified.\n"
    "Exit status: 0 all results exact; 1 a result was wrong or late; 2 bad flags.";

constexpr char kProgram[] = "embedded-ps";

constexpr uint8_t kJob = 1;

transport::DeviceAddress Address(uint32_t ip) {
  const wire::Ipv4Address a{ip};
  return {a, transport::DefaultMacFor(a)};
}

// QueueSink: the framework's way of sending what the PS produces: copy each
// frame into a transmit buffer of the queue the request came in on, and
// send them in one burst after the received burst is handled.
class QueueSink final : public FrameSink {
 public:
  explicit QueueSink(transport::Queue& queue) : queue_(queue) {}

  void SendFrame(std::span<const uint8_t, wire::kFrameBytes> frame) override {
    transport::FrameRef ref;
    if (queue_.tx_pool().AllocBurst({&ref, 1}) == 0) {
      Flush();
      if (queue_.tx_pool().AllocBurst({&ref, 1}) == 0) return;  // dropped: workers resend
    }
    std::memcpy(ref.data, frame.data(), frame.size());
    ref.length = wire::kFrameBytes;
    staged_.push_back(ref);
    if (staged_.size() == 32) Flush();
  }

  void Flush() {
    size_t sent = 0;
    while (sent < staged_.size()) {
      const size_t n = queue_.TxBurst(std::span(staged_).subspan(sent));
      if (n == 0) queue_.Flush();
      sent += n;
    }
    staged_.clear();
    queue_.Flush();
  }

 private:
  transport::Queue& queue_;
  std::vector<transport::FrameRef> staged_;
};

// FrameworkThread: the framework's event loop for its share of the queues.
void FrameworkThread(EmbeddedParameterServer& ps, std::vector<transport::Queue*> queues,
                     const std::atomic<bool>& stop) {
  std::vector<std::unique_ptr<QueueSink>> sinks;
  for (transport::Queue* q : queues) sinks.push_back(std::make_unique<QueueSink>(*q));
  transport::FrameRef burst[32];
  while (!stop.load(std::memory_order_acquire)) {
    size_t handled = 0;
    for (size_t i = 0; i < queues.size(); ++i) {
      const size_t n = queues[i]->RxBurst(burst);
      for (size_t k = 0; k < n; ++k) ps.HandleFrame(burst[k].bytes(), *sinks[i]);
      transport::ReleaseFrames({burst, n});
      sinks[i]->Flush();
      handled += n;
    }
    // The framework's own idle policy (here: a short nap when idle).
    if (handled == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int Main(int argc, char** argv) {
  tool::ParseCommandLineOrExit(argc, argv, kProgram, {"examples/embedded_ps/"}, kUsage);
  const int workers = absl::GetFlag(FLAGS_workers);
  const int64_t n = absl::GetFlag(FLAGS_tensor_floats);
  tool::ExitIfBad(kProgram, tool::CheckRange("workers", workers, 1, 32));
  tool::ExitIfBad(kProgram, tool::CheckRange("io_threads", absl::GetFlag(FLAGS_io_threads), 1, 16));
  tool::ExitIfBad(kProgram, tool::CheckRange("framework_threads", absl::GetFlag(FLAGS_framework_threads),
                                             1, absl::GetFlag(FLAGS_io_threads)));
  tool::ExitIfBad(kProgram, tool::CheckRange("tensor_floats", n, 1, INT64_MAX));
  tool::ExitIfBad(kProgram, tool::CheckRange("iterations", absl::GetFlag(FLAGS_iterations), 1, INT32_MAX));
  // Each worker's input and output, the exact aggregate and the oracle's sums.
  tool::ExitIfBad(kProgram, tool::CheckMemory("tensor_floats", 4.0 * static_cast<double>(n) * (2 * workers + 3),
                                              absl::StrCat(2 * workers + 3, " tensors of ", n, " floats")));
  const uint32_t io_threads = static_cast<uint32_t>(absl::GetFlag(FLAGS_io_threads));
  const uint32_t framework_threads = static_cast<uint32_t>(absl::GetFlag(FLAGS_framework_threads));

  // The network: a plain in-process wire (no switch), one endpoint per node.
  std::shared_ptr<transport::LoopbackWire> wire = transport::LoopbackWire::Create({});
  auto open = [&](uint32_t ip) {
    transport::LoopbackEndpointOptions e;
    e.address = Address(ip);
    e.device.num_queues = io_threads;
    return wire->AddEndpoint(e);
  };
  const uint32_t ps_ip = 0x0A000064;  // 10.0.0.100
  absl::StatusOr<std::unique_ptr<transport::Device>> ps_device = open(ps_ip);
  if (!ps_device.ok()) {
    std::fprintf(stderr, "embedded-ps: %s\n", std::string(ps_device.status().message()).c_str());
    return 1;
  }

  // The embedded PS: no threads of its own; one lock shard per framework thread.
  ParameterServerOptions options;
  ParameterServerJobOptions job;
  job.job_id = kJob;
  job.layout = RackLayout::Uniform(1, workers);
  job.delivery = ParameterDelivery::kUnicast;
  for (int w = 0; w < workers; ++w) job.workers.push_back(Address(0x0A000001 + w));
  options.jobs.push_back(job);
  options.io_threads = framework_threads;
  absl::StatusOr<std::unique_ptr<EmbeddedParameterServer>> ps =
      EmbeddedParameterServer::Create(options, (*ps_device)->address());
  if (!ps.ok()) {
    std::fprintf(stderr, "embedded-ps: %s\n", std::string(ps.status().message()).c_str());
    return 1;
  }

  // The framework's threads.
  std::atomic<bool> stop{false};
  std::vector<std::thread> framework;
  for (uint32_t t = 0; t < framework_threads; ++t) {
    std::vector<transport::Queue*> mine;
    for (uint32_t q = t; q < io_threads; q += framework_threads) mine.push_back(&(*ps_device)->queue(q));
    framework.emplace_back(FrameworkThread, std::ref(**ps), std::move(mine), std::cref(stop));
  }
  // StopFramework: before any return from here on (joinable threads must
  // not be destroyed).
  const auto stop_framework = [&] {
    stop.store(true);
    for (std::thread& t : framework) t.join();
    framework.clear();
  };

  // The workers.
  std::vector<std::unique_ptr<transport::Device>> devices;
  std::vector<std::unique_ptr<Worker>> job_workers;
  for (int w = 0; w < workers; ++w) {
    absl::StatusOr<std::unique_ptr<transport::Device>> device = open(0x0A000001 + static_cast<uint32_t>(w));
    if (!device.ok()) {
      std::fprintf(stderr, "embedded-ps: %s\n", std::string(device.status().message()).c_str());
      stop_framework();
      return 1;
    }
    WorkerOptions wo;
    wo.job.job_id = kJob;
    wo.job.layout = job.layout;
    wo.job.io_threads = io_threads;
    wo.worker_in_rack = w;
    wo.parameter_servers.push_back((*ps_device)->address());
    absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Create(wo, **device);
    if (!worker.ok()) {
      std::fprintf(stderr, "embedded-ps: %s\n", std::string(worker.status().message()).c_str());
      stop_framework();
      return 1;
    }
    devices.push_back(*std::move(device));
    job_workers.push_back(*std::move(worker));
  }

  int wrong = 0;
  std::vector<std::vector<float>> in(static_cast<size_t>(workers), std::vector<float>(static_cast<size_t>(n)));
  std::vector<std::vector<float>> out = in;
  for (int it = 0; it < absl::GetFlag(FLAGS_iterations); ++it) {
    for (int w = 0; w < workers; ++w) {
      for (int64_t i = 0; i < n; ++i) {
        in[static_cast<size_t>(w)][static_cast<size_t>(i)] =
            static_cast<float>((i * 7 + w * 13 + it) % 1000) * 1e-3f - 0.5f;
      }
    }
    std::vector<Handle> handles;
    for (int w = 0; w < workers; ++w) {
      absl::StatusOr<Handle> h = job_workers[static_cast<size_t>(w)]->PushPull(
          in[static_cast<size_t>(w)], out[static_cast<size_t>(w)]);
      if (!h.ok()) {
        std::fprintf(stderr, "embedded-ps: worker %d: %s\n", w, std::string(h.status().message()).c_str());
        wrong = 1;
        break;
      }
      handles.push_back(*h);
    }
    if (wrong != 0) break;
    if (!WaitAll(handles, absl::Now() + absl::Seconds(60)).ok()) {
      std::fprintf(stderr, "embedded-ps: iteration %d did not finish\n", it);
      wrong = 1;
      break;
    }
    std::vector<std::span<const float>> spans(in.begin(), in.end());
    const std::vector<float> expected = testbed::ExpectedAggregate(spans, kDefaultScale);
    for (const auto& o : out) wrong += testbed::BitIdentical(o, expected) ? 0 : 1;
  }

  job_workers.clear();  // stop the workers before the framework stops serving them
  stop_framework();
  const ParameterServerStats s = (*ps)->stats();
  std::printf("embedded-ps: %d workers, %u framework threads driving the PS\n", workers,
              framework_threads);
  std::printf("PS: %llu frames in, %llu out, %llu fragments completed, %llu duplicates\n",
              static_cast<unsigned long long>(s.frames_received),
              static_cast<unsigned long long>(s.frames_sent),
              static_cast<unsigned long long>(s.completed),
              static_cast<unsigned long long>(s.duplicates));
  std::printf("%s\n", wrong == 0 ? "all results exact" : "WRONG RESULTS");
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace atp::examples

int main(int argc, char** argv) { return atp::examples::Main(argc, argv); }
