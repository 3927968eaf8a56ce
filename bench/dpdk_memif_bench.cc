// bench/dpdk_memif_bench.cc: frames per second of 306-byte ATP frames between
// two processes over memif, with libatp's DPDK backend, beside dpdk-testpmd
// (txonly -> rxonly) on the same memif setup, measured back to back.
//
//   dpdk_memif_bench --compare --runs=3 --seconds=5
//       runs, per repetition: testpmd rxonly (server, CPU 1) <- testpmd txonly
//       (client, CPU 0); then libatp rx (server, CPU 1) <- libatp tx (client,
//       CPU 0); prints every command line, each run's mean rate over the
//       window, and the best and spread of each.
//   dpdk_memif_bench --role=rx --socket=/atpb --lcores=0@1 --seconds=5
//   dpdk_memif_bench --role=tx --socket=/atpb --lcores=0@0 [--tx=burst|segmented]
//       one side by hand. rx prints "RESULT frames_per_second=<mean>".
//
// libatp tx modes: `burst` (the default; what testpmd txonly does: take
// mbufs, write the 58-byte L2-L4 + ATP header, send 32 at a time through
// TxBurst) and `segmented` (TxSegmented jobs of 32 segments: the template and
// a 248-byte payload copied into each frame, the engine's real path).
// The rx side checks what it measures: every frame is a whole ATP frame for
// queue 0 (rx_bad_frames stays 0) and positions arrive in order with no gap.
//
// Only one pair of busy pollers runs at a time (two cores): the runs are
// sequential, each process pinned to its own CPU.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "atp/transport/dpdk.h"
#include "atp/transport/segmentation.h"
#include "atp/wire.h"

extern char** environ;

namespace atp::transport {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kBurst = 32;
constexpr const char* kTestpmd = "/usr/bin/dpdk-testpmd";
constexpr const char* kStdbuf = "/usr/bin/stdbuf";

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true, std::memory_order_relaxed); }

std::string Flag(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == name) return "1";
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
  }
  return fallback;
}

DeviceAddress Node(const char* ip) {
  const wire::Ipv4Address ipv4 = *wire::Ipv4Address::Parse(ip);
  return {ipv4, DefaultMacFor(ipv4)};
}

// Template: a valid frame from the tx node to the rx node, queue 0.
std::array<uint8_t, kFrameBytes> Template() {
  wire::FrameFields fields;
  fields.src_mac = Node("10.0.0.2").mac;
  fields.dst_mac = Node("10.0.0.1").mac;
  fields.src_ip = Node("10.0.0.2").ipv4;
  fields.dst_ip = Node("10.0.0.1").ipv4;
  fields.header.job = 1;
  fields.header.seq = wire::MakeSeq(0, 0);
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  fields.header.fan_in0 = 1;
  fields.header.fan_in1 = 1;
  wire::Payload payload{};
  std::array<uint8_t, kFrameBytes> frame{};
  wire::EncodeFrame(fields, payload, wire::kDefaultBasePort, frame);
  return frame;
}

void StoreSeq(uint8_t* frame, uint32_t seq) {
  frame[kSeqOffset] = static_cast<uint8_t>(seq >> 16);
  frame[kSeqOffset + 1] = static_cast<uint8_t>(seq >> 8);
  frame[kSeqOffset + 2] = static_cast<uint8_t>(seq);
}
uint32_t LoadSeq(const uint8_t* frame) {
  return (uint32_t{frame[kSeqOffset]} << 16) | (uint32_t{frame[kSeqOffset + 1]} << 8) |
         frame[kSeqOffset + 2];
}

