// tests/transport/transport_test_util.h: building ATP frames for transport
// tests, sending them through a queue, and collecting what arrives.
#ifndef ATP_TESTS_TRANSPORT_TRANSPORT_TEST_UTIL_H_
#define ATP_TESTS_TRANSPORT_TRANSPORT_TEST_UTIL_H_

#include <poll.h>

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "atp/transport.h"
#include "atp/transport/kernel_udp.h"
#include "atp/wire.h"
#include "gtest/gtest.h"

namespace atp::transport::testing {

using FrameBytes = std::array<uint8_t, kFrameBytes>;

// FrameSpec: what varies between the test frames.
struct FrameSpec {
  uint32_t seq = 0;           // queue in the top 4 bits
  uint32_t payload_seed = 0;  // payload value i = seed * 1000 + i
  uint16_t aggregator = 7;
  uint8_t ip_tos = wire::kTosEct0;
};

// SendMalformedDatagrams: sends `count` datagrams on the UDP socket `fd` to
// `target`, alternately 100 bytes (a wrong size) and `right_size` zero bytes
// (the right size, but nothing a kernel UDP queue may accept). Closes `fd`.
absl::Status SendMalformedDatagrams(int fd, const SocketAddress& target, size_t right_size,
                                    int count);

// MakeFrame: a valid ATP gradient frame from `src` to `dst` (wire::EncodeFrame).
FrameBytes MakeFrame(const DeviceAddress& src, const DeviceAddress& dst, const FrameSpec& spec,
                     uint16_t base_port = wire::kDefaultBasePort);

// MakePayload: the 62 values MakeFrame puts in a frame with `seed`.
wire::Payload MakePayload(uint32_t seed);

// SendAll: puts every frame on `queue` (copied into its tx_pool buffers),
// retrying after Flush while the queue back-pressures, and polls `drain` (may
// be null) in between so that a receiver without a thread keeps up. Returns
// the number of frames taken (all of them unless it gives up after many tries).
class Collector;
size_t SendAll(Queue& queue, const std::vector<FrameBytes>& frames, Collector* drain);

// SendSegmented: puts every segment of `job` on `queue` (TxSegmented, Flush
// and a poll of `drain` per try), then flushes until the queue holds nothing:
// taken segments may leave only at a later Flush (atp/transport.h). True when
// every segment was taken and left; `job` is advanced past what was taken.
bool SendSegmented(Queue& queue, SegmentationJob& job, Collector* drain);

// Collector: receives everything arriving on a device, per queue, as bytes,
// and releases the frames at once.
class Collector {
 public:
  explicit Collector(Device& device) : device_(device), received_(device.num_queues()) {}

  // PollOnce: one RxBurst on every queue; returns how many frames came.
  size_t PollOnce();
  // PollUntil: polls until `total` frames have arrived in all (since
  // construction), waiting on the queues' wait_fd when they have one (up to
  // ~5 s); a backend without one delivers synchronously, so it stops at the
  // first empty round. Returns whether `total` was reached.
  bool PollUntil(size_t total);
  // PollUntilTrue: the same, until `done()` holds (e.g. a counter moved).
  bool PollUntilTrue(const std::function<bool()>& done);
  // Settle: polls until nothing more arrives for a short while (kernel) or at
  // once (loopback): proves that no extra frame is on its way.
  void Settle();

  const std::vector<FrameBytes>& on_queue(uint32_t q) const { return received_[q]; }
  size_t total() const;

 private:
  Device& device_;
  std::vector<std::vector<FrameBytes>> received_;
};

// PoolsAreFull: every pool of every queue of `device` has all its buffers.
::testing::AssertionResult PoolsAreFull(Device& device);

// Readable: whether `fd` polls readable now.
inline bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

}  // namespace atp::transport::testing

#endif  // ATP_TESTS_TRANSPORT_TRANSPORT_TEST_UTIL_H_
