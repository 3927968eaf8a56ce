// lib/protocol/worker_set.h: a set of a job's workers by global index (the
// rack-major rank, 0..1023: at most 32 racks of 32 workers), as the PS names
// them in a status control frame and the worker's failures report them.
//
//   protocol::WorkerSet missing;
//   missing.Add(3);
//   for (int w : missing.ToVector()) ...;   // 3
#ifndef ATP_LIB_PROTOCOL_WORKER_SET_H_
#define ATP_LIB_PROTOCOL_WORKER_SET_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "atp/wire.h"

namespace atp::protocol {

class WorkerSet {
 public:
  static constexpr int kMaxWorkers = wire::kMaxFanIn * wire::kMaxFanIn;  // 1024
  static constexpr size_t kWords = kMaxWorkers / 32;                     // 32

  // Add: `worker` in 0..kMaxWorkers-1 (others are ignored).
  void Add(int worker) {
    if (worker < 0 || worker >= kMaxWorkers) return;
    words_[static_cast<size_t>(worker) / 32] |= 1u << (static_cast<unsigned>(worker) % 32);
  }
  bool Contains(int worker) const {
    if (worker < 0 || worker >= kMaxWorkers) return false;
    return (words_[static_cast<size_t>(worker) / 32] >> (static_cast<unsigned>(worker) % 32)) & 1u;
  }
  void AddAll(const WorkerSet& other) {
    for (size_t i = 0; i < kWords; ++i) words_[i] |= other.words_[i];
  }
  bool empty() const {
    for (uint32_t w : words_) {
      if (w != 0) return false;
    }
    return true;
  }
  // ToVector: the members in increasing order.
  std::vector<int> ToVector() const {
    std::vector<int> out;
    for (size_t i = 0; i < kWords; ++i) {
      for (uint32_t bits = words_[i]; bits != 0; bits &= bits - 1) {
        out.push_back(static_cast<int>(i * 32) + std::countr_zero(bits));
      }
    }
    return out;
  }
  // words: the wire form, bit (w % 32) of word w / 32 for worker w.
  const std::array<uint32_t, kWords>& words() const { return words_; }
  std::array<uint32_t, kWords>& words() { return words_; }

  bool operator==(const WorkerSet&) const = default;

 private:
  std::array<uint32_t, kWords> words_{};
};

}  // namespace atp::protocol

#endif  // ATP_LIB_PROTOCOL_WORKER_SET_H_
