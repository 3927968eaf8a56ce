// tests/multiprocess/garbage_sender_dpdk.cc: garbage_sender's DPDK ports
// (--port=memif, --port=af_packet): its own EAL and one port, driven with
// rte_eth_* directly (libatp's devices send only whole ATP frames).
#include <fcntl.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "atp/transport/dpdk.h"
#include "tests/multiprocess/garbage_sender.h"

namespace atp::tests {
namespace {

absl::Status EnterNetns(const std::string& name) {
  if (name.empty()) return absl::OkStatus();
  const std::string path = "/var/run/netns/" + name;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return absl::NotFoundError(absl::StrCat("--netns: cannot open ", path, ": ", strerror(errno)));
  const int rc = setns(fd, CLONE_NEWNET);
  const int err = errno;
  close(fd);
  if (rc != 0)
    return absl::PermissionDeniedError(absl::StrCat("--netns: setns ", name, ": ", strerror(err)));
  return absl::OkStatus();
}

}  // namespace

int SendThroughDpdk(const DpdkPort& flags, const std::vector<Garbage>& kinds, int count) {
  std::string vdev;
  if (flags.kind == "memif") {
    if (flags.memif_socket.empty()) {
      std::fprintf(stderr, "garbage_sender: --memif_socket is required with --port=memif\n");
      return 2;
    }
    transport::MemifOptions memif;
    memif.role = flags.memif_server ? transport::MemifRole::kServer : transport::MemifRole::kClient;
    memif.socket = flags.memif_socket;
    memif.socket_kind = transport::MemifSocket::kFile;
    memif.id = flags.memif_id;
    vdev = absl::StrCat("net_memif_garbage,", transport::MemifVdevArgs(memif));
  } else {
    if (flags.iface.empty()) {
      std::fprintf(stderr, "garbage_sender: --iface is required with --port=af_packet\n");
      return 2;
    }
    // The EAL's threads inherit the namespace of the thread that creates them.
    if (absl::Status s = EnterNetns(flags.netns); !s.ok()) {
      std::fprintf(stderr, "garbage_sender: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    vdev = absl::StrCat("net_af_packet_garbage,iface=", flags.iface,
                        ",qpairs=1,qdisc_bypass=0");
  }
  transport::DpdkEalOptions eal;
  eal.program_name = "garbage_sender";
  eal.memory_mb = 64;
  eal.vdevs = {vdev};
  eal.log_level = "error";
  eal.extra_args = {"--log-level=pmd.net.memif:critical"};
  if (absl::Status s = transport::InitDpdkEal(eal); !s.ok()) {
    std::fprintf(stderr, "garbage_sender: EAL: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const std::string port_name = vdev.substr(0, vdev.find(','));
  uint16_t port = 0;
  if (rte_eth_dev_get_port_by_name(port_name.c_str(), &port) != 0) {
    std::fprintf(stderr, "garbage_sender: port %s was not created\n", port_name.c_str());
    return 1;
  }
  rte_mempool* pool =
      rte_pktmbuf_pool_create("garbage", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  rte_eth_conf conf{};
  if (pool == nullptr || rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port, 0, 256, SOCKET_ID_ANY, nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(port, 0, 256, SOCKET_ID_ANY, nullptr) != 0) {
    std::fprintf(stderr, "garbage_sender: cannot set up port %s\n", port_name.c_str());
    return 1;
  }
  // Start the port and wait for the link. A memif client connects only when
  // its port starts (and the start fails while nobody listens), so start it
  // again now and then until the server answers.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(flags.link_timeout_s);
  bool started = rte_eth_dev_start(port) == 0;
  auto next_restart = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (;;) {
    rte_eth_link link{};
    if (started && rte_eth_link_get_nowait(port, &link) == 0 &&
        link.link_status == RTE_ETH_LINK_UP) {
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "garbage_sender: link of %s did not come up in %d s\n",
                   port_name.c_str(), flags.link_timeout_s);
      return 1;
    }
    if (std::chrono::steady_clock::now() > next_restart) {
      if (started) rte_eth_dev_stop(port);
      started = rte_eth_dev_start(port) == 0;
      next_restart = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  // Drains what the switch sends us (a probe port gets nothing, normally).
  const auto drain = [port] {
    std::array<rte_mbuf*, 32> rx{};
    const uint16_t n = rte_eth_rx_burst(port, 0, rx.data(), rx.size());
    for (uint16_t i = 0; i < n; ++i) rte_pktmbuf_free(rx[i]);
  };
  const auto send = [&](const Garbage& garbage) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    while (m == nullptr && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(5)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      m = rte_pktmbuf_alloc(pool);
    }
    if (m == nullptr) return false;
    char* data = rte_pktmbuf_append(m, static_cast<uint16_t>(garbage.bytes.size()));
    std::memcpy(data, garbage.bytes.data(), garbage.bytes.size());
    // Paced, one at a time: a burst of garbage must not be lost to a full ring.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    bool left = true;
    while (rte_eth_tx_burst(port, 0, &m, 1) == 0) {
      if (std::chrono::steady_clock::now() > give_up) {
        rte_pktmbuf_free(m);
        left = false;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    drain();
    return left;
  };
  const int status = SendAndHold(kinds, count, send, drain);
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  return status;
}


}  // namespace atp::tests
