// atp-switchd as a process: --check_config's exit codes and messages, bad
// flags, and one run with two memif ports (no root: DPDK without hugepages)
// that this test drives as the memif clients: frames in on one port come out
// of the other, SIGUSR1 writes the stats JSON, SIGTERM stops it cleanly with
// the JSON written again. The binary: $ATP_SWITCHD if set, else the one this
// build made (ATP_SWITCHD_BINARY, from CMake).
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "atp/transport/dpdk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/child_process.h"

namespace atp::switchd {
namespace {

using ::testing::HasSubstr;
using transport::DeviceAddress;
using transport::FrameRef;
using transport::kFrameBytes;

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }
DeviceAddress Node(const char* ip) { return {Ip(ip), transport::DefaultMacFor(Ip(ip))}; }

std::string Switchd() {
  const char* path = std::getenv("ATP_SWITCHD");
  return path != nullptr ? path : ATP_SWITCHD_BINARY;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

class SwitchdProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(Switchd())) << Switchd();
    char dir[] = "/tmp/atp-switchd-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  struct Result {
    int exit = -1;
    std::string out;
    std::string err;
  };
  Result Run(std::vector<std::string> args) {
    args.insert(args.begin(), Switchd());
    test::ChildProcess p({.stdout_path = dir_ + "/out", .stderr_path = dir_ + "/err"});
    EXPECT_TRUE(p.Spawn(args));
    Result r;
    r.exit = p.Wait(std::chrono::seconds(30));
    r.out = p.Stdout();
    r.err = p.Stderr();
    return r;
  }

  std::string dir_;
};

TEST_F(SwitchdProcessTest, CheckConfigAcceptsAGoodFile) {
  const std::string config = dir_ + "/good.yaml";
  WriteFile(config,
            "name: tor0\n"
            "address: 10.255.0.1\n"
            "ports:\n"
            "  - {name: w0, type: memif, socket: " + dir_ + "/w0.sock}\n"
            "  - {name: up, type: memif, socket: " + dir_ + "/up.sock, role: client}\n"
            "routes: [{prefix: 0.0.0.0/0, port: up}]\n"
            "multicast: [{group: 239.1.0.1, ports: [w0]}]\n"
            "jobs: [{id: 1, level: 1, group: 239.1.0.1}]\n");
  const Result r = Run({"--config=" + config, "--check_config"});
  EXPECT_EQ(r.exit, 0) << r.err;
  EXPECT_EQ(r.out, "config ok\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/w0.sock")) << "no port is opened";
}

TEST_F(SwitchdProcessTest, CheckConfigRefusesABadFileWithItsLine) {
  const std::string config = dir_ + "/bad.yaml";
  WriteFile(config,
            "name: tor0\n"
            "address: 10.255.0.1\n"
            "ports:\n"
            "  - {name: w0, type: memif, socket: /tmp/w0.sock}\n"
            "routes:\n"
            "  - {prefix: 10.1.0.0/24, port: w9}\n");
  const Result r = Run({"--config=" + config, "--check_config"});
  EXPECT_EQ(r.exit, 2);
  EXPECT_THAT(r.err, HasSubstr(config + ":6: routes[0].port: no port named 'w9'"));
  EXPECT_EQ(r.out, "");
  // The same without --check_config: refused before any port is opened.
  const Result run = Run({"--config=" + config});
  EXPECT_EQ(run.exit, 2);
  EXPECT_THAT(run.err, HasSubstr(config + ":6: "));
}

TEST_F(SwitchdProcessTest, BadFlagsExitWithTwo) {
  EXPECT_EQ(Run({"--no_such_flag=1"}).exit, 2);
  EXPECT_EQ(Run({"--stats_interval_s=soon", "--config=x"}).exit, 2);
  const Result missing = Run({});
  EXPECT_EQ(missing.exit, 2);
  EXPECT_THAT(missing.err, HasSubstr("--config is required"));
  EXPECT_EQ(Run({"--config=" + dir_ + "/absent.yaml"}).exit, 2);
}

