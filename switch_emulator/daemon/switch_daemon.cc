#include "switch_emulator/daemon/switch_daemon.h"

#include <poll.h>
#include <sched.h>

#include <chrono>
#include <utility>
#include <vector>

#include "atp/status_macros.h"
#include "lib/host/adaptive_backoff.h"
#include "lib/host/clock.h"
#include "lib/host/polling_thread.h"
#include "lib/host/thread_affinity.h"

namespace atp::switchd {
namespace {

// Flush rounds at Stop, so frames taken just before are pushed out.
constexpr int kDrainRounds = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<SwitchDaemon>> SwitchDaemon::Create(SwitchDaemonOptions options,
                                                                   std::vector<DaemonPort> ports) {
  ATP_RETURN_IF_ERROR(options.polling.Validate("SwitchDaemonOptions.polling"));
  if (ports.empty()) return absl::InvalidArgumentError("SwitchDaemon: needs at least one port");
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<SwitchHost> created,
                       SwitchHost::Create(options.host, std::move(ports)));
  if (!options.clock) options.clock = host::MonotonicNow;
  return std::unique_ptr<SwitchDaemon>(new SwitchDaemon(std::move(options), std::move(created)));
}

SwitchDaemon::SwitchDaemon(SwitchDaemonOptions options, std::unique_ptr<SwitchHost> host)
    : options_(std::move(options)), host_(std::move(host)) {
  started_ = options_.clock();
  snapshot_ = Collect();
}

SwitchDaemon::~SwitchDaemon() { Stop(); }

absl::Status SwitchDaemon::Start() {
  if (running()) return absl::FailedPreconditionError("SwitchDaemon: already running");
  stop_.store(false, std::memory_order_relaxed);
  running_.store(true, std::memory_order_release);
  abandoned_ = false;
  thread_ = std::thread([this] {
    start_gate_.acquire();
    if (!abandoned_) Run();
  });
  if (!options_.polling.cpus.empty()) {
    absl::Status pinned = host::PinThread(thread_, options_.polling.cpus[0], kCpusField);
    if (!pinned.ok()) {
      abandoned_ = true;
      start_gate_.release();
      thread_.join();
      running_.store(false, std::memory_order_release);
      return pinned;
    }
  }
  start_gate_.release();
  return absl::OkStatus();
}

void SwitchDaemon::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  thread_.join();
  running_.store(false, std::memory_order_release);
}

void SwitchDaemon::Run() {
  if (options_.on_thread_start) options_.on_thread_start();
  host::AdaptiveBackoff backoff(options_.polling);
  // An idle thread sleeps on its ports' wait fds, so a frame on a port that
  // has one (kernel UDP, loopback) ends the sleep at once instead of after
  // up to max_sleep per hop; ports without one (memif) wait out the sleep.
  std::vector<pollfd> wake_fds;
  for (int fd : host_->WaitFds()) wake_fds.push_back(pollfd{fd, POLLIN, 0});
  uint64_t served = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    const size_t work = PollRound(options_.clock());
    if (const uint64_t wanted = snapshot_requested_.load(std::memory_order_acquire);
        wanted != served) {
      SwitchdStats s = Collect();
      std::lock_guard<std::mutex> lock(snapshot_mu_);
      snapshot_ = std::move(s);
      snapshot_served_ = served = wanted;
      snapshot_cv_.notify_all();
    }
    if (work > 0) {
      backoff.OnWork();
      continue;
    }
    switch (backoff.OnIdle()) {
      case host::AdaptiveBackoff::Action::kSpin: host::CpuRelax(); break;
      case host::AdaptiveBackoff::Action::kYield: sched_yield(); break;
      case host::AdaptiveBackoff::Action::kSleep:
        host::SleepUntilReadable(wake_fds, backoff.sleep());
        break;
    }
  }
  for (int i = 0; i < kDrainRounds; ++i) host_->FlushAll();
  {
    SwitchdStats s = Collect();
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    snapshot_ = std::move(s);
    snapshot_served_ = snapshot_requested_.load(std::memory_order_acquire);
    snapshot_cv_.notify_all();
  }
  if (options_.on_thread_stop) options_.on_thread_stop();
}

size_t SwitchDaemon::PollRound(TimePoint now) { return host_->Step(now); }

SwitchdStats SwitchDaemon::Collect() const {
  SwitchdStats s = host_->Collect();
  s.uptime_s = (options_.clock() - started_).ToSeconds();
  return s;
}

SwitchdStats SwitchDaemon::Stats() {
  if (!running()) return Collect();
  std::unique_lock<std::mutex> lock(snapshot_mu_);
  const uint64_t ticket = snapshot_requested_.fetch_add(1, std::memory_order_acq_rel) + 1;
  snapshot_cv_.wait_for(lock, std::chrono::seconds(1),
                        [&] { return snapshot_served_ >= ticket; });
  return snapshot_;
}

}  // namespace atp::switchd
