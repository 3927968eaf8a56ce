// tests/transport/mlx5/hw_test.cc: the mlx5 backend on a real ConnectX NIC.
// Label `hw` (opt-in: ctest -L hw); every test skips, saying why, when no
// device can be opened.
//
// Environment:
//   ATP_MLX5_DEVICE    verbs device name (default: the first mlx5 device)
//   ATP_MLX5_PORT      port number (default 1)
//   ATP_MLX5_IPV4      this port's IPv4 and
//   ATP_MLX5_MAC       MAC; without both the flow rules match the port only
//   ATP_MLX5_LOOPBACK  1: frames sent to this port come back to it (a cable
//                      between ports of one NIC bridged to it, or a switch
//                      hairpin); enables the receive tests
//
// Needs CAP_NET_RAW (RAW_PACKET QPs, flow rules). Frames go out on the wire:
// run on a link where 306-byte UDP frames to port 50000+ are harmless.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/transport/transport_test_util.h"
#include "transport/mlx5/mlx5_device.h"

namespace atp::transport {
namespace {

using testing::FrameBytes;
using testing::FrameSpec;
using testing::MakeFrame;

// A bounded number of polls, not a sleep: the NIC completes in microseconds.
constexpr int kMaxPolls = 10'000'000;

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

Mlx5Options HwOptions() {
  Mlx5Options options;
  if (const char* name = Env("ATP_MLX5_DEVICE")) options.device_name = name;
  if (const char* port = Env("ATP_MLX5_PORT")) options.port = static_cast<uint8_t>(std::atoi(port));
  const char* ip = Env("ATP_MLX5_IPV4");
  const char* mac = Env("ATP_MLX5_MAC");
  if (ip != nullptr && mac != nullptr && wire::Ipv4Address::Parse(ip).ok() &&
      wire::MacAddress::Parse(mac).ok()) {
    options.address = {*wire::Ipv4Address::Parse(ip), *wire::MacAddress::Parse(mac)};
  } else {
    const wire::Ipv4Address fallback = *wire::Ipv4Address::Parse("10.255.0.1");
    options.address = {fallback, DefaultMacFor(fallback)};
    options.flow_match = FlowMatch::kPortOnly;
  }
  options.device.num_queues = 2;
  return options;
}

class Mlx5Hardware : public ::testing::Test {
 protected:
  // OpenOrSkip: false (and the test skips) when no device opens here.
  bool Open(const Mlx5Options& options) {
    absl::StatusOr<std::unique_ptr<Mlx5Device>> device = OpenMlx5Device(options);
    if (!device.ok()) {
      reason_ = std::string(device.status().message());
      return false;
    }
    device_ = *std::move(device);
    return true;
  }

  FrameBytes ToSelf(uint32_t queue, uint32_t position) {
    const DeviceAddress self = device_->address();
    return MakeFrame(self, self, FrameSpec{wire::MakeSeq(queue, position), position});
  }

  // FlushUntilDone: Flush until every taken frame completed.
  bool FlushUntilDone(Queue& queue) {
    for (int i = 0; i < kMaxPolls; ++i) {
      if (queue.Flush() == 0) return true;
    }
    return false;
  }

