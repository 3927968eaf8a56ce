// bench/memif_loop_tester.cc: the tester of bench/switchd_memif.sh: measures
// how many frames per second a device under test (atp-switchd, or
// dpdk-testpmd for the baseline) forwards between two memif ports.
//
//   memif_loop_tester --to_dut=/tmp/b/a.sock --from_dut=/tmp/b/b.sock --seconds=5
//
// One thread, two memif client ports: it puts --inflight valid 306-byte ATP
// frames (a job the device does not aggregate, so a switch routes them by
// IPv4 destination) into port "to_dut", and sends back into "to_dut" every
// frame that comes out of the device on "from_dut", unchanged: the frames
// circulate, and the device's forwarding rate is the rate at which they come
// back. Frames lost on the way are replaced, so the load stays constant. A
// sample of the frames that come back is validated (wire::ValidateFrame).
//
// Prints "RESULT frames_per_second=<rate over the window> invalid=<n>".
// Exit: 0 measured; 1 a port or link failed, or nothing came back; 2 bad flags.
//
// It talks to DPDK directly (like dpdk-testpmd's io forwarding), so its own
// cost per frame is one rx and one tx burst slot, the same for every device.
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "atp/transport.h"
#include "atp/transport/dpdk.h"
#include "atp/wire.h"

ABSL_FLAG(std::string, to_dut, "", "memif socket of the device's input port (the device is the server).");
ABSL_FLAG(std::string, from_dut, "", "memif socket of the device's output port.");
ABSL_FLAG(int, inflight, 1024, "Frames circulating in the loop.");
ABSL_FLAG(double, warmup_s, 1.0, "Seconds before the measurement window opens.");
ABSL_FLAG(double, seconds, 5.0, "Length of the measurement window.");
ABSL_FLAG(int, link_timeout_s, 20, "How long to wait for both links.");

namespace atp::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint16_t kBurst = 32;

bool StartPort(uint16_t port, rte_mempool* pool) {
  rte_eth_conf conf{};
  return rte_eth_dev_configure(port, 1, 1, &conf) == 0 &&
         rte_eth_rx_queue_setup(port, 0, 1024, SOCKET_ID_ANY, nullptr, pool) == 0 &&
         rte_eth_tx_queue_setup(port, 0, 1024, SOCKET_ID_ANY, nullptr) == 0;
}

