// sim/ring_queue.h: a FIFO over a growable power-of-two ring buffer.
// Unlike std::deque it allocates only when it grows past its largest size so
// far, so a link's in-flight queue costs no allocation in steady state.
#ifndef ATP_SIM_RING_QUEUE_H_
#define ATP_SIM_RING_QUEUE_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace atp::sim {

template <typename T>
class RingQueue {
 public:
  explicit RingQueue(size_t initial_capacity = 16) {
    size_t capacity = 1;
    while (capacity < initial_capacity) capacity *= 2;
    slots_.resize(capacity);
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }

  void push_back(T&& value) {
    if (size_ == slots_.size()) [[unlikely]] {
      Grow();
    }
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(value);
    ++size_;
  }

  // pop_front: moves the front element out.
  T pop_front() {
    T value = std::move(slots_[head_]);
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
    return value;
  }

 private:
  [[gnu::noinline]] void Grow() {
    std::vector<T> bigger(slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i) {
      bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    }
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace atp::sim

#endif  // ATP_SIM_RING_QUEUE_H_