TEST_F(SwitchdProcessTest, PortThatCannotOpenExitsWithOne) {
  const std::string config = dir_ + "/pci.yaml";
  WriteFile(config,
            "name: tor0\naddress: 10.255.0.1\ndpdk: {memory_mb: 64}\n"
            "ports: [{name: n0, type: pci, pci: 'ffff:ff:1f.7'}]\n");
  const Result r = Run({"--config=" + config});
  EXPECT_EQ(r.exit, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("port 'n0' (pci, line 4)"));
}

// The memif run: this process is the two memif clients (one EAL per process).
class SwitchdMemifRunTest : public SwitchdProcessTest {
 protected:
  static transport::DpdkEalOptions Eal() {
    transport::DpdkEalOptions eal;
    eal.program_name = "switchd_process_test";
    eal.memory = transport::DpdkMemory::kNoHugePages;
    eal.memory_mb = 256;
    eal.log_level = "error";
    eal.extra_args = {"--log-level=pmd.net.memif:critical"};
    return eal;
  }

  absl::StatusOr<std::unique_ptr<transport::DpdkDevice>> Client(const std::string& socket,
                                                                const char* ip,
                                                                const std::string& name) {
    transport::MemifOptions memif;
    memif.role = transport::MemifRole::kClient;
    memif.socket = socket;
    memif.socket_kind = transport::MemifSocket::kFile;
    transport::DpdkOptions options;
    options.address = Node(ip);
    options.port = absl::StrCat("net_memif_", name, ::getpid());
    options.vdev_args = transport::MemifVdevArgs(memif);
    options.source = transport::DpdkPortSource::kCreateVdev;
    options.destinations = transport::DpdkDestinations::kAny;
    options.link_timeout = TimeDelta::Zero();
    return transport::OpenDpdkDevice(options);
  }
};