  std::unique_ptr<Mlx5Device> device_;
  std::string reason_;
};

#define ATP_OPEN_OR_SKIP(options)                                     \
  if (!Open(options)) {                                               \
    GTEST_SKIP() << "no mlx5 device can be opened here: " << reason_; \
  }

TEST_F(Mlx5Hardware, OpensWithSaneCapabilitiesAndFullPools) {
  ATP_OPEN_OR_SKIP(HwOptions());
  EXPECT_EQ(device_->backend(), "mlx5");
  EXPECT_NE(device_->rx_mode(), Mlx5RxMode::kAuto);
  EXPECT_NE(device_->tx_segmentation(), Mlx5TxSegmentation::kAuto);
  for (uint32_t q = 0; q < device_->num_queues(); ++q) {
    Queue& queue = device_->queue(q);
    const QueueCapabilities& caps = queue.capabilities();
    EXPECT_EQ(caps.steering, Steering::kHardwareFlow);
    EXPECT_EQ(caps.headroom, queue.rx_pool().headroom());
    EXPECT_EQ(queue.rx_pool().free_count(), queue.rx_pool().capacity());
    EXPECT_EQ(queue.tx_pool().free_count(), queue.tx_pool().capacity());
    FrameRef frames[32];
    const size_t n = queue.RxBurst(frames);
    EXPECT_LE(n, 32u);
    ReleaseFrames({frames, n});
  }
}

TEST_F(Mlx5Hardware, EachReceiveModeOpens) {
  for (Mlx5RxMode mode : {Mlx5RxMode::kMultiPacketRq, Mlx5RxMode::kPlainCq}) {
    Mlx5Options options = HwOptions();
    options.rx_mode = mode;
    device_.reset();
    if (!Open(options)) {
      if (mode == Mlx5RxMode::kMultiPacketRq && reason_.find("striding") != std::string::npos) {
        continue;  // a device without a striding RQ says so
      }
      GTEST_SKIP() << "no mlx5 device can be opened here: " << reason_;
    }
    EXPECT_EQ(device_->rx_mode(), mode);
  }
}

TEST_F(Mlx5Hardware, BurstsAndTsoJobsCompleteAndGiveEveryBufferBack) {
  ATP_OPEN_OR_SKIP(HwOptions());
  Queue& queue = device_->queue(0);
  std::vector<FrameRef> frames(64);
  ASSERT_EQ(queue.tx_pool().AllocBurst(frames), 64u);
  for (uint32_t i = 0; i < 64; ++i) {
    const FrameBytes bytes = ToSelf(0, i);
    std::memcpy(frames[i].data, bytes.data(), bytes.size());
    frames[i].length = static_cast<uint32_t>(bytes.size());
  }
  size_t taken = 0;
  for (int i = 0; i < kMaxPolls && taken < frames.size(); ++i) {
    taken += queue.TxBurst({frames.data() + taken, frames.size() - taken});
    queue.Flush();
  }
  ASSERT_EQ(taken, frames.size());

  std::vector<uint8_t> payload(wire::kPayloadBytes, 0x5A);
  std::vector<const uint8_t*> pointers(200, payload.data());
  SegmentationJob job = SegmentationJob::FromFrame(ToSelf(0, 1000), pointers);
  for (int i = 0; i < kMaxPolls && !job.empty(); ++i) {
    job.Advance(queue.TxSegmented(job));
    queue.Flush();
  }
  ASSERT_TRUE(job.empty());
  ASSERT_TRUE(FlushUntilDone(queue));
  const QueueStats stats = queue.stats();
  EXPECT_EQ(stats.tx_errors, 0u);
  EXPECT_EQ(stats.tx_frames, 264u);
  if (device_->tx_segmentation() == Mlx5TxSegmentation::kHardwareTso) {
    EXPECT_EQ(stats.tx_offloaded_segments, 200u);
  }
  EXPECT_EQ(queue.tx_pool().free_count(), queue.tx_pool().capacity());
}

TEST_F(Mlx5Hardware, FramesComeBackOnTheQueueTheirPortNames) {
  if (Env("ATP_MLX5_LOOPBACK") == nullptr) {
    GTEST_SKIP() << "set ATP_MLX5_LOOPBACK=1 when frames sent to this port come back to it";
  }
  ATP_OPEN_OR_SKIP(HwOptions());
  std::vector<FrameBytes> sent;
  for (uint32_t q = 0; q < 2; ++q) {
    Queue& queue = device_->queue(q);
    FrameRef frames[16];
    ASSERT_EQ(queue.tx_pool().AllocBurst(frames), 16u);
    for (uint32_t i = 0; i < 16; ++i) {
      sent.push_back(ToSelf(1 - q, q * 16 + i));  // queue 0 sends to queue 1's port
      std::memcpy(frames[i].data, sent.back().data(), kFrameBytes);
      frames[i].length = kFrameBytes;
    }
    ASSERT_EQ(queue.TxBurst(frames), 16u);
    ASSERT_TRUE(FlushUntilDone(queue));
  }
  std::vector<std::vector<FrameBytes>> received(2);
  for (int i = 0; i < kMaxPolls && received[0].size() + received[1].size() < 32; ++i) {
    for (uint32_t q = 0; q < 2; ++q) {
      FrameRef frames[32];
      const size_t n = device_->queue(q).RxBurst(frames);
      for (size_t k = 0; k < n; ++k) {
        FrameBytes bytes;
        std::memcpy(bytes.data(), frames[k].data, kFrameBytes);
        received[q].push_back(bytes);
      }
      ReleaseFrames({frames, n});
    }
  }
  ASSERT_EQ(received[1].size(), 16u);
  ASSERT_EQ(received[0].size(), 16u);
  for (size_t i = 0; i < 16; ++i) {
    // The NIC may number the IPv4 identification only on TSO; plain sends are byte-exact.
    EXPECT_EQ(received[1][i], sent[i]);
    EXPECT_EQ(received[0][i], sent[16 + i]);
  }
  for (uint32_t q = 0; q < 2; ++q) {
    EXPECT_EQ(device_->queue(q).rx_pool().free_count(), device_->queue(q).rx_pool().capacity());
  }
}

}  // namespace
}  // namespace atp::transport
