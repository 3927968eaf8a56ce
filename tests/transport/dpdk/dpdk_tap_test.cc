// Rx interrupts as queues' wait fds, over net_tap (the one driver here that
// has them): which option gives which queues a wait fd, and that a fd says
// "frames wait" exactly while they do. A tap port is a kernel interface, made
// inside a test namespace: needs root, skips saying so otherwise. (Every
// queue's wake-ups under traffic, software steering included, are the
// conformance suite's ASleepingReceiverIsWokenForEveryFrameOnEveryQueue.)
#include <poll.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "atp/transport/dpdk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/dpdk/dpdk_harness.h"
#include "tests/transport/dpdk/test_eal.h"
#include "tests/transport/dpdk/test_netns.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport {
namespace {

using testing::Readable;

class DpdkTapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status eal = testing::EnsureTestEal();
    ASSERT_TRUE(eal.ok()) << eal;
    absl::StatusOr<std::unique_ptr<testing::TestNetns>> netns =
        testing::TestNetns::CreateWithBridge();
    if (!netns.ok()) GTEST_SKIP() << "no test namespace: " << netns.status().message();
    netns_ = *std::move(netns);
  }

  // Open: a tap port named after `iface` in the namespace, side A of the
  // harness addresses, with `queues` queues and `rx_interrupts`.
  absl::StatusOr<std::unique_ptr<DpdkDevice>> Open(const std::string& iface, uint32_t queues,
                                                   DpdkRxInterrupts rx_interrupts,
                                                   DpdkRingLink::Side side) {
    DeviceOptions device;
    device.num_queues = queues;
    DpdkOptions options = testing::DpdkPairOptions(device, side);
    options.port = testing::UniqueTestName("net_tap");
    options.source = DpdkPortSource::kCreateVdev;
    options.netns = netns_->name();
    options.vdev_args = absl::StrCat("iface=", iface);
    options.rx_interrupts = rx_interrupts;
    return OpenDpdkDevice(options);
  }

  void TearDown() override { netns_.reset(); }

  std::unique_ptr<testing::TestNetns> netns_;
};

TEST_F(DpdkTapTest, OffLeavesTheQueuesPolling) {
  absl::StatusOr<std::unique_ptr<DpdkDevice>> device =
      Open("atpt0", 2, DpdkRxInterrupts::kOff, DpdkRingLink::Side::kA);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ((*device)->queue(0).wait_fd(), -1);
  EXPECT_EQ((*device)->queue(1).wait_fd(), -1);
}

TEST_F(DpdkTapTest, RequiredGivesEveryQueueAWaitFdOfItsOwn) {
  for (DpdkRxInterrupts mode : {DpdkRxInterrupts::kRequired, DpdkRxInterrupts::kIfAvailable}) {
    absl::StatusOr<std::unique_ptr<DpdkDevice>> device =
        Open("atpt0", 3, mode, DpdkRingLink::Side::kA);
    ASSERT_TRUE(device.ok()) << device.status();
    std::set<int> fds;
    for (uint32_t q = 0; q < 3; ++q) {
      const int fd = (*device)->queue(q).wait_fd();
      EXPECT_GE(fd, 0) << "queue " << q;
      fds.insert(fd);
    }
    EXPECT_EQ(fds.size(), 3u) << "one wait fd per queue";
  }
}

// One queue on each side: B's wait fd is quiet while nothing waits, readable
// once A's frame has crossed the bridge, quiet again once RxBurst took it.
TEST_F(DpdkTapTest, AWaitFdIsReadableExactlyWhileFramesWait) {
  absl::StatusOr<std::unique_ptr<DpdkDevice>> a =
      Open("atpta", 1, DpdkRxInterrupts::kRequired, DpdkRingLink::Side::kA);
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<std::unique_ptr<DpdkDevice>> b =
      Open("atptb", 1, DpdkRxInterrupts::kRequired, DpdkRingLink::Side::kB);
  ASSERT_TRUE(b.ok()) << b.status();
  for (const char* iface : {"atpta", "atptb"}) ASSERT_TRUE(netns_->Join(iface).ok());
  ASSERT_TRUE((*a)->WaitForLink(TimeDelta::FromSeconds(5)).ok());
  Queue& rx = (*b)->queue(0);
  FrameRef frames[8];
  EXPECT_EQ(rx.RxBurst(frames), 0u);
  EXPECT_FALSE(Readable(rx.wait_fd()));
  const testing::FrameBytes frame = testing::MakeFrame((*a)->address(), (*b)->address(),
                                                       testing::FrameSpec{wire::MakeSeq(0, 1), 1});
  ASSERT_EQ(testing::SendAll((*a)->queue(0), {frame}, nullptr), 1u);
  pollfd wait{rx.wait_fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&wait, 1, 5000), 1) << "the frame did not make the wait fd readable in 5 s";
  // Readable may run ahead of the driver for a moment (rx_wait.h, net_tap's
  // signal): poll until the frame comes, as a runtime would.
  size_t got = 0;
  for (int tries = 0; got == 0 && tries < 100000; ++tries) got = rx.RxBurst(frames);
  ASSERT_EQ(got, 1u);
  EXPECT_EQ(std::memcmp(frames[0].data, frame.data(), kFrameBytes), 0);
  ReleaseFrames({frames, got});
  EXPECT_EQ(rx.RxBurst(frames), 0u);
  EXPECT_FALSE(Readable(rx.wait_fd()));
}

}  // namespace
}  // namespace atp::transport
