// tests/transport/transport_test_util.cc
#include "tests/transport/transport_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace atp::transport::testing {

wire::Payload MakePayload(uint32_t seed) {
  wire::Payload payload;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = seed * 1000 + static_cast<uint32_t>(i);
  return payload;
}

FrameBytes MakeFrame(const DeviceAddress& src, const DeviceAddress& dst, const FrameSpec& spec,
                     uint16_t base_port) {
  wire::FrameFields fields;
  fields.src_mac = src.mac;
  fields.dst_mac = dst.mac;
  fields.src_ip = src.ipv4;
  fields.dst_ip = dst.ipv4;
  fields.ip_tos = spec.ip_tos;
  fields.header.job = 3;
  fields.header.seq = spec.seq;
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  fields.header.fan_in0 = 2;
  fields.header.fan_in1 = 1;
  fields.header.aggregator = spec.aggregator;
  FrameBytes frame{};
  wire::EncodeFrame(fields, MakePayload(spec.payload_seed), base_port, frame);
  return frame;
}

absl::Status SendMalformedDatagrams(int fd, const SocketAddress& target, size_t right_size,
                                    int count) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(target.port);
  to.sin_addr.s_addr = htonl(target.ip.value);
  uint8_t bytes[wire::kFrameBytes] = {};
  for (int i = 0; i < count; ++i) {
    const size_t size = i % 2 == 0 ? 100 : right_size;
    if (::sendto(fd, bytes, size, 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) !=
        static_cast<ssize_t>(size)) {
      const int error = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("sendto: ", std::strerror(error)));
    }
  }
  ::close(fd);
  return absl::OkStatus();
}

namespace {

// FlushUntilEmpty: taken is not yet sent: a queue may still hold frames after
// a Flush (a full ring, a memif queue that skipped a burst while its port was
// busy). Flushes until it holds none, as a runtime's loop does on its next
// steps, polling `drain` (may be null) in between; true when none is left.
bool FlushUntilEmpty(Queue& queue, Collector* drain) {
  constexpr int kMaxTries = 10000;
  for (int tries = 0; tries < kMaxTries; ++tries) {
    if (queue.Flush() == 0) return true;
    if (drain != nullptr) drain->PollOnce();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return queue.Flush() == 0;
}

}  // namespace

size_t SendAll(Queue& queue, const std::vector<FrameBytes>& frames, Collector* drain) {
  constexpr size_t kBurst = 32;
  constexpr int kMaxIdleTries = 10000;
  size_t done = 0;
  int idle_tries = 0;
  while (done < frames.size() && idle_tries < kMaxIdleTries) {
    FrameRef burst[kBurst];
    const size_t want = std::min(kBurst, frames.size() - done);
    const size_t n = queue.tx_pool().AllocBurst({burst, want});
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(burst[i].data, frames[done + i].data(), kFrameBytes);
      burst[i].length = kFrameBytes;
    }
    const size_t taken = queue.TxBurst({burst, n});
    ReleaseFrames({burst + taken, n - taken});
    done += taken;
    queue.Flush();
    if (drain != nullptr) drain->PollOnce();
    idle_tries = taken == 0 ? idle_tries + 1 : 0;
  }
  FlushUntilEmpty(queue, drain);
  return done;
}

bool SendSegmented(Queue& queue, SegmentationJob& job, Collector* drain) {
  for (int tries = 0; !job.empty() && tries < 1000; ++tries) {
    job.Advance(queue.TxSegmented(job));
    queue.Flush();
    if (drain != nullptr) drain->PollOnce();
  }
  return job.empty() && FlushUntilEmpty(queue, drain);
}

size_t Collector::PollOnce() {
  size_t got = 0;
  for (uint32_t q = 0; q < device_.num_queues(); ++q) {
    FrameRef frames[32];
    const size_t n = device_.queue(q).RxBurst(frames);
    for (size_t i = 0; i < n; ++i) {
      FrameBytes bytes{};
      EXPECT_EQ(frames[i].length, kFrameBytes);
      std::memcpy(bytes.data(), frames[i].data, kFrameBytes);
      received_[q].push_back(bytes);
    }
    ReleaseFrames({frames, n});
    got += n;
  }
  return got;
}

size_t Collector::total() const {
  size_t n = 0;
  for (const auto& q : received_) n += q.size();
  return n;
}

namespace {

// WaitReadable: waits up to `timeout_ms` for any queue's wait_fd. A device
// without one (DPDK) may still be delivering (a memif peer, a queue that
// skipped a burst while its port was busy): it backs off for a moment, at most
// 1 ms, and the caller polls again until its own deadline.
bool WaitReadable(Device& device, int timeout_ms) {
  std::vector<pollfd> fds;
  for (uint32_t q = 0; q < device.num_queues(); ++q) {
    const int fd = device.queue(q).wait_fd();
    if (fd >= 0) fds.push_back(pollfd{fd, POLLIN, 0});
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 1)));
    return true;
  }
  ::poll(fds.data(), fds.size(), timeout_ms);
  return true;
}

}  // namespace

bool Collector::PollUntil(size_t total_wanted) {
  return PollUntilTrue([&] { return total() >= total_wanted; });
}

bool Collector::PollUntilTrue(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (PollOnce() > 0) continue;
    if (done()) break;
    if (!WaitReadable(device_, 10) || std::chrono::steady_clock::now() > deadline) break;
  }
  return done();
}

void Collector::Settle() {
  for (int quiet_rounds = 0; quiet_rounds < 3;) {
    if (PollOnce() > 0) {
      quiet_rounds = 0;
      continue;
    }
    if (!WaitReadable(device_, 20)) return;
    ++quiet_rounds;
  }
}

::testing::AssertionResult PoolsAreFull(Device& device) {
  for (uint32_t q = 0; q < device.num_queues(); ++q) {
    Queue& queue = device.queue(q);
    for (FramePool* pool : {&queue.rx_pool(), &queue.tx_pool()}) {
      if (pool->free_count() != pool->capacity()) {
        return ::testing::AssertionFailure()
               << device.backend() << " queue " << q << ": "
               << (pool == &queue.rx_pool() ? "rx" : "tx") << " pool has " << pool->free_count()
               << " of " << pool->capacity() << " buffers free";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace atp::transport::testing
