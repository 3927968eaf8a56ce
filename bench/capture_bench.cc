// Packet capture's cost (atp/capture.h): bursts of 32 ATP frames sent over
// an in-process loopback wire and received, with the capture decorator on
// both ends (each frame written twice: sender's tx, receiver's rx) or off,
// side by side in one run. Files go to a temporary directory on /dev/shm
// when it exists (else /tmp), a ring of 2 x 64 MiB per direction.
//
//   build/bench/capture_bench --benchmark_min_time=1s
#include <stdlib.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "atp/capture.h"
#include "atp/transport/loopback.h"
#include "atp/wire.h"
#include "benchmark/benchmark.h"

namespace atp {
namespace {

constexpr size_t kBurst = 32;

std::array<uint8_t, wire::kFrameBytes> Frame() {
  wire::FrameFields f;
  f.src_ip = wire::Ipv4Address{0x0A010001};
  f.dst_ip = wire::Ipv4Address{0x0A010002};
  f.src_mac = transport::DefaultMacFor(f.src_ip);
  f.dst_mac = transport::DefaultMacFor(f.dst_ip);
  f.header.job = 1;
  f.header.bitmap0 = 1;
  f.header.bitmap1 = 1;
  std::array<uint8_t, wire::kFrameBytes> frame;
  wire::EncodeFrame(f, wire::Payload{}, wire::kDefaultBasePort, frame);
  return frame;
}

void BM_LoopbackBurst(benchmark::State& state) {
  const bool capture = state.range(0) != 0;
  const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
  std::string templ = base + "/atp_capture_bench_XXXXXX";
  const std::string dir = ::mkdtemp(templ.data());
  {
    std::shared_ptr<transport::LoopbackWire> wire = transport::LoopbackWire::Create({});
    transport::LoopbackEndpointOptions a, b;
    a.address = {wire::Ipv4Address{0x0A010001}, transport::DefaultMacFor(wire::Ipv4Address{0x0A010001})};
    b.address = {wire::Ipv4Address{0x0A010002}, transport::DefaultMacFor(wire::Ipv4Address{0x0A010002})};
    std::unique_ptr<transport::Device> sender = *wire->AddEndpoint(a);
    std::unique_ptr<transport::Device> receiver = *wire->AddEndpoint(b);
    if (capture) {
      CaptureOptions options;
      options.directory = dir;
      options.max_files = 2;
      options.name = "a";
      sender = *CaptureDevice(std::move(sender), options);
      options.name = "b";
      receiver = *CaptureDevice(std::move(receiver), options);
    }
    const auto frame = Frame();
    transport::Queue& tx = sender->queue(0);
    transport::Queue& rx = receiver->queue(0);
    std::vector<transport::FrameRef> out(kBurst), in(kBurst);
    for (auto _ : state) {
      const size_t n = tx.tx_pool().AllocBurst(out);
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(out[i].data, frame.data(), frame.size());
        out[i].length = wire::kFrameBytes;
      }
      const size_t sent = tx.TxBurst({out.data(), n});
      transport::ReleaseFrames({out.data() + sent, n - sent});
      tx.Flush();
      size_t got = 0;
      while (got < sent) {
        const size_t r = rx.RxBurst(in);
        transport::ReleaseFrames({in.data(), r});
        got += r;
      }
    }
    state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBurst));
    state.SetLabel(capture ? "capture on (tx + rx written)" : "capture off");
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_LoopbackBurst)->Arg(0)->Arg(1);

}  // namespace
}  // namespace atp

BENCHMARK_MAIN();