TEST_F(SwitchdMemifRunTest, ForwardsBetweenTwoMemifPortsAndStopsOnSigterm) {
  const std::string config = dir_ + "/memif.yaml";
  const std::string stats = dir_ + "/stats.json";
  WriteFile(config,
            "name: tor-memif\n"
            "address: 10.255.0.1\n"
            "dpdk: {memory_mb: 128}\n"
            "ports:\n"
            "  - {name: a, type: memif, socket: " + dir_ + "/a.sock, role: server}\n"
            "  - {name: b, type: memif, socket: " + dir_ + "/b.sock, role: server}\n"
            "routes:\n"
            "  - {prefix: 10.1.0.0/24, port: a}\n"
            "  - {prefix: 10.2.0.0/24, port: b}\n");
  test::ChildProcess switchd({.stdout_path = dir_ + "/out", .stderr_path = dir_ + "/err"});
  ASSERT_TRUE(
      switchd.Spawn({Switchd(), "--config=" + config, "--stats_json=" + stats, "--log_level=warn"}));

  const absl::Status eal = transport::InitDpdkEal(Eal());
  ASSERT_TRUE(eal.ok()) << eal;
  // The server sockets appear once the daemon has opened its ports.
  const auto open_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!(std::filesystem::exists(dir_ + "/a.sock") && std::filesystem::exists(dir_ + "/b.sock"))) {
    ASSERT_TRUE(switchd.Running()) << switchd.Stderr();
    ASSERT_LT(std::chrono::steady_clock::now(), open_deadline) << switchd.Stderr();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto a = Client(dir_ + "/a.sock", "10.1.0.5", "ca");
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Client(dir_ + "/b.sock", "10.2.0.5", "cb");
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*a)->WaitForLink(TimeDelta::FromSeconds(20)).ok());
  ASSERT_TRUE((*b)->WaitForLink(TimeDelta::FromSeconds(20)).ok());

  // Frames of a job the switch does not aggregate, a -> 10.2.0.5 (port b).
  constexpr size_t kFrames = 200;
  std::vector<std::array<uint8_t, kFrameBytes>> sent(kFrames);
  for (size_t i = 0; i < kFrames; ++i) {
    wire::FrameFields f;
    f.src_ip = Ip("10.1.0.5");
    f.src_mac = transport::DefaultMacFor(f.src_ip);
    f.dst_ip = Ip("10.2.0.5");
    f.dst_mac = transport::DefaultMacFor(f.dst_ip);
    f.header.job = 9;
    f.header.seq = static_cast<uint32_t>(i);
    f.header.bitmap0 = 1;
    f.header.bitmap1 = 1;
    wire::Payload payload{};
    payload[0] = static_cast<uint32_t>(i);
    wire::EncodeFrame(f, payload, wire::kDefaultBasePort, sent[i]);
  }
  transport::Queue& tx = (*a)->queue(0);
  transport::Queue& rx = (*b)->queue(0);
  size_t next = 0;
  std::vector<std::array<uint8_t, kFrameBytes>> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got.size() < kFrames && std::chrono::steady_clock::now() < deadline) {
    size_t taken = 0;
    if (next < kFrames) {
      FrameRef burst[16];
      const size_t n = tx.tx_pool().AllocBurst({burst, std::min<size_t>(16, kFrames - next)});
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(burst[i].data, sent[next + i].data(), kFrameBytes);
        burst[i].length = kFrameBytes;
      }
      taken = tx.TxBurst({burst, n});
      transport::ReleaseFrames({burst + taken, n - taken});
      next += taken;
    }
    tx.Flush();
    FrameRef frames[32];
    const size_t n = rx.RxBurst(frames);
    for (size_t i = 0; i < n; ++i) {
      got.emplace_back();
      std::memcpy(got.back().data(), frames[i].data, kFrameBytes);
    }
    transport::ReleaseFrames({frames, n});
    if (n == 0 && taken == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ASSERT_EQ(got.size(), kFrames) << switchd.Stderr();
  EXPECT_EQ(got, sent) << "forwarded untouched and in order";

  // A second daemon on the same configuration is refused, and the first
  // lives on: the check for a live server used to connect and close at
  // once, which makes DPDK 22.11's memif server panic.
  {
    test::ChildProcess second({.stdout_path = dir_ + "/out2", .stderr_path = dir_ + "/err2"});
    ASSERT_TRUE(second.Spawn({Switchd(), "--config=" + config, "--log_level=warn"}));
    EXPECT_EQ(second.Wait(std::chrono::seconds(30)), 1);
    EXPECT_THAT(second.Stderr(), HasSubstr("another process listens on this memif socket"));
  }

  // SIGUSR1: the stats JSON appears (written atomically).
  switchd.Signal(SIGUSR1);
  const auto stats_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::filesystem::exists(stats) && std::chrono::steady_clock::now() < stats_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(std::filesystem::exists(stats));
  nlohmann::json live = nlohmann::json::parse(ReadFile(stats));
  EXPECT_EQ(live["name"], "tor-memif");
  EXPECT_EQ(live["ports"][0]["rx_frames"], kFrames);

  // SIGTERM: a clean stop, exit 0, the final JSON.
  std::filesystem::remove(stats);
  switchd.Signal(SIGTERM);
  EXPECT_EQ(switchd.Wait(std::chrono::seconds(20)), 0) << switchd.Stderr();
  ASSERT_TRUE(std::filesystem::exists(stats));
  nlohmann::json last = nlohmann::json::parse(ReadFile(stats));
  ASSERT_EQ(last["ports"].size(), 2u);
  EXPECT_EQ(last["ports"][0]["name"], "a");
  EXPECT_EQ(last["ports"][0]["rx_frames"], kFrames);
  EXPECT_EQ(last["ports"][1]["tx_frames"], kFrames);
  EXPECT_EQ(last["ports"][1]["tx_dropped"], 0);
  EXPECT_EQ(last["pipeline"]["packets"], kFrames);
  EXPECT_EQ(last["pipeline"]["not_aggregated"], kFrames);
  EXPECT_EQ(last["pipeline"]["malformed_by_reason"]["bad_ipv4_checksum"], 0);
  EXPECT_EQ(last["aggregators_in_use"], 0);
  EXPECT_EQ(last["routing"]["unroutable"], 0);
  EXPECT_GT(last["uptime_s"].get<double>(), 0.0);
}

}  // namespace
}  // namespace atp::switchd
