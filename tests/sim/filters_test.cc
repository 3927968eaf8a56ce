// Tests of the packet filters a link applies (sim/loss_filters.h,
// sim/mangling_filters.h) and of the simulator's PRNG.
#include <memory>
#include <set>

#include "gtest/gtest.h"
#include "sim/link.h"
#include "sim/loss_filters.h"
#include "sim/mangling_filters.h"
#include "sim/random.h"
#include "tests/sim/sim_test_util.h"

namespace atp::sim {
namespace {

using testing::Collector;
using testing::MakeFrame;

constexpr uint64_t kSeed = 0x5eed;

// Harness: one 100 Gb/s link into a Collector.
struct Harness {
  Simulator sim;
  PacketPool pool;
  Link link{&sim, &pool,
            LinkConfig{.bandwidth_bps = 100e9,
                       .propagation_delay = TimeDelta::FromMicroseconds(1),
                       .queue_capacity_packets = 1u << 20},
            "l"};
  Collector sink;
  Harness() { link.Connect(&sink, 0); }

  void SendAndRun(uint32_t count, TrafficClass kind = TrafficClass::kGradients) {
    for (uint32_t i = 0; i < count; ++i) link.Send(MakeFrame(pool, i, kind));
    sim.RunUntilIdle();
  }
};

TEST(RandomTest, SameSeedSameSequenceAndStreamsDiffer) {
  Random a(42), b(42), c(Random::DeriveSeed(42, 1)), d(Random::DeriveSeed(42, 2));
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), b.Next());
  int equal = 0;
  for (int i = 0; i < 100; ++i) equal += c.Next() == d.Next();
  EXPECT_EQ(equal, 0);
}

TEST(RandomTest, BelowAndDoubleStayInRange) {
  Random r(7);
  for (int i = 0; i < 10000; ++i) {
    EXPECT_LT(r.Below(10), 10u);
    const double x = r.NextDouble();
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
  }
  EXPECT_EQ(ProbabilityThreshold(0.0), 0u);
  EXPECT_EQ(ProbabilityThreshold(1.0), UINT64_MAX);
}

TEST(RandomLossFilterTest, LosesAboutTheConfiguredFractionDeterministically) {
  Harness h;
  h.link.AddFilter(std::make_unique<RandomLossFilter>(0.1, kSeed));
  h.SendAndRun(20000);
  const size_t delivered = h.sink.arrivals.size();
  EXPECT_NEAR(static_cast<double>(20000 - delivered) / 20000, 0.1, 0.01);
  EXPECT_EQ(h.link.counters().filter_drops, 20000 - delivered);
  EXPECT_EQ(h.link.filters()[0]->affected(), 20000 - delivered);

  Harness again;
  again.link.AddFilter(std::make_unique<RandomLossFilter>(0.1, kSeed));
  again.SendAndRun(20000);
  ASSERT_EQ(again.sink.arrivals.size(), delivered);
  for (size_t i = 0; i < delivered; ++i) {
    EXPECT_EQ(again.sink.arrivals[i].position, h.sink.arrivals[i].position);
  }
}

TEST(RandomLossFilterTest, LostFramesStillUseTheLinksTime) {
  Harness h;
  h.link.AddFilter(std::make_unique<RandomLossFilter>(1.0, kSeed));
  h.link.Send(MakeFrame(h.pool, 0));
  EXPECT_EQ(h.link.QueueDepth(), 1u);
  h.sim.RunUntilIdle();
  EXPECT_TRUE(h.sink.arrivals.empty());
  EXPECT_EQ(h.pool.outstanding(), 0u);
}

TEST(RandomLossFilterTest, TrafficClassSelectsWhichFramesAreLost) {
  Harness h;
  h.link.AddFilter(
      std::make_unique<RandomLossFilter>(1.0, kSeed, TrafficClass::kParameterPackets));
  h.SendAndRun(100, TrafficClass::kGradients);
  EXPECT_EQ(h.sink.arrivals.size(), 100u);
  h.sink.arrivals.clear();
  h.SendAndRun(100, TrafficClass::kParameterPackets);
  EXPECT_TRUE(h.sink.arrivals.empty());
}

