// Tests of links: serialization, propagation, the egress queue, tail drop
// and the depth the switch sees for ECN (sim/link.h).
#include "sim/link.h"

#include <memory>

#include "gtest/gtest.h"
#include "sim/mangling_filters.h"
#include "tests/sim/sim_test_util.h"

namespace atp::sim {
namespace {

using testing::Collector;
using testing::MakeFrame;

// 306 + 24 bytes = 2640 bits: 264 ns at 10 Gb/s.
constexpr double k10G = 10e9;
constexpr int64_t kFrameNsAt10G = 264;

LinkConfig TenGig(uint32_t capacity = 1024) {
  return LinkConfig{.bandwidth_bps = k10G,
                    .propagation_delay = TimeDelta::FromMicroseconds(2),
                    .queue_capacity_packets = capacity};
}

TEST(LinkTest, OneFrameArrivesAfterSerializationPlusPropagation) {
  Simulator sim;
  PacketPool pool;
  Link link(&sim, &pool, TenGig(), "l");
  Collector sink;
  link.Connect(&sink, 7);
  EXPECT_EQ(link.serialization_time(), TimeDelta::FromNanoseconds(kFrameNsAt10G));
  EXPECT_EQ(link.Send(MakeFrame(pool, 1)), SendResult::kQueued);
  sim.RunUntilIdle();
  ASSERT_EQ(sink.arrivals.size(), 1u);
  EXPECT_EQ(sink.arrivals[0].time_ns, kFrameNsAt10G + 2000);
  EXPECT_EQ(sink.arrivals[0].port, 7);
  EXPECT_EQ(sink.arrivals[0].decode, wire::DecodeError::kOk);
  EXPECT_EQ(pool.outstanding(), 0u);
}

TEST(LinkTest, BackToBackFramesAreSpacedBySerializationTimeAndStayInOrder) {
  Simulator sim;
  PacketPool pool;
  Link link(&sim, &pool, TenGig(), "l");
  Collector sink;
  link.Connect(&sink, 0);
  for (uint32_t i = 0; i < 10; ++i) link.Send(MakeFrame(pool, i));
  EXPECT_EQ(link.QueueDepth(), 10u);
  sim.RunUntilIdle();
  ASSERT_EQ(sink.arrivals.size(), 10u);
  for (uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(sink.arrivals[i].position, i);
    EXPECT_EQ(sink.arrivals[i].time_ns, (i + 1) * kFrameNsAt10G + 2000);
  }
}

TEST(LinkTest, QueueDepthDrainsOneFramePerSerializationTime) {
  Simulator sim;
  PacketPool pool;
  Link link(&sim, &pool, TenGig(), "l");
  Collector sink;
  link.Connect(&sink, 0);
  for (uint32_t i = 0; i < 4; ++i) link.Send(MakeFrame(pool, i));
  EXPECT_EQ(link.QueueDepth(), 4u);
  sim.RunUntil(TimePoint::FromNanoseconds(kFrameNsAt10G - 1));
  EXPECT_EQ(link.QueueDepth(), 4u);  // the first is still on the wire
  sim.RunUntil(TimePoint::FromNanoseconds(kFrameNsAt10G));
  EXPECT_EQ(link.QueueDepth(), 3u);
  EXPECT_EQ(link.TimeWhenDepthAtMost(1), TimePoint::FromNanoseconds(3 * kFrameNsAt10G));
  sim.RunUntil(TimePoint::FromNanoseconds(4 * kFrameNsAt10G));
  EXPECT_EQ(link.QueueDepth(), 0u);
  EXPECT_EQ(link.FreeSlots(), 1024u);
}

TEST(LinkTest, FullQueueTailDrops) {
  Simulator sim;
  PacketPool pool;
  Link link(&sim, &pool, TenGig(/*capacity=*/3), "l");
  Collector sink;
  link.Connect(&sink, 0);
  EXPECT_EQ(link.Send(MakeFrame(pool, 0)), SendResult::kQueued);
  EXPECT_EQ(link.Send(MakeFrame(pool, 1)), SendResult::kQueued);
  EXPECT_EQ(link.Send(MakeFrame(pool, 2)), SendResult::kQueued);
  EXPECT_EQ(link.Send(MakeFrame(pool, 3)), SendResult::kTailDropped);
  EXPECT_EQ(pool.outstanding(), 3u);  // the dropped frame went back to the pool
  // Once the first frame has left, there is room again.
  sim.RunUntil(TimePoint::FromNanoseconds(kFrameNsAt10G));
  EXPECT_EQ(link.Send(MakeFrame(pool, 4)), SendResult::kQueued);
  sim.RunUntilIdle();
  ASSERT_EQ(sink.arrivals.size(), 4u);
  EXPECT_EQ(sink.arrivals[3].position, 4u);
  EXPECT_EQ(link.counters().tail_drops, 1u);
  EXPECT_EQ(link.counters().sent, 4u);
  EXPECT_EQ(link.counters().delivered, 4u);
  EXPECT_EQ(link.counters().max_depth, 3u);
}

TEST(LinkTest, IdleLinkStartsSerializingAtSendTime) {
  Simulator sim;
  PacketPool pool;
  Link link(&sim, &pool, TenGig(), "l");
  Collector sink;
  link.Connect(&sink, 0);
  sim.RunUntil(TimePoint::FromNanoseconds(10'000));
  link.Send(MakeFrame(pool, 0));
  sim.RunUntilIdle();
  ASSERT_EQ(sink.arrivals.size(), 1u);
  EXPECT_EQ(sink.arrivals[0].time_ns, 10'000 + kFrameNsAt10G + 2000);
}

TEST(LinkTest, HundredGigSerializationKeepsSubNanosecondPrecision) {
  // 2640 bits at 100 Gb/s = 26.4 ns: 1000 frames take 26,400 ns exactly.
  Simulator sim;
  PacketPool pool;
  Link link(&sim, &pool,
            LinkConfig{.bandwidth_bps = 100e9, .propagation_delay = TimeDelta::Zero()}, "l");
  Collector sink;
  link.Connect(&sink, 0);
  for (uint32_t i = 0; i < 1000; ++i) link.Send(MakeFrame(pool, i));
  sim.RunUntilIdle();
  ASSERT_EQ(sink.arrivals.size(), 1000u);
  EXPECT_EQ(sink.arrivals.back().time_ns, 26'400);
}

TEST(LinkTest, DestroyingALinkWithFramesInFlightReturnsThemToThePool) {
  Simulator sim;
  PacketPool pool;
  {
    Link link(&sim, &pool, TenGig(), "l");
    Collector sink;
    link.Connect(&sink, 0);
    for (uint32_t i = 0; i < 5; ++i) link.Send(MakeFrame(pool, i));
    EXPECT_EQ(pool.outstanding(), 5u);
  }
  EXPECT_EQ(pool.outstanding(), 0u);
  EXPECT_EQ(sim.NextEventTime(), TimePoint::Infinite());
}

// A link into another partition (network.h): frames sent on the sender's
// clock wait until Cross, then arrive on the receiver's clock at the same
// times as over a link within one partition, in order, through the
// receiver's pool; a delayed duplicate keeps its extra delay.
TEST(LinkTest, FramesIntoAnotherPartitionArriveAfterCrossAtTheirTimes) {
  Simulator tx_sim;
  Simulator rx_sim;
  PacketPool tx_pool;
  PacketPool rx_pool;
  Link link(&tx_sim, &tx_pool, &rx_sim, &rx_pool, TenGig(), "l");
  EXPECT_TRUE(link.crosses_partitions());
  Collector sink;
  link.Connect(&sink, 3);
  for (uint32_t i = 0; i < 5; ++i) link.Send(MakeFrame(tx_pool, i));
  EXPECT_EQ(link.QueueDepth(), 5u);  // the sender's side, on the sender's clock
  EXPECT_EQ(rx_sim.pending_events(), 0u);
  EXPECT_EQ(tx_sim.pending_events(), 0u);  // the sender schedules nothing
  rx_sim.RunUntilIdle();
  EXPECT_TRUE(sink.arrivals.empty());  // not handed over yet

  link.Cross();
  EXPECT_EQ(tx_pool.outstanding(), 0u);  // the sender's copies went back
  EXPECT_EQ(rx_pool.outstanding(), 5u);
  rx_sim.RunUntilIdle();
  ASSERT_EQ(sink.arrivals.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(sink.arrivals[i].position, i);
    EXPECT_EQ(sink.arrivals[i].time_ns, (i + 1) * kFrameNsAt10G + 2000);
    EXPECT_EQ(sink.arrivals[i].port, 3);
  }
  EXPECT_EQ(link.counters().sent, 5u);
  EXPECT_EQ(link.counters().delivered, 5u);
  EXPECT_EQ(rx_pool.outstanding(), 0u);  // Collector released them

  // A duplicate delayed by a filter: both copies arrive late, in the
  // receiver's partition.
  link.AddFilter(std::make_unique<DuplicateFilter>(1.0, /*seed=*/1));
  link.AddFilter(std::make_unique<ReorderFilter>(1.0, TimeDelta::FromMicroseconds(5), /*seed=*/2));
  link.Send(MakeFrame(tx_pool, 9));
  link.Cross();
  rx_sim.RunUntilIdle();
  ASSERT_EQ(sink.arrivals.size(), 7u);
  EXPECT_EQ(sink.arrivals[5].position, 9u);
  EXPECT_EQ(sink.arrivals[6].position, 9u);
  EXPECT_GT(sink.arrivals[5].time_ns, 6 * kFrameNsAt10G + 2000);
  EXPECT_EQ(link.counters().duplicates, 1u);
  EXPECT_EQ(tx_pool.outstanding(), 0u);
  EXPECT_EQ(rx_pool.outstanding(), 0u);
}

// Cross on a link within one partition does nothing: frames are scheduled
// as they are sent.
TEST(LinkTest, CrossIsANoOpWithinAPartition) {
  Simulator sim;
  PacketPool pool;
  Link link(&sim, &pool, TenGig(), "l");
  EXPECT_FALSE(link.crosses_partitions());
  Collector sink;
  link.Connect(&sink, 0);
  link.Send(MakeFrame(pool, 1));
  EXPECT_EQ(sim.pending_events(), 1u);
  link.Cross();
  EXPECT_EQ(sim.pending_events(), 1u);
  sim.RunUntilIdle();
  EXPECT_EQ(sink.arrivals.size(), 1u);
}

}  // namespace
}  // namespace atp::sim
