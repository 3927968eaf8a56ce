#include "sim/simulator.h"

#include <algorithm>
#include <utility>

namespace atp::sim {

void Simulator::Schedule(Actor* actor, TimePoint time) {
  if (time.IsInfinite()) return;
  if (time < now_) time = now_;
  if (time >= actor->scheduled_) return;
  const uint64_t sequence = next_sequence_++;
  actor->scheduled_ = time;
  actor->live_event_ = sequence;  // any older entry of this actor is now cancelled
  const Event event{time.ToNanoseconds(), sequence, actor};
  if (actor == running_ && running_at_top_) {
    // The running actor rescheduling itself (what a link does after every
    // delivery): its entry still sits at the top, so after Act the new entry
    // replaces it with one sift-down instead of a pop and a push.
    deferred_ = event;
    has_deferred_ = true;
    return;
  }
  Push(event);
}

void Simulator::Unschedule(Actor* actor) {
  actor->scheduled_ = TimePoint::Infinite();
  actor->live_event_ = 0;
  if (actor == running_) has_deferred_ = false;
  // The heap is rebuilt below: the running event is no longer known to be at
  // the top (it stays in the heap, cancelled, and is dropped later).
  running_at_top_ = false;
  const size_t before = heap_.size();
  std::erase_if(heap_, [actor](const Event& event) { return event.actor == actor; });
  if (heap_.size() != before) {
    // Rebuild the heap: re-push everything (teardown and tests only).
    std::vector<Event> events;
    events.swap(heap_);
    for (const Event& event : events) Push(event);
  }
}

void Simulator::Push(const Event& event) {
  heap_.push_back(event);
  size_t i = heap_.size() - 1;
  while (i > 0) {
    const size_t parent = (i - 1) / kArity;
    if (!Before(event, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = event;
}

void Simulator::PopTop() {
  const Event last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) SiftDown(last);
}

void Simulator::SiftDown(const Event& event) {
  // Locals for the array and the best child's key: stores into the heap
  // would otherwise make the compiler reload them at every step. The best of
  // the four children is picked without branches (conditional moves on the
  // 128-bit key): which child is earliest is a coin toss the branch
  // predictor loses about half the time.
  Event* const heap = heap_.data();
  const size_t n = heap_.size();
  const Key key = KeyOf(event);
  size_t i = 0;
  while (true) {
    const size_t first = kArity * i + 1;
    if (first >= n) break;
    const size_t end = first + kArity < n ? first + kArity : n;
    size_t best = first;
    Key best_key = KeyOf(heap[first]);
    for (size_t c = first + 1; c < end; ++c) {
      const Key k = KeyOf(heap[c]);
      const bool earlier = k < best_key;
      best = earlier ? c : best;
      best_key = earlier ? k : best_key;
    }
    if (key < best_key) break;
    heap[i] = heap[best];
    i = best;
  }
  heap[i] = event;
}

void Simulator::DropCancelled() {
  while (!heap_.empty() && heap_.front().actor->live_event_ != heap_.front().sequence) {
    PopTop();
  }
}

TimePoint Simulator::NextEventTime() {
  // Called from inside an Act, this drops the running event's (cancelled)
  // entry from the top: its self-rescheduling must then be pushed normally.
  if (running_ != nullptr) running_at_top_ = false;
  DropCancelled();
  TimePoint next =
      heap_.empty() ? TimePoint::Infinite() : TimePoint::FromNanoseconds(heap_.front().time_ns);
  if (has_deferred_) next = Earliest(next, TimePoint::FromNanoseconds(deferred_.time_ns));
  return next;
}

uint64_t Simulator::Run(TimePoint deadline) {
  stop_requested_ = false;
  const int64_t deadline_ns = deadline.ToNanoseconds();
  uint64_t processed = 0;
  while (!stop_requested_) {
    DropCancelled();
    if (heap_.empty() || heap_.front().time_ns > deadline_ns) break;
    // The event stays at the top while it runs: everything scheduled during
    // Act is due at or after it and was scheduled after it, so nothing can
    // pass it.
    const Event event = heap_.front();
    now_ = TimePoint::FromNanoseconds(event.time_ns);
    event.actor->scheduled_ = TimePoint::Infinite();
    event.actor->live_event_ = 0;
    ++processed;
    running_ = event.actor;
    running_at_top_ = true;
    has_deferred_ = false;
    event.actor->Act(now_);
    running_ = nullptr;
    if (running_at_top_) {
      if (has_deferred_) {
        SiftDown(deferred_);  // replaces the finished event at the top
      } else {
        PopTop();
      }
    } else if (has_deferred_) {
      Push(deferred_);
    }
    has_deferred_ = false;
  }
  events_processed_ += processed;
  return processed;
}

uint64_t Simulator::RunUntil(TimePoint deadline) {
  const uint64_t processed = Run(deadline);
  if (!stop_requested_ && deadline > now_ && !deadline.IsInfinite()) now_ = deadline;
  return processed;
}

uint64_t Simulator::RunUntilIdle() { return Run(TimePoint::Infinite()); }

}  // namespace atp::sim