bool LinkUp(uint16_t port) {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "frames/s a device forwards between two memif ports (bench/switchd_memif.sh).\n"
      "  e.g. memif_loop_tester --to_dut=/tmp/b/a.sock --from_dut=/tmp/b/b.sock --seconds=5");
  absl::ParseCommandLine(argc, argv);
  const std::string to = absl::GetFlag(FLAGS_to_dut);
  const std::string from = absl::GetFlag(FLAGS_from_dut);
  const int inflight = absl::GetFlag(FLAGS_inflight);
  if (to.empty() || from.empty() || inflight < 1 || inflight > 6000) {
    std::fprintf(stderr, "memif_loop_tester: --to_dut and --from_dut are required, --inflight 1..6000\n");
    return 2;
  }
  transport::MemifOptions memif;
  memif.role = transport::MemifRole::kClient;
  memif.socket_kind = transport::MemifSocket::kFile;
  memif.socket = to;
  const std::string vdev_to = absl::StrCat("net_memif_to,", transport::MemifVdevArgs(memif));
  memif.socket = from;
  const std::string vdev_from = absl::StrCat("net_memif_from,", transport::MemifVdevArgs(memif));
  transport::DpdkEalOptions eal;
  eal.program_name = "memif_loop_tester";
  eal.memory_mb = 256;
  eal.vdevs = {vdev_to, vdev_from};
  eal.log_level = "error";
  eal.extra_args = {"--log-level=pmd.net.memif:critical"};
  if (absl::Status s = transport::InitDpdkEal(eal); !s.ok()) {
    std::fprintf(stderr, "memif_loop_tester: EAL: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  uint16_t port_to = 0, port_from = 0;
  rte_mempool* pool = rte_pktmbuf_pool_create("loop", 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                              SOCKET_ID_ANY);
  if (rte_eth_dev_get_port_by_name("net_memif_to", &port_to) != 0 ||
      rte_eth_dev_get_port_by_name("net_memif_from", &port_from) != 0 || pool == nullptr ||
      !StartPort(port_to, pool) || !StartPort(port_from, pool)) {
    std::fprintf(stderr, "memif_loop_tester: cannot set up the ports\n");
    return 1;
  }
  // A memif client connects when its port starts (and the start fails while
  // nobody listens): start again now and then until both links are up.
  const auto link_deadline = Clock::now() + std::chrono::seconds(absl::GetFlag(FLAGS_link_timeout_s));
  bool to_started = rte_eth_dev_start(port_to) == 0;
  bool from_started = rte_eth_dev_start(port_from) == 0;
  auto next_restart = Clock::now() + std::chrono::milliseconds(200);
  while (!(to_started && from_started && LinkUp(port_to) && LinkUp(port_from))) {
    if (Clock::now() > link_deadline) {
      std::fprintf(stderr, "memif_loop_tester: links did not come up\n");
      return 1;
    }
    if (Clock::now() > next_restart) {
      if (!to_started || !LinkUp(port_to)) {
        if (to_started) rte_eth_dev_stop(port_to);
        to_started = rte_eth_dev_start(port_to) == 0;
      }
      if (!from_started || !LinkUp(port_from)) {
        if (from_started) rte_eth_dev_stop(port_from);
        from_started = rte_eth_dev_start(port_from) == 0;
      }
      next_restart = Clock::now() + std::chrono::milliseconds(200);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Prime the memif rings (a server sends only into buffers its client posted).
  rte_mbuf* none[1];
  (void)rte_eth_rx_burst(port_to, 0, none, 0);
  (void)rte_eth_rx_burst(port_from, 0, none, 0);

  wire::FrameFields fields;
  fields.src_ip = *wire::Ipv4Address::Parse("10.9.0.1");
  fields.dst_ip = *wire::Ipv4Address::Parse("10.9.200.1");
  fields.src_mac = transport::DefaultMacFor(fields.src_ip);
  fields.dst_mac = transport::DefaultMacFor(fields.dst_ip);
  fields.header.job = 9;  // aggregated nowhere: forwarded by route
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  fields.header.fan_in0 = 2;
  fields.header.fan_in1 = 2;
  std::array<uint8_t, wire::kFrameBytes> frame{};
  wire::Payload payload{};
  wire::EncodeFrame(fields, payload, wire::kDefaultBasePort, frame);

  int64_t outstanding = 0;  // frames put into the loop and not yet back or lost
  uint64_t received = 0, invalid = 0, window_start_count = 0;
  const auto start = Clock::now();
  const auto window_open = start + std::chrono::duration<double>(absl::GetFlag(FLAGS_warmup_s));
  const auto window_close = window_open + std::chrono::duration<double>(absl::GetFlag(FLAGS_seconds));
  bool in_window = false;
  Clock::time_point window_t0;
  auto last_progress = Clock::now();
  uint64_t seen_at_last_progress = 0;
  std::array<rte_mbuf*, kBurst> burst{};
  for (;;) {
    const auto now = Clock::now();
    if (!in_window && now >= window_open) {
      in_window = true;
      window_t0 = now;
      window_start_count = received;
    }
    if (now >= window_close) break;
    // Top up: new frames while fewer than --inflight circulate. Frames that
    // vanished (dropped by the device) are written off after 50 ms of silence.
    if (now - last_progress > std::chrono::milliseconds(50)) {
      if (received == seen_at_last_progress) outstanding = 0;
      seen_at_last_progress = received;
      last_progress = now;
    }
    while (outstanding < inflight) {
      const uint16_t n = static_cast<uint16_t>(std::min<int64_t>(kBurst, inflight - outstanding));
      if (rte_pktmbuf_alloc_bulk(pool, burst.data(), n) != 0) break;
      for (uint16_t i = 0; i < n; ++i) {
        char* d = rte_pktmbuf_append(burst[i], wire::kFrameBytes);
        std::memcpy(d, frame.data(), frame.size());
      }
      const uint16_t sent = rte_eth_tx_burst(port_to, 0, burst.data(), n);
      for (uint16_t i = sent; i < n; ++i) rte_pktmbuf_free(burst[i]);
      outstanding += sent;
      if (sent < n) break;
    }
    // What came back goes round again.
    const uint16_t n = rte_eth_rx_burst(port_from, 0, burst.data(), kBurst);
    if (n > 0) {
      received += n;
      outstanding -= n;
      const auto* sample = rte_pktmbuf_mtod(burst[0], const uint8_t*);
      if (wire::ValidateFrame({sample, burst[0]->data_len}, wire::kDefaultBasePort) !=
          wire::DecodeError::kOk) {
        ++invalid;
      }
      const uint16_t sent = rte_eth_tx_burst(port_to, 0, burst.data(), n);
      for (uint16_t i = sent; i < n; ++i) rte_pktmbuf_free(burst[i]);
      outstanding += sent;
    }
    // The device sends nothing back on its input port; drain it anyway.
    const uint16_t stray = rte_eth_rx_burst(port_to, 0, burst.data(), kBurst);
    for (uint16_t i = 0; i < stray; ++i) rte_pktmbuf_free(burst[i]);
  }
  const double window_s = std::chrono::duration<double>(Clock::now() - window_t0).count();
  const uint64_t in_window_frames = received - window_start_count;
  std::printf("RESULT frames_per_second=%.0f invalid=%llu received=%llu\n",
              static_cast<double>(in_window_frames) / window_s,
              static_cast<unsigned long long>(invalid), static_cast<unsigned long long>(received));
  rte_eth_dev_stop(port_to);
  rte_eth_dev_stop(port_from);
  return in_window_frames > 0 && invalid == 0 ? 0 : 1;
}

}  // namespace
}  // namespace atp::bench

int main(int argc, char** argv) { return atp::bench::Main(argc, argv); }
