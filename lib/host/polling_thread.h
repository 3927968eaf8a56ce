// lib/host/polling_thread.h: a thread that runs a step function over and
// over, backing off when idle (AdaptiveBackoff): spin, yield, then sleep in
// ppoll() on a doorbell (eventfd) and the transport queues' wait_fds, never
// past the deadline the step asked for.
//
//   auto thread = PollingThread::Start("atp-w0-q1", polling, {queue.wait_fd()},
//       [&](TimePoint now) { return loop.Step(now); });
//   ... submit work, then: thread->Wake();
//   thread.reset();   // stops and joins
//
// The step function runs on the thread only; it gets the time read once per
// iteration. Wake and Stop: any thread.
#ifndef ATP_LIB_HOST_POLLING_THREAD_H_
#define ATP_LIB_HOST_POLLING_THREAD_H_

#include <poll.h>

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/options.h"
#include "atp/time.h"

namespace atp::host {

// StepResult: what one iteration did, and when the next is due at the latest
// even with nothing to do (a retransmission timer; Infinite: no deadline).
struct StepResult {
  bool did_work = false;
  TimePoint deadline = TimePoint::Infinite();
};

// SleepUntilReadable: sleeps at most `at_most`, less if one of `fds` (each
// asking for POLLIN) turns readable: a frame arrived on a queue's wait_fd, a
// doorbell rang. Their revents say which. A plain sleep when `fds` is empty.
// The one sleep of PollingThread and of atp-switchd's datapath thread.
void SleepUntilReadable(std::span<pollfd> fds, TimeDelta at_most);

class PollingThread {
 public:
  using StepFunction = std::function<StepResult(TimePoint now)>;

  // Start: `wait_fds` (-1 entries ignored) wake a sleeping thread when
  // readable; they stay owned by the caller and must outlive the thread.
  static absl::StatusOr<std::unique_ptr<PollingThread>> Start(std::string name,
                                                              const PollingOptions& options,
                                                              std::vector<int> wait_fds,
                                                              StepFunction step);

  PollingThread(const PollingThread&) = delete;
  PollingThread& operator=(const PollingThread&) = delete;
  // Stops and joins.
  ~PollingThread();

  // Wake: new work is waiting; cuts a sleep short (a write to the doorbell
  // only when the thread sleeps or is about to).
  void Wake();

  // Stop: ends the loop after the current step and joins. Idempotent.
  void Stop();

  // sleeps: how many times the thread slept (tests, statistics).
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  PollingThread(std::string name, const PollingOptions& options, std::vector<int> wait_fds,
                StepFunction step, int doorbell_fd);

  void Run();
  void Sleep(TimeDelta at_most);

  const std::string name_;
  const PollingOptions options_;
  const std::vector<int> wait_fds_;
  const StepFunction step_;
  const int doorbell_fd_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<uint64_t> wake_seq_{0};
  std::atomic<uint64_t> sleeps_{0};
  std::thread thread_;
};

}  // namespace atp::host

#endif  // ATP_LIB_HOST_POLLING_THREAD_H_
