// A plain std::thread that uses a DPDK queue becomes an EAL lcore for as long
// as it lives (transport/dpdk/thread_lcore.h): its mbufs go through its
// mempool cache, its id comes back when it ends (more threads than
// RTE_MAX_LCORE come and go), and when no id is left the queue still works,
// without a cache.
#include <cstring>
#include <future>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include "atp/transport/dpdk.h"
#include "gtest/gtest.h"
#include "tests/transport/dpdk/dpdk_harness.h"
#include "tests/transport/dpdk/test_eal.h"
#include "tests/transport/transport_test_util.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/mbuf_pool.h"

namespace atp::transport {
namespace {

using testing::Collector;
using testing::DpdkPairOptions;
using testing::FrameBytes;
using testing::FrameSpec;
using testing::MakeFrame;
using testing::PoolsAreFull;
using testing::SendAll;

// ThreadReport: what a thread saw about its lcore while using the queues.
struct ThreadReport {
  unsigned lcore_before = 0;  // rte_lcore_id() before its first burst
  unsigned lcore_after = 0;   // after its bursts
  bool had_cache = false;     // its lcore has a cache of A's TX mempool
  size_t received = 0;
};

class DpdkThreadLcoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const absl::Status eal = testing::EnsureTestEal();
    if (!eal.ok()) GTEST_SKIP() << "the DPDK EAL cannot start here: " << eal;
    absl::StatusOr<testing::RingPair> pair = testing::OpenRingPair("l");
    ASSERT_TRUE(pair.ok()) << pair.status();
    link_ = std::move(pair->link);
    a_ = std::move(pair->a);
    b_ = std::move(pair->b);
  }

  void TearDown() override {
    a_.reset();
    b_.reset();
    link_.reset();
  }

  rte_mempool* TxMempoolOfA() {
    return dynamic_cast<internal::MbufPool&>(a_->queue(0).tx_pool()).mempool();
  }

  // UseQueues: on the calling thread, sends `frames` frames A -> B and
  // receives them at B; returns what the thread saw.
  ThreadReport UseQueues(uint32_t frames, uint32_t seed) {
    ThreadReport report;
    report.lcore_before = rte_lcore_id();
    std::vector<FrameBytes> sent;
    for (uint32_t i = 0; i < frames; ++i) {
      sent.push_back(MakeFrame(a_->address(), b_->address(), FrameSpec{wire::MakeSeq(0, i), seed + i},
                               a_->base_port()));
    }
    Collector at_b(*b_);
    EXPECT_EQ(SendAll(a_->queue(0), sent, &at_b), sent.size());
    EXPECT_TRUE(at_b.PollUntil(frames));
    EXPECT_EQ(at_b.on_queue(0), sent) << "every frame, intact and in order";
    report.received = at_b.on_queue(0).size();
    report.lcore_after = rte_lcore_id();
    report.had_cache = rte_mempool_default_cache(TxMempoolOfA(), report.lcore_after) != nullptr;
    return report;
  }

  std::unique_ptr<DpdkRingLink> link_;
  std::unique_ptr<DpdkDevice> a_;
  std::unique_ptr<DpdkDevice> b_;
};

TEST_F(DpdkThreadLcoreTest, APlainThreadUsingAQueueHoldsAnLcoreUntilItEnds) {
  const DpdkThreadLcoreStats before = GetDpdkThreadLcoreStats();
  // More threads than there are lcore ids: each id must come back.
  constexpr uint32_t kThreads = RTE_MAX_LCORE + 16;
  for (uint32_t t = 0; t < kThreads; ++t) {
    ThreadReport report;
    std::thread io([&] { report = UseQueues(4, t * 4); });
    io.join();
    ASSERT_EQ(report.lcore_before, LCORE_ID_ANY) << "thread " << t << " starts as a plain thread";
    ASSERT_NE(report.lcore_after, LCORE_ID_ANY) << "thread " << t << " got no lcore id";
    ASSERT_NE(report.lcore_after, rte_get_main_lcore());
    ASSERT_TRUE(report.had_cache) << "its mbufs go through its cache";
    ASSERT_EQ(report.received, 4u);
    const rte_mempool_cache* cache = rte_mempool_default_cache(TxMempoolOfA(), report.lcore_after);
    ASSERT_EQ(cache->len, 0u) << "thread " << t << " flushed its cache when it ended";
    const DpdkThreadLcoreStats now = GetDpdkThreadLcoreStats();
    ASSERT_EQ(now.registered - before.registered, t + 1);
    ASSERT_EQ(now.released - before.released, t + 1) << "the id went back when the thread ended";
  }
  EXPECT_EQ(GetDpdkThreadLcoreStats().failures, before.failures);
  EXPECT_TRUE(PoolsAreFull(*a_));
  EXPECT_TRUE(PoolsAreFull(*b_));
}