std::unique_ptr<DpdkDevice> OpenSide(MemifRole role, const std::string& socket,
                                     const std::string& lcores) {
  DpdkEalOptions eal;
  eal.program_name = "dpdk_memif_bench";
  eal.lcores = lcores;
  eal.log_level = "error";
  eal.extra_args = {"--log-level=pmd.net.memif:critical"};
  if (absl::Status s = InitDpdkEal(eal); !s.ok()) {
    std::fprintf(stderr, "EAL: %s\n", std::string(s.message()).c_str());
    std::exit(2);
  }
  MemifOptions memif;
  memif.role = role;
  memif.socket = socket;
  DpdkOptions options;
  options.device.rx_pool_frames = 4096;
  options.device.tx_pool_frames = 4096;
  options.address = Node(role == MemifRole::kServer ? "10.0.0.1" : "10.0.0.2");
  options.peers.push_back({Node(role == MemifRole::kServer ? "10.0.0.2" : "10.0.0.1"), 1});
  options.port = role == MemifRole::kServer ? "net_memif_rx" : "net_memif_tx";
  options.source = DpdkPortSource::kCreateVdev;
  options.vdev_args = MemifVdevArgs(memif);
  options.link_timeout = TimeDelta::Zero();
  absl::StatusOr<std::unique_ptr<DpdkDevice>> device = OpenDpdkDevice(options);
  if (!device.ok()) {
    std::fprintf(stderr, "open: %s\n", std::string(device.status().message()).c_str());
    std::exit(3);
  }
  std::printf("listening\n");  // the memif socket exists: the other side may start
  std::fflush(stdout);
  if (absl::Status s = (*device)->WaitForLink(TimeDelta::FromSeconds(30)); !s.ok()) {
    std::fprintf(stderr, "link: %s\n", std::string(s.message()).c_str());
    std::exit(4);
  }
  return *std::move(device);
}

// RunRx: receives and releases for `warmup` + `seconds`; prints the mean rate
// over the last `seconds`. Fails (exit 5) if a frame was bad, lost or late.
int RunRx(const std::string& socket, const std::string& lcores, int warmup, int seconds) {
  std::unique_ptr<DpdkDevice> device = OpenSide(MemifRole::kServer, socket, lcores);
  Queue& queue = device->queue(0);
  uint64_t frames = 0;
  uint64_t out_of_order = 0;
  uint32_t expected = 0;
  bool started = false;
  uint64_t window_start_frames = 0;
  Clock::time_point window_start;
  const Clock::time_point begin = Clock::now();
  const Clock::time_point window_open = begin + std::chrono::seconds(warmup);
  const Clock::time_point end = window_open + std::chrono::seconds(seconds);
  bool in_window = false;
  for (uint64_t polls = 0; !g_stop.load(std::memory_order_relaxed); ++polls) {
    FrameRef rx[kBurst];
    const size_t n = queue.RxBurst(rx);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t position = wire::PositionOfSeq(LoadSeq(rx[i].data));
      if (started && position != expected) ++out_of_order;
      started = true;
      expected = (position + 1) & wire::kPositionMask;
    }
    ReleaseFrames({rx, n});
    frames += n;
    if ((polls & 1023) == 0) {
      const Clock::time_point now = Clock::now();
      if (!in_window && now >= window_open) {
        in_window = true;
        window_start = now;
        window_start_frames = frames;
      }
      if (now >= end) {
        const double elapsed = std::chrono::duration<double>(now - window_start).count();
        const double rate = static_cast<double>(frames - window_start_frames) / elapsed;
        const QueueStats stats = queue.stats();
        std::printf("RESULT frames_per_second=%.0f frames=%llu bad=%llu out_of_order=%llu\n", rate,
                    static_cast<unsigned long long>(frames),
                    static_cast<unsigned long long>(stats.rx_bad_frames),
                    static_cast<unsigned long long>(out_of_order));
        std::fflush(stdout);
        const bool checked = stats.rx_bad_frames == 0 && out_of_order == 0 && frames > 0;
        device.reset();
        return checked ? 0 : 5;
      }
    }
  }
  return 6;
}

// RunTx: sends until the link goes down (the rx side is done) or a signal.
int RunTx(const std::string& socket, const std::string& lcores, const std::string& mode) {
  std::unique_ptr<DpdkDevice> device = OpenSide(MemifRole::kClient, socket, lcores);
  Queue& queue = device->queue(0);
  const std::array<uint8_t, kFrameBytes> frame = Template();
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  std::array<const uint8_t*, kBurst> payloads;
  payloads.fill(payload.data());
  uint32_t position = 0;
  FrameRef pending[kBurst];
  size_t pending_count = 0;
  for (uint64_t loops = 0; !g_stop.load(std::memory_order_relaxed); ++loops) {
    if (mode == "segmented") {
      SegmentationJob job = SegmentationJob::FromFrame(frame, payloads);
      StoreSeq(job.header.data(), wire::MakeSeq(0, position));
      const size_t sent = queue.TxSegmented(job);
      position = (position + static_cast<uint32_t>(sent)) & wire::kPositionMask;
    } else {
      // Frames the port refused last time go first, in order.
      const size_t fresh = queue.tx_pool().AllocBurst({pending + pending_count, kBurst - pending_count});
      for (size_t i = pending_count; i < pending_count + fresh; ++i) {
        std::memcpy(pending[i].data, frame.data(), kSegmentTemplateBytes);
        StoreSeq(pending[i].data, wire::MakeSeq(0, position));
        position = (position + 1) & wire::kPositionMask;
        pending[i].length = kFrameBytes;
      }
      pending_count += fresh;
      const size_t sent = queue.TxBurst({pending, pending_count});
      std::move(pending + sent, pending + pending_count, pending);
      pending_count -= sent;
    }
    queue.Flush();
    if ((loops & 4095) == 0 && !device->link_up()) break;
  }
  ReleaseFrames({pending, pending_count});
  device.reset();
  return 0;
}

