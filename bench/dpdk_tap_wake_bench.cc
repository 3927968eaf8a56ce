// bench/dpdk_tap_wake_bench.cc: what a sleeping I/O thread costs a DPDK
// queue's frames, with the queue's Rx interrupt as its wait fd (net_tap:
// transport/dpdk/rx_wait.h) against the timed back-off a queue without one
// gets (memif: sleeps of 20 us doubling to 1 ms, atp/options.h
// PollingOptions), side by side in one run.
//
//   dpdk_tap_wake_bench --pings=500 --gap_us=2000 --rounds=3     (root)
//
// Two net_tap ports on a kernel bridge in a test namespace (the conformance
// harness's tap medium). B's queue is read by a host::PollingThread with the
// runtime's default back-off, given the queue's wait fd or not; A sends one
// frame, waits until B's thread took it, pauses `gap_us` (so that B's thread
// is asleep when the next one comes) and sends the next. Per mode: the
// latency from A's send to B's RxBurst returning the frame (p50, p99, max),
// how often B's thread slept, and its CPU time per ping. Checks what it
// measures: every frame arrives, in order.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "atp/transport.h"
#include "atp/wire.h"
#include "lib/host/polling_thread.h"
#include "tests/transport/dpdk/dpdk_harness.h"
#include "tests/transport/dpdk/test_eal.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  uint32_t pings = 500;
  uint32_t gap_us = 2000;
  uint32_t rounds = 3;
};

bool ParseFlag(const std::string& arg, const char* name, uint32_t* value) {
  const std::string prefix = absl::StrCat("--", name, "=");
  if (arg.rfind(prefix, 0) != 0) return false;
  if (!absl::SimpleAtoi(arg.substr(prefix.size()), value) || *value == 0) {
    std::fprintf(stderr, "dpdk_tap_wake_bench: %s: a positive integer\n", arg.c_str());
    std::exit(2);
  }
  return true;
}

int64_t ThreadCpuNanos() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

struct ModeResult {
  std::vector<double> latency_us;  // sorted
  uint64_t sleeps = 0;
  double cpu_us_per_ping = 0;
  bool exact = true;
};

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
}