TEST(GilbertElliottLossFilterTest, LosesInBurstsAtTheStationaryRate) {
  Harness h;
  const GilbertElliottConfig config{
      .good_to_bad = 0.002, .bad_to_good = 0.2, .loss_in_good = 0.0, .loss_in_bad = 1.0};
  h.link.AddFilter(std::make_unique<GilbertElliottLossFilter>(config, kSeed));
  constexpr uint32_t kFrames = 200000;
  h.SendAndRun(kFrames);
  const double lost = static_cast<double>(kFrames - h.sink.arrivals.size());
  EXPECT_NEAR(lost / kFrames, config.MeanLossRate(), 0.3 * config.MeanLossRate());
  // Count bursts (runs of consecutive missing positions): mean length ~ 1/0.2.
  size_t bursts = 0;
  uint32_t expected = 0;
  for (const auto& a : h.sink.arrivals) {
    if (a.position != expected) ++bursts;
    expected = a.position + 1;
  }
  ASSERT_GT(bursts, 0u);
  EXPECT_NEAR(lost / static_cast<double>(bursts), 5.0, 1.0);
}

TEST(BlackholeFilterTest, DropsExactlyTheFramesSentInsideTheWindow) {
  Harness h;
  // At 100 Gb/s frames start every 26.4 ns: frame i starts at floor(26.4 i) ns.
  h.link.AddFilter(std::make_unique<BlackholeFilter>(TimePoint::FromNanoseconds(264),
                                                     TimePoint::FromNanoseconds(528)));
  h.SendAndRun(40);
  std::set<uint32_t> got;
  for (const auto& a : h.sink.arrivals) got.insert(a.position);
  for (uint32_t i = 0; i < 40; ++i) {
    EXPECT_EQ(got.count(i) == 0, i >= 10 && i < 20) << i;
  }
}

TEST(ReorderFilterTest, DelayedFramesAreOvertakenButAllArrive) {
  Harness h;
  h.link.AddFilter(
      std::make_unique<ReorderFilter>(0.05, TimeDelta::FromMicroseconds(5), kSeed));
  h.SendAndRun(5000);
  ASSERT_EQ(h.sink.arrivals.size(), 5000u);
  std::set<uint32_t> got;
  size_t out_of_order = 0;
  for (size_t i = 0; i < h.sink.arrivals.size(); ++i) {
    got.insert(h.sink.arrivals[i].position);
    if (i > 0 && h.sink.arrivals[i].position < h.sink.arrivals[i - 1].position) ++out_of_order;
    if (i > 0) {
      EXPECT_GE(h.sink.arrivals[i].time_ns, h.sink.arrivals[i - 1].time_ns);
    }
  }
  EXPECT_EQ(got.size(), 5000u);
  EXPECT_GT(out_of_order, 100u);
}

TEST(DuplicateFilterTest, AddsCopiesThatDecodeLikeTheOriginal) {
  Harness h;
  h.link.AddFilter(std::make_unique<DuplicateFilter>(0.1, kSeed));
  h.SendAndRun(5000);
  const size_t copies = h.link.counters().duplicates;
  EXPECT_NEAR(static_cast<double>(copies) / 5000, 0.1, 0.02);
  EXPECT_EQ(h.sink.arrivals.size(), 5000 + copies);
  for (const auto& a : h.sink.arrivals) EXPECT_EQ(a.decode, wire::DecodeError::kOk);
  EXPECT_EQ(h.pool.outstanding(), 0u);
}

TEST(CorruptFilterTest, EveryCorruptedFrameIsRejectedByTheDecoder) {
  Harness h;
  h.link.AddFilter(std::make_unique<CorruptFilter>(0.2, kSeed));
  h.SendAndRun(20000);
  ASSERT_EQ(h.sink.arrivals.size(), 20000u);
  size_t rejected = 0;
  for (const auto& a : h.sink.arrivals) rejected += a.decode != wire::DecodeError::kOk;
  EXPECT_EQ(rejected, h.link.filters()[0]->affected());
  EXPECT_NEAR(static_cast<double>(rejected) / 20000, 0.2, 0.02);
}

TEST(FilterChainTest, FiltersRunInOrderAndADropStopsTheChain) {
  Harness h;
  PacketFilter* loss = h.link.AddFilter(std::make_unique<RandomLossFilter>(1.0, kSeed));
  PacketFilter* dup = h.link.AddFilter(std::make_unique<DuplicateFilter>(1.0, kSeed));
  h.SendAndRun(10);
  EXPECT_TRUE(h.sink.arrivals.empty());
  EXPECT_EQ(loss->affected(), 10u);
  EXPECT_EQ(dup->affected(), 0u);
}

}  // namespace
}  // namespace atp::sim
