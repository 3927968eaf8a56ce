// transport/mlx5/signal_cadence.h: which send work requests ask the NIC for a
// completion. Private to transport/mlx5.
//
// A completion per send costs a CQE write and a poll; the NIC completes work
// requests in order, so one completion proves every earlier request done.
// A queue therefore signals every `every`-th request, and the last request of
// a batch posted by Flush (so that Flush() can reach 0: no request is left
// waiting for a later signalled one that may never come).
//
//   SignalCadence cadence(32);
//   for (i...) wr_flags = cadence.Next(i == last && flushing ? BatchEnd::kYes : BatchEnd::kNo)
//                             ? IBV_SEND_SIGNALED : 0;
#ifndef ATP_TRANSPORT_MLX5_SIGNAL_CADENCE_H_
#define ATP_TRANSPORT_MLX5_SIGNAL_CADENCE_H_

#include <cassert>
#include <cstdint>

namespace atp::transport::mlx5 {

// BatchEnd: whether a request is the last one a Flush posts.
enum class BatchEnd : uint8_t { kNo, kYes };

class SignalCadence {
 public:
  // every: 1 signals each request; N >= 1.
  explicit SignalCadence(uint32_t every) : every_(every) { assert(every >= 1); }

  // Next: whether the next request is signalled; counts it.
  bool Next(BatchEnd end) {
    ++unsignalled_;
    if (unsignalled_ >= every_ || end == BatchEnd::kYes) {
      unsignalled_ = 0;
      return true;
    }
    return false;
  }

  // unsignalled: requests counted since the last signalled one.
  uint32_t unsignalled() const { return unsignalled_; }
  uint32_t every() const { return every_; }

 private:
  uint32_t every_;
  uint32_t unsignalled_ = 0;
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_SIGNAL_CADENCE_H_