// RunMode: `pings` ping frames A -> B, B's thread sleeping on its queue's
// wait fd (`use_wait_fd`) or on the timed back-off alone.
ModeResult RunMode(testing::DevicePair& pair, bool use_wait_fd, const Flags& flags) {
  Queue& rx = pair.b->queue(0);
  std::atomic<int64_t> sent_at_ns{0};
  std::atomic<uint32_t> received{0};
  std::vector<double> latency_us;  // B's thread's until it stops
  latency_us.reserve(flags.pings);
  bool in_order = true;
  int64_t cpu_first = -1;
  int64_t cpu_last = 0;
  auto step = [&](TimePoint) {
    if (cpu_first < 0) cpu_first = ThreadCpuNanos();
    FrameRef frames[32];
    const size_t n = rx.RxBurst(frames);
    const int64_t now_ns = Clock::now().time_since_epoch().count();
    for (size_t i = 0; i < n; ++i) {
      wire::FrameFields fields;
      const uint32_t expected = received.load(std::memory_order_relaxed) + static_cast<uint32_t>(i);
      if (wire::DecodeFrame({frames[i].data, frames[i].length}, pair.b->base_port(), &fields,
                            nullptr) != wire::DecodeError::kOk ||
          fields.header.position() != (expected & wire::kPositionMask)) {
        in_order = false;
      }
      latency_us.push_back(static_cast<double>(now_ns - sent_at_ns.load()) / 1000.0);
    }
    ReleaseFrames({frames, n});
    cpu_last = ThreadCpuNanos();
    if (n > 0) received.fetch_add(static_cast<uint32_t>(n), std::memory_order_release);
    return host::StepResult{.did_work = n > 0};
  };
  absl::StatusOr<std::unique_ptr<host::PollingThread>> thread = host::PollingThread::Start(
      "tap-rx", PollingOptions{}, {use_wait_fd ? rx.wait_fd() : -1}, step);
  if (!thread.ok()) {
    std::fprintf(stderr, "dpdk_tap_wake_bench: %s\n",
                 std::string(thread.status().message()).c_str());
    std::exit(1);
  }
  ModeResult result;
  for (uint32_t i = 0; i < flags.pings; ++i) {
    const testing::FrameBytes frame =
        testing::MakeFrame(pair.a->address(), pair.b->address(),
                           testing::FrameSpec{wire::MakeSeq(0, i & wire::kPositionMask), i});
    sent_at_ns.store(Clock::now().time_since_epoch().count());
    if (testing::SendAll(pair.a->queue(0), {frame}, nullptr) != 1) {
      result.exact = false;
      break;
    }
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (received.load(std::memory_order_acquire) <= i && Clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (received.load() <= i) {
      result.exact = false;
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(flags.gap_us));  // pacing, not a sync
  }
  result.sleeps = (*thread)->sleeps();
  thread->reset();  // joins: B's thread's vectors are ours now
  result.exact = result.exact && in_order && latency_us.size() == flags.pings;
  result.cpu_us_per_ping = static_cast<double>(cpu_last - cpu_first) / 1000.0 / flags.pings;
  std::sort(latency_us.begin(), latency_us.end());
  result.latency_us = std::move(latency_us);
  return result;
}

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!ParseFlag(arg, "pings", &flags.pings) && !ParseFlag(arg, "gap_us", &flags.gap_us) &&
        !ParseFlag(arg, "rounds", &flags.rounds)) {
      std::fprintf(stderr, "usage: dpdk_tap_wake_bench [--pings=N] [--gap_us=N] [--rounds=N]\n");
      return 2;
    }
  }
  if (absl::Status eal = testing::EnsureTestEal(); !eal.ok()) {
    std::fprintf(stderr, "dpdk_tap_wake_bench: %s\n", std::string(eal.message()).c_str());
    return 1;
  }
  std::unique_ptr<testing::BackendHarness> harness =
      testing::MakeDpdkHarness(testing::DpdkMedium::kTap);
  absl::StatusOr<testing::DevicePair> pair = harness->Open(DeviceOptions{});
  if (!pair.ok()) {
    std::fprintf(stderr, "dpdk_tap_wake_bench: cannot open two tap ports (root?): %s\n",
                 std::string(pair.status().message()).c_str());
    return 1;
  }
  if (pair->b->queue(0).wait_fd() < 0) {
    std::fprintf(stderr, "dpdk_tap_wake_bench: the tap queue has no wait fd\n");
    return 1;
  }
  std::printf("%u pings per run, %u us apart, B's thread with the default back-off\n", flags.pings,
              flags.gap_us);
  std::printf("%-28s %5s %9s %9s %9s %8s %12s %s\n", "B's thread sleeps on", "round", "p50 us",
              "p99 us", "max us", "sleeps", "cpu us/ping", "check");
  bool all_exact = true;
  for (uint32_t round = 1; round <= flags.rounds; ++round) {
    for (bool use_wait_fd : {true, false}) {
      const ModeResult r = RunMode(*pair, use_wait_fd, flags);
      all_exact = all_exact && r.exact;
      std::printf("%-28s %5u %9.1f %9.1f %9.1f %8llu %12.2f %s\n",
                  use_wait_fd ? "its Rx interrupt (wait fd)" : "timed back-off only", round,
                  Percentile(r.latency_us, 0.5), Percentile(r.latency_us, 0.99),
                  r.latency_us.empty() ? 0.0 : r.latency_us.back(),
                  static_cast<unsigned long long>(r.sleeps), r.cpu_us_per_ping,
                  r.exact ? "every frame, in order" : "FRAMES MISSING OR OUT OF ORDER");
      std::fflush(stdout);
    }
  }
  pair->a.reset();
  pair->b.reset();
  return all_exact ? 0 : 1;
}

}  // namespace
}  // namespace atp::transport

int main(int argc, char** argv) { return atp::transport::Main(argc, argv); }
