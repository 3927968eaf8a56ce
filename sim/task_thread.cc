#include "sim/task_thread.h"

#include <algorithm>
#include <utility>

namespace atp::sim {

TaskThread::TaskThread(bool threaded) {
  if (threaded) helper_ = std::thread([this] { HelperLoop(); });
}

TaskThread::~TaskThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queued_.clear();
  }
  changed_.notify_all();
  if (helper_.joinable()) helper_.join();
}

TaskThread::Ticket TaskThread::Post(std::function<void()> task) {
  Ticket ticket;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ticket = next_ticket_++;
    queued_.push_back(Task{ticket, std::move(task)});
  }
  changed_.notify_all();
  return ticket;
}

bool TaskThread::TakeLocked(Ticket ticket, Task* task) {
  // Tickets are queued in order: binary search.
  auto it = std::lower_bound(queued_.begin(), queued_.end(), ticket,
                             [](const Task& t, Ticket k) { return t.ticket < k; });
  if (it == queued_.end() || it->ticket != ticket) return false;
  *task = std::move(*it);
  queued_.erase(it);
  return true;
}

bool TaskThread::RunningLocked(Ticket ticket) const {
  return std::find(running_.begin(), running_.end(), ticket) != running_.end();
}

void TaskThread::RunUnlocked(Task& task, std::unique_lock<std::mutex>& lock) {
  running_.push_back(task.ticket);
  lock.unlock();
  task.run();
  task.run = nullptr;  // whatever the task captured goes before it counts as done
  lock.lock();
  std::erase(running_, task.ticket);
  changed_.notify_all();
}

void TaskThread::Wait(Ticket ticket) {
  if (ticket == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  Task task;
  if (TakeLocked(ticket, &task)) {
    RunUnlocked(task, lock);
    return;
  }
  while (RunningLocked(ticket)) {
    if (!queued_.empty()) {
      Task other = std::move(queued_.front());
      queued_.pop_front();
      RunUnlocked(other, lock);
    } else {
      changed_.wait(lock);
    }
  }
}

void TaskThread::Cancel(Ticket ticket) {
  if (ticket == 0) return;
  std::unique_lock<std::mutex> lock(mutex_);
  Task dropped;
  if (TakeLocked(ticket, &dropped)) {
    lock.unlock();  // its captures are destroyed outside the lock
    return;
  }
  changed_.wait(lock, [&] { return !RunningLocked(ticket); });
}

void TaskThread::HelperLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !queued_.empty(); });
    if (stopping_) return;
    Task task = std::move(queued_.front());
    queued_.pop_front();
    RunUnlocked(task, lock);
  }
}

}  // namespace atp::sim