// Child: a spawned process whose stdout is read through a pipe.
struct Child {
  pid_t pid = -1;
  int out = -1;
};

Child Spawn(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) std::exit(7);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<char*> argv;
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  Child child;
  if (::posix_spawn(&child.pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "cannot run %s\n", args[0].c_str());
    std::exit(7);
  }
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  child.out = pipe_fds[0];
  return child;
}

// ReadUntil: appends what `fd` gives to `text` until it contains `marker`
// (true) or `timeout` passes or the writer closes it (false).
bool ReadUntil(int fd, std::string& text, const std::string& marker, std::chrono::seconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  while (text.find(marker) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd readable{fd, POLLIN, 0};
    if (::poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n <= 0) return false;
    text.append(buffer, static_cast<size_t>(n));
  }
  return true;
}

std::string ReadAll(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof(buffer))) > 0;) text.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  return text;
}

void Stop(const Child& child) {
  ::kill(child.pid, SIGINT);
  int status = 0;
  for (int i = 0; i < 500 && ::waitpid(child.pid, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(child.pid, SIGKILL);  // no-op if it is gone
  ::waitpid(child.pid, &status, WNOHANG);
}

// TestpmdMeanRate: the mean of testpmd's per-second Rx-pps lines (rxonly has
// one port) over `seconds` of them, after the first non-zero one (the link
// is up) and `warmup` more.
double TestpmdMeanRate(const std::string& output, int warmup, int seconds) {
  std::vector<double> rates;
  for (size_t at = 0; (at = output.find("Rx-pps:", at)) != std::string::npos; at += 7) {
    const double rate = std::strtod(output.c_str() + at + 7, nullptr);
    if (rate > 0 || !rates.empty()) rates.push_back(rate);
  }
  const size_t first = static_cast<size_t>(warmup) + 1;
  if (rates.size() <= first) return 0;
  const size_t last = std::min(rates.size(), first + static_cast<size_t>(seconds));
  double sum = 0;
  for (size_t i = first; i < last; ++i) sum += rates[i];
  return sum / static_cast<double>(last - first);
}

std::vector<std::string> TestpmdArgs(const std::string& lcores, const std::string& vdev,
                                     const std::string& mode) {
  // stdbuf: testpmd's stdout is a pipe here; line-buffer it so that the
  // start marker arrives when it is printed.
  std::vector<std::string> args = {kStdbuf, "-oL", kTestpmd, "--lcores=" + lcores, "--no-huge", "-m", "512",
                                   "--no-pci", "--no-shconf", "--no-telemetry", "--vdev=" + vdev,
                                   "--log-level=error", "--", "--forward-mode=" + mode,
                                   "--total-num-mbufs=16384", "--stats-period=1",
                                   "--nb-cores=1", "--burst=32"};
  if (mode == "txonly") args.push_back("--txpkts=306");
  return args;
}

int Compare(const std::string& self, int runs, int warmup, int seconds, const std::string& tx_mode) {
  std::vector<double> testpmd_rates;
  std::vector<double> libatp_rates;
  for (int run = 0; run < runs; ++run) {
    {
      const std::string socket = absl::StrCat("/atpbench_tp", ::getpid(), "_", run);
      const std::string vdev = "net_memif0,socket-abstract=yes,socket=" + socket;
      const std::vector<std::string> rx = TestpmdArgs("0@1,1@1", vdev + ",role=server", "rxonly");
      const std::vector<std::string> tx = TestpmdArgs("0@0,1@0", vdev + ",role=client", "txonly");
      if (run == 0) {
        std::printf("testpmd rx: %s\ntestpmd tx: %s\n", absl::StrJoin(rx, " ").c_str(),
                    absl::StrJoin(tx, " ").c_str());
      }
      Child receiver = Spawn(rx);
      // memif's server must listen before testpmd's client starts (it tries once).
      std::string output;
      if (!ReadUntil(receiver.out, output, "packet forwarding - ports=", std::chrono::seconds(60))) {
        std::printf("testpmd rx did not start forwarding within 60 s\n");
      }
      Child sender = Spawn(tx);
      std::this_thread::sleep_for(std::chrono::seconds(warmup + seconds + 3));
      Stop(sender);
      Stop(receiver);
      output += ReadAll(receiver.out);
      (void)ReadAll(sender.out);
      testpmd_rates.push_back(TestpmdMeanRate(output, warmup, seconds));
    }
    {
      const std::string socket = absl::StrCat("/atpbench_lib", ::getpid(), "_", run);
      const std::vector<std::string> rx = {self, "--role=rx", "--socket=" + socket, "--lcores=0@1",
                                           absl::StrCat("--warmup=", warmup),
                                           absl::StrCat("--seconds=", seconds)};
      const std::vector<std::string> tx = {self, "--role=tx", "--socket=" + socket, "--lcores=0@0",
                                           "--tx=" + tx_mode};
      if (run == 0) {
        std::printf("libatp rx: %s\nlibatp tx: %s\n", absl::StrJoin(rx, " ").c_str(),
                    absl::StrJoin(tx, " ").c_str());
      }
      Child receiver = Spawn(rx);
      std::string output;
      (void)ReadUntil(receiver.out, output, "listening", std::chrono::seconds(60));
      Child sender = Spawn(tx);
      output += ReadAll(receiver.out);  // until the receiver exits
      int status = 0;
      ::waitpid(receiver.pid, &status, 0);
      Stop(sender);
      (void)ReadAll(sender.out);
      const size_t at = output.find("frames_per_second=");
      const double rate = at == std::string::npos ? 0 : std::strtod(output.c_str() + at + 18, nullptr);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::printf("libatp run %d FAILED its checks: %s", run, output.c_str());
        return 1;
      }
      libatp_rates.push_back(rate);
    }
    std::printf("run %d: testpmd %.2f Mpps, libatp (%s) %.2f Mpps\n", run, testpmd_rates.back() / 1e6,
                tx_mode.c_str(), libatp_rates.back() / 1e6);
    std::fflush(stdout);
  }
  const auto summary = [](const std::vector<double>& rates) {
    const auto [low, high] = std::minmax_element(rates.begin(), rates.end());
    return std::pair<double, double>{*high, *high - *low};
  };
  const auto [testpmd_best, testpmd_spread] = summary(testpmd_rates);
  const auto [libatp_best, libatp_spread] = summary(libatp_rates);
  std::printf("testpmd  best %.2f Mpps, spread %.2f Mpps over %d runs\n", testpmd_best / 1e6,
              testpmd_spread / 1e6, runs);
  std::printf("libatp   best %.2f Mpps, spread %.2f Mpps over %d runs (tx=%s)\n", libatp_best / 1e6,
              libatp_spread / 1e6, runs, tx_mode.c_str());
  std::printf("libatp / testpmd (best): %.1f%%\n", 100.0 * libatp_best / testpmd_best);
  return 0;
}

}  // namespace
}  // namespace atp::transport

int main(int argc, char** argv) {
  using namespace atp::transport;  // NOLINT: the tool's entry point
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const std::string role = Flag(argc, argv, "--role", "");
  const std::string socket = Flag(argc, argv, "--socket", "/atpbench");
  const std::string lcores = Flag(argc, argv, "--lcores", "");
  const std::string tx_mode = Flag(argc, argv, "--tx", "burst");
  const int warmup = std::atoi(Flag(argc, argv, "--warmup", "2").c_str());
  const int seconds = std::atoi(Flag(argc, argv, "--seconds", "5").c_str());
  if (Flag(argc, argv, "--compare", "") == "1") {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) return 7;
    self[n] = '\0';
    return Compare(self, std::atoi(Flag(argc, argv, "--runs", "3").c_str()), warmup, seconds, tx_mode);
  }
  if (role == "rx") return RunRx(socket, lcores, warmup, seconds);
  if (role == "tx") return RunTx(socket, lcores, tx_mode);
  std::fprintf(stderr, "usage: %s --compare [--runs=3 --seconds=5 --warmup=2 --tx=burst|segmented]\n"
                       "       %s --role=rx|tx --socket=/name --lcores=0@1 ...\n", argv[0], argv[0]);
  return 2;
}