TEST_F(DpdkThreadLcoreTest, MbufsSentOnOneLcoreAndFreedOnAnotherAllComeBack) {
  // net_ring hands B the sender's own mbufs: the receiving thread frees A's
  // TX mbufs into its own cache. Per-lcore caches do not care which lcore
  // took an mbuf; once both threads end, every mbuf is back in its mempool.
  std::vector<FrameBytes> sent;
  for (uint32_t i = 0; i < 500; ++i) {
    sent.push_back(MakeFrame(a_->address(), b_->address(), FrameSpec{wire::MakeSeq(0, i), i},
                             a_->base_port()));
  }
  unsigned sender_lcore = LCORE_ID_ANY;
  unsigned receiver_lcore = LCORE_ID_ANY;
  std::thread sender([&] {
    EXPECT_EQ(SendAll(a_->queue(0), sent, nullptr), sent.size());
    sender_lcore = rte_lcore_id();
  });
  sender.join();
  std::thread receiver([&] {
    Collector at_b(*b_);
    EXPECT_TRUE(at_b.PollUntil(sent.size()));
    EXPECT_EQ(at_b.on_queue(0), sent);
    receiver_lcore = rte_lcore_id();
  });
  receiver.join();
  EXPECT_NE(sender_lcore, LCORE_ID_ANY);
  EXPECT_NE(receiver_lcore, LCORE_ID_ANY);
  EXPECT_TRUE(PoolsAreFull(*a_));
  EXPECT_TRUE(PoolsAreFull(*b_));
  rte_mempool* mempool = TxMempoolOfA();
  EXPECT_EQ(rte_mempool_avail_count(mempool), mempool->size);
  for (unsigned lcore = 0; lcore < RTE_MAX_LCORE; ++lcore) {
    if (lcore == rte_get_main_lcore()) continue;  // this thread's own cache
    ASSERT_EQ(rte_mempool_default_cache(mempool, lcore)->len, 0u) << "lcore " << lcore;
  }
}

TEST_F(DpdkThreadLcoreTest, WithEveryLcoreIdTakenAQueueStillWorksWithoutACache) {
  const DpdkThreadLcoreStats before = GetDpdkThreadLcoreStats();
  // Holders take lcore ids until the EAL refuses one; they keep them until
  // `release`.
  std::latch release(1);
  std::vector<std::thread> holders;
  bool refused = false;
  while (!refused && holders.size() < RTE_MAX_LCORE) {
    std::promise<bool> registered;
    std::future<bool> result = registered.get_future();
    holders.emplace_back([&release, registered = std::move(registered)]() mutable {
      registered.set_value(RegisterDpdkIoThread().ok());
      release.wait();
    });
    refused = !result.get();
  }
  ASSERT_TRUE(refused) << "RTE_MAX_LCORE threads registered and none refused";
  const uint64_t holders_failures = GetDpdkThreadLcoreStats().failures - before.failures;
  EXPECT_EQ(holders_failures, 1u);

  // A thread that uses the queues now has no id to take: it works on
  // without a cache, asking once (its bursts do not retry).
  ThreadReport report;
  std::thread io([&] { report = UseQueues(100, 1); });
  io.join();
  EXPECT_EQ(report.lcore_after, LCORE_ID_ANY);
  EXPECT_FALSE(report.had_cache);
  EXPECT_EQ(report.received, 100u);
  EXPECT_EQ(GetDpdkThreadLcoreStats().failures - before.failures, holders_failures + 1)
      << "counted once for the thread, however many bursts it made";

  release.count_down();
  for (std::thread& holder : holders) holder.join();
  const DpdkThreadLcoreStats after = GetDpdkThreadLcoreStats();
  EXPECT_EQ(after.released - before.released, after.registered - before.registered)
      << "every holder gave its id back";

  // Ids are free again: the next thread gets one.
  std::thread again([&] { report = UseQueues(4, 200); });
  again.join();
  EXPECT_NE(report.lcore_after, LCORE_ID_ANY);
  EXPECT_TRUE(PoolsAreFull(*a_));
  EXPECT_TRUE(PoolsAreFull(*b_));
}

}  // namespace
}  // namespace atp::transport
