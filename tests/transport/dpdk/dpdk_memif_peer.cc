// tests/transport/dpdk/dpdk_memif_peer.cc: the child process of the
// multi-process memif tests. It opens a libatp DPDK device on a memif port
// and echoes every frame back on the queue it arrived on, with the Ethernet
// and IPv4 addresses swapped (the IPv4 checksum does not change: the sum of
// the header words is the same), until the link goes down after having been
// up (the parent closed its side), the parent dies, or nothing happens for
// --idle_exit_ms.
//
//   dpdk_memif_peer --socket=/atpm123_0 --role=client --queues=4
//                   --address=10.0.0.2 --peer=10.0.0.1
//
// Polling backs off when idle (spin, then sleep 10 us .. 1 ms), so that this
// process is one busy poller only while traffic flows. Prints "echoed N" at exit.
#include <sys/prctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "atp/transport/dpdk.h"
#include "atp/wire.h"

namespace {

using namespace atp::transport;  // NOLINT: a small tool

std::atomic<bool> g_stop{false};  // lock-free, so a signal handler may set it
void OnSignal(int) { g_stop.store(true, std::memory_order_relaxed); }

const char* Flag(int argc, char** argv, const char* name, const char* fallback) {
  const size_t length = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, length) == 0 && argv[i][length] == '=') return argv[i] + length + 1;
  }
  return fallback;
}

DeviceAddress Node(const char* ip) {
  const atp::wire::Ipv4Address ipv4 = *atp::wire::Ipv4Address::Parse(ip);
  return {ipv4, DefaultMacFor(ipv4)};
}

// SwapAddresses: the frame goes back where it came from.
void SwapAddresses(uint8_t* frame) {
  uint8_t mac[6];
  std::memcpy(mac, frame, 6);
  std::memmove(frame, frame + 6, 6);
  std::memcpy(frame + 6, mac, 6);
  uint8_t ip[4];
  uint8_t* src = frame + atp::wire::kIpv4Offset + 12;
  std::memcpy(ip, src, 4);
  std::memmove(src, src + 4, 4);
  std::memcpy(src + 4, ip, 4);
}

}  // namespace

int main(int argc, char** argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // never outlive the test
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);

  DpdkEalOptions eal;
  eal.program_name = "atp_memif_peer";
  eal.log_level = "error";
  eal.lcores = Flag(argc, argv, "--lcores", "");
  eal.extra_args = {"--log-level=pmd.net.memif:critical"};
  if (absl::Status s = InitDpdkEal(eal); !s.ok()) {
    std::fprintf(stderr, "dpdk_memif_peer: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  const uint32_t queues = static_cast<uint32_t>(std::atoi(Flag(argc, argv, "--queues", "1")));
  MemifOptions memif;
  memif.socket = Flag(argc, argv, "--socket", "/atp-memif");
  memif.role = std::string(Flag(argc, argv, "--role", "client")) == "server" ? MemifRole::kServer
                                                                           : MemifRole::kClient;
  DpdkOptions options;
  options.device.num_queues = queues;
  options.address = Node(Flag(argc, argv, "--address", "10.0.0.2"));
  options.peers.push_back({Node(Flag(argc, argv, "--peer", "10.0.0.1")), queues});
  options.port = "net_memif_peer";
  options.source = DpdkPortSource::kCreateVdev;
  options.vdev_args = MemifVdevArgs(memif);
  options.link_timeout = atp::TimeDelta::FromSeconds(10);
  absl::StatusOr<std::unique_ptr<DpdkDevice>> opened = OpenDpdkDevice(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "dpdk_memif_peer: %s\n", std::string(opened.status().message()).c_str());
    return 3;
  }
  std::unique_ptr<DpdkDevice> device = *std::move(opened);
  std::fprintf(stdout, "ready\n");
  std::fflush(stdout);

  const auto idle_exit = std::chrono::milliseconds(std::atoi(Flag(argc, argv, "--idle_exit_ms", "20000")));
  auto last_activity = std::chrono::steady_clock::now();
  uint64_t echoed = 0;
  int idle_rounds = 0;
  auto pause = std::chrono::microseconds(10);
  while (!g_stop.load(std::memory_order_relaxed)) {
    size_t moved = 0;
    for (uint32_t q = 0; q < queues; ++q) {
      Queue& queue = device->queue(q);
      FrameRef frames[32];
      const size_t n = queue.RxBurst(frames);
      for (size_t i = 0; i < n; ++i) SwapAddresses(frames[i].data);
      size_t sent = 0;
      // Echo everything: wait for room rather than drop (the parent drains).
      for (int tries = 0; sent < n && tries < 100000 && !g_stop.load(std::memory_order_relaxed); ++tries) {
        sent += queue.TxBurst({frames + sent, n - sent});
        if (queue.Flush() > 0 && sent < n) std::this_thread::yield();
      }
      ReleaseFrames({frames + sent, n - sent});
      queue.Flush();
      echoed += sent;
      moved += n;
    }
    if (moved > 0) {
      idle_rounds = 0;
      pause = std::chrono::microseconds(10);
      last_activity = std::chrono::steady_clock::now();
      continue;
    }
    if (!device->link_up()) break;  // the parent closed its side
    if (std::chrono::steady_clock::now() - last_activity > idle_exit) break;
    if (++idle_rounds > 1000) {  // back off: sleep, longer and longer, up to 1 ms
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(1000));
    }
  }
  for (uint32_t q = 0; q < queues; ++q) device->queue(q).Flush();
  std::fprintf(stdout, "echoed %llu\n", static_cast<unsigned long long>(echoed));
  std::fflush(stdout);
  device.reset();
  return 0;
}
