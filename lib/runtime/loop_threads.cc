#include "lib/runtime/loop_threads.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace atp {

host::PollingThread& SharedIoThreads::Threads::LeastBusy() {
  host::PollingThread* best = all.front().get();
  for (const auto& thread : all) {
    if (thread->steps() < best->steps()) best = thread.get();
  }
  return *best;
}

absl::StatusOr<std::shared_ptr<SharedIoThreads>> SharedIoThreads::Create(
    uint32_t threads, const PollingOptions& polling, std::string name) {
  if (threads < 1 || threads > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("SharedIoThreads::Create: ", threads, " threads is not in 1..64"));
  }
  if (absl::Status s = polling.Validate("SharedIoThreads::Create polling"); !s.ok()) return s;
  auto group = std::make_unique<Threads>();
  for (uint32_t t = 0; t < threads; ++t) {
    absl::StatusOr<std::unique_ptr<host::PollingThread>> thread =
        host::PollingThread::Start(absl::StrCat(name, "-", t), polling, t);
    if (!thread.ok()) return thread.status();
    group->all.push_back(*std::move(thread));
  }
  return std::shared_ptr<SharedIoThreads>(new SharedIoThreads(std::move(group)));
}

SharedIoThreads::SharedIoThreads(std::unique_ptr<Threads> threads)
    : threads_(std::move(threads)) {}

SharedIoThreads::~SharedIoThreads() = default;

uint32_t SharedIoThreads::size() const { return static_cast<uint32_t>(threads_->all.size()); }

namespace internal {

LoopThreads::LoopThreads(std::shared_ptr<SharedIoThreads> shared, const PollingOptions& polling)
    : shared_(std::move(shared)), polling_(polling) {}

absl::Status LoopThreads::Run(std::string name, std::vector<int> wait_fds,
                              host::PollingThread::StepFunction step) {
  host::PollingThread* thread;
  if (shared_ != nullptr) {
    thread = &shared_->threads().LeastBusy();
  } else {
    // Its own thread, the endpoint's own_.size()-th: its queue's number.
    absl::StatusOr<std::unique_ptr<host::PollingThread>> own = host::PollingThread::Start(
        std::move(name), polling_, static_cast<uint32_t>(own_.size()));
    if (!own.ok()) return own.status();
    thread = own->get();
    own_.push_back(*std::move(own));
  }
  placed_.push_back(Placed{thread, thread->Add(std::move(wait_fds), std::move(step))});
  return absl::OkStatus();
}

bool LoopThreads::RunsOnCallingThread() const {
  return std::any_of(placed_.begin(), placed_.end(),
                     [](const Placed& placed) { return placed.thread->IsCallingThread(); });
}

void LoopThreads::StopAll() {
  for (const Placed& placed : placed_) placed.thread->Remove(placed.step);
  placed_.clear();
  own_.clear();
}

}  // namespace internal
}  // namespace atp
