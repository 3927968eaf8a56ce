// atp-ps and atp-throughput --role=worker as real processes, joined without a
// switch: one worker and the PS over one memif link (the PS is the memif
// server and delivers parameter packets by unicast), the worker giving up at
// its deadline when the PS is gone, and bad flags refused with exit status 2
// naming the flag. Children are spawned with posix_spawn, their output goes
// to files in a fresh directory, and they are killed and reaped by the
// fixture whatever happens (tests/common/child_process.h). Nothing sleeps to synchronise:
// every wait polls a condition with a deadline.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "atp/config.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/common/child_process.h"

namespace atp {
namespace {

using ::testing::HasSubstr;
using test::ChildProcess;
using Clock = std::chrono::steady_clock;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// PollUntil: calls `done` every 10 ms until it is true (returns true) or
// `patience` has passed (returns false).
bool PollUntil(const std::function<bool()>& done, std::chrono::milliseconds patience) {
  const auto deadline = Clock::now() + patience;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class EndpointProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/atp-endpoints-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr) << std::strerror(errno);
    dir_ = pattern;
    socket_ = dir_ + "/ps.sock";
  }
  void TearDown() override {
    children_.clear();  // kills and reaps what is still running
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  ChildProcess& Child(const std::string& name) {
    children_.push_back(std::make_unique<ChildProcess>(
        test::ChildOutput{.stdout_path = dir_ + "/" + name + ".out",
                          .stderr_path = dir_ + "/" + name + ".err"}));
    return *children_.back();
  }

  // The flags every node of the one-worker job shares.
  std::vector<std::string> JobFlags(int io_threads) const {
    return {"--transport=dpdk", "--dpdk_port=memif", "--memif_socket=" + socket_, "--job=3",
            "--racks=1", "--workers_per_rack=1", absl::StrCat("--io_threads=", io_threads),
            "--dpdk_memory_mb=128"};
  }

  std::vector<std::string> PsArgs(int io_threads) const {
    std::vector<std::string> args = {ATP_PS_BINARY};
    for (const std::string& f : JobFlags(io_threads)) args.push_back(f);
    args.insert(args.end(), {"--memif_role=server", "--delivery=unicast",
                             "--stats_json=" + dir_ + "/ps.json"});
    return args;
  }

  std::vector<std::string> WorkerArgs(int io_threads, std::vector<std::string> extra) const {
    std::vector<std::string> args = {ATP_THROUGHPUT_BINARY, "--role=worker", "--rank=0"};
    for (const std::string& f : JobFlags(io_threads)) args.push_back(f);
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::string dir_;
  std::string socket_;
  std::vector<std::unique_ptr<ChildProcess>> children_;
};

// FreeUdpPorts: a base port whose `count` consecutive UDP ports on 127.0.0.1
// could all be bound just now (the test binds them again at once).
uint16_t FreeUdpPorts(int count) {
  for (uint32_t attempt = 0; attempt < 200; ++attempt) {
    const uint16_t base = static_cast<uint16_t>(
        20000 + (static_cast<uint32_t>(::getpid()) * 7919u + attempt * 104729u) % 40000u);
    std::vector<int> fds;
    bool all = true;
    for (int i = 0; i < count && all; ++i) {
      const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(base + i));
      all = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      if (fd >= 0) fds.push_back(fd);
    }
    for (int fd : fds) ::close(fd);
    if (all) return base;
  }
  return 0;
}

// Over the kernel UDP overlay (no root, no DPDK): each endpoint's gateway is
// the other one, a direct link.
TEST_F(EndpointProcessTest, WorkerAndParameterServerOverTheKernelUdpOverlay) {
  const uint16_t worker_port = FreeUdpPorts(4);
  ASSERT_NE(worker_port, 0);
  const uint16_t ps_port = static_cast<uint16_t>(worker_port + 2);
  const std::vector<std::string> job = {"--transport=kernel_udp", "--job=4", "--racks=1",
                                        "--workers_per_rack=1", "--io_threads=2"};
  const std::string worker_socket = absl::StrCat("127.0.0.1:", worker_port);
  const std::string ps_socket = absl::StrCat("127.0.0.1:", ps_port);
  ChildProcess& ps = Child("ps");
  std::vector<std::string> ps_args = {ATP_PS_BINARY, "--delivery=unicast", "--udp_bind=" + ps_socket,
                                      "--udp_gateway=" + worker_socket,
                                      "--stats_json=" + dir_ + "/ps.json"};
  ps_args.insert(ps_args.end(), job.begin(), job.end());
  ASSERT_TRUE(ps.Spawn(ps_args));
  ASSERT_TRUE(PollUntil([&] { return absl::StrContains(ps.Stderr(), "ready"); },
                        std::chrono::seconds(20)))
      << ps.Stderr();
  ChildProcess& worker = Child("worker");
  std::vector<std::string> worker_args = {
      ATP_THROUGHPUT_BINARY, "--role=worker", "--rank=0", "--udp_bind=" + worker_socket,
      "--udp_gateway=" + ps_socket, "--iterations=3", "--tensor_floats=40000", "--json",
      "--deadline_s=60"};
  worker_args.insert(worker_args.end(), job.begin(), job.end());
  ASSERT_TRUE(worker.Spawn(worker_args));
  ASSERT_EQ(worker.Wait(std::chrono::seconds(90)), 0)
      << "worker stderr:\n" << worker.Stderr() << "\nps stderr:\n" << ps.Stderr();
  const nlohmann::json result = nlohmann::json::parse(worker.Stdout(), nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << worker.Stdout();
  EXPECT_EQ(result["verified"], true);
  EXPECT_EQ(result["transport"], "kernel_udp");
  EXPECT_EQ(result["completed_iterations"], 3);
  ps.Signal(SIGINT);
  ASSERT_EQ(ps.Wait(std::chrono::seconds(30)), 0) << ps.Stderr();
  const nlohmann::json stats = nlohmann::json::parse(ReadFile(dir_ + "/ps.json"), nullptr, false);
  ASSERT_FALSE(stats.is_discarded());
  // ceil(40000 / 62) fragments per iteration, and the start barrier's one
  // before each (atp-throughput --start_barrier).
  EXPECT_EQ(stats["ps"]["completed"], 3 * (646 + 1));
}

TEST_F(EndpointProcessTest, WorkerAndParameterServerOverOneMemifLink) {
  if (!ATP_HAVE_DPDK) GTEST_SKIP() << "libatp built without DPDK";
  // The worker (memif client) starts first: it keeps trying to connect
  // until the PS (memif server) is there.
  ChildProcess& worker = Child("worker");
  ASSERT_TRUE(worker.Spawn(WorkerArgs(
      2, {"--iterations=4", "--tensor_floats=50000", "--seed=11", "--json", "--deadline_s=90"})));
  ChildProcess& ps = Child("ps");
  ASSERT_TRUE(ps.Spawn(PsArgs(2)));

  const int worker_exit = worker.Wait(std::chrono::seconds(120));
  ASSERT_EQ(worker_exit, 0) << "worker stderr:\n" << worker.Stderr() << "\nps stderr:\n" << ps.Stderr();
  const nlohmann::json result = nlohmann::json::parse(worker.Stdout(), nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << worker.Stdout();
  EXPECT_EQ(result["verified"], true);
  EXPECT_EQ(result["completed_iterations"], 4);
  EXPECT_EQ(result["wrong_values"], 0);
  EXPECT_EQ(result["rank"], 0);
  EXPECT_EQ(result["job"], 3);
  EXPECT_EQ(result["transport"], "dpdk");
  EXPECT_GT(result["goodput_bytes_per_s"].get<double>(), 0.0);
  EXPECT_TRUE(result.contains("retransmissions"));
  EXPECT_TRUE(result.contains("timeouts"));
  EXPECT_EQ(result["device"]["tx_unroutable"], 0);
  EXPECT_THAT(worker.Stderr(), HasSubstr("[4/4]"));  // the progress lines

  // The PS runs until told to stop, then writes its counters and exits 0.
  EXPECT_TRUE(PollUntil([&] { return absl::StrContains(ps.Stderr(), "ready"); },
                        std::chrono::seconds(10)));
  ps.Signal(SIGTERM);
  ASSERT_EQ(ps.Wait(std::chrono::seconds(30)), 0) << ps.Stderr();
  const nlohmann::json stats = nlohmann::json::parse(ReadFile(dir_ + "/ps.json"), nullptr, false);
  ASSERT_FALSE(stats.is_discarded()) << ReadFile(dir_ + "/ps.json");
  EXPECT_EQ(stats["tool"], "atp-ps");
  EXPECT_EQ(stats["running"], false);
  // 4 iterations of ceil(50000 / 62) = 807 fragments and the start
  // barrier's one, each completed once from the one worker's contribution.
  EXPECT_EQ(stats["ps"]["completed"], 4 * (807 + 1));
  EXPECT_EQ(stats["ps"]["contributions"], 4 * (807 + 1));
  EXPECT_EQ(stats["ps"]["decode_errors"], 0);
  EXPECT_EQ(stats["device"]["tx_unroutable"], 0);
  EXPECT_EQ(stats["device"]["queues"], 2);
}

TEST_F(EndpointProcessTest, WorkerGivesUpAtItsDeadlineWhenThePsIsGone) {
  if (!ATP_HAVE_DPDK) GTEST_SKIP() << "libatp built without DPDK";
  ChildProcess& ps = Child("ps");
  ASSERT_TRUE(ps.Spawn(PsArgs(1)));
  ChildProcess& worker = Child("worker");
  ASSERT_TRUE(worker.Spawn(WorkerArgs(
      1, {"--iterations=1000000", "--tensor_floats=620", "--json", "--deadline_s=10"})));
  // Once aggregations complete, the PS dies.
  ASSERT_TRUE(PollUntil([&] { return absl::StrContains(worker.Stderr(), "[10/"); },
                        std::chrono::seconds(30)))
      << "worker stderr:\n" << worker.Stderr() << "\nps stderr:\n" << ps.Stderr();
  ps.Signal(SIGKILL);
  ps.Wait(std::chrono::seconds(10));
  const auto killed = Clock::now();
  EXPECT_EQ(worker.Wait(std::chrono::seconds(40)), 1) << worker.Stderr();
  EXPECT_LT(Clock::now() - killed, std::chrono::seconds(15));
  EXPECT_THAT(worker.Stderr(), HasSubstr("--deadline_s=10 passed"));
  const nlohmann::json result = nlohmann::json::parse(worker.Stdout(), nullptr, false);
  ASSERT_FALSE(result.is_discarded()) << worker.Stdout();
  EXPECT_EQ(result["verified"], false);
  EXPECT_THAT(result["error"].get<std::string>(), HasSubstr("no aggregate arrived"));
}

TEST_F(EndpointProcessTest, WorkerWithoutItsSwitchFailsClearly) {
  if (!ATP_HAVE_DPDK) GTEST_SKIP() << "libatp built without DPDK";
  ChildProcess& worker = Child("worker");
  ASSERT_TRUE(worker.Spawn(WorkerArgs(1, {"--iterations=1", "--deadline_s=1"})));
  EXPECT_EQ(worker.Wait(std::chrono::seconds(30)), 1);
  // The memif client opens without its server (it keeps retrying the
  // connection), so what times out is the link.
  EXPECT_THAT(worker.Stderr(), HasSubstr("did not come up within"));
  EXPECT_THAT(worker.Stderr(), HasSubstr("is the switch (or the memif peer) running"));
}

TEST_F(EndpointProcessTest, BadFlagsExitWithTwoNamingTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string ps = ATP_PS_BINARY;
  const std::string tp = ATP_THROUGHPUT_BINARY;
  const std::vector<Case> cases = {
      {{ps, "--no_such_flag=1"}, "--no_such_flag"},
      {{ps, "--job=seven"}, "--job"},
      {{ps, "--job=0", "--memif_socket=/tmp/x.sock"}, "--job"},
      {{ps, "--dpdk_port=vhost"}, "--dpdk_port"},
      {{ps, "--memif_role=sideways", "--memif_socket=/tmp/x.sock"}, "--memif_role"},
      {{ps, "--delivery=broadcast"}, "--delivery"},
      {{ps}, "--memif_socket"},
      {{ps, "--transport=kernel_udp", "--udp_bind=127.0.0.1:47000"}, "--udp_gateway"},
      {{ps, "--transport=kernel_udp", "--udp_bind=127.0.0.1", "--udp_gateway=127.0.0.1:47000"},
       "--udp_bind"},
      {{ps, "stray"}, "stray"},
      {{tp, "--role=worker", "--memif_socket=/tmp/x.sock"}, "--rank"},
      {{tp, "--role=worker", "--rank=4", "--memif_socket=/tmp/x.sock"}, "--rank"},
      {{tp, "--role=worker", "--rank=0", "--memif_socket=/tmp/x.sock", "--deadline_s=0"},
       "--deadline_s"},
      {{tp, "--role=boss"}, "--role"},
      {{tp, "--rank=1"}, "--rank"},
      {{tp, "--transport=dpdk"}, "--transport"},  // the in-process job
  };
  int index = 0;
  for (const Case& c : cases) {
    ChildProcess& child = Child(absl::StrCat("bad", index++));
    ASSERT_TRUE(child.Spawn(c.args));
    EXPECT_EQ(child.Wait(std::chrono::seconds(30)), 2) << c.args[1] << "\n" << child.Stderr();
    EXPECT_THAT(child.Stderr(), HasSubstr(c.message)) << c.args.back();
  }
}

}  // namespace
}  // namespace atp
