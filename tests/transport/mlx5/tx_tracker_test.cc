// tests/transport/mlx5/tx_tracker_test.cc: posted-request records complete in
// order, up to each signalled completion; staging slots come back in order.
#include "transport/mlx5/tx_tracker.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace atp::transport::mlx5 {
namespace {

TEST(TxCompletionRing, ACompletionGivesBackEveryRequestUpToIt) {
  TxCompletionRing ring(8);
  for (uint32_t i = 0; i < 6; ++i) {
    EXPECT_EQ(ring.Push(TxRecord{{}, i + 1, kNoSlot}), i) << "ids are the post order";
  }
  EXPECT_EQ(ring.size(), 6u);
  EXPECT_EQ(ring.frames_outstanding(), 21u);
  std::vector<uint32_t> released;
  const auto release = [&](const TxRecord& r) { released.push_back(r.frames); };
  EXPECT_EQ(ring.CompleteThrough(3, release), 1u + 2 + 3 + 4);
  EXPECT_EQ(released, (std::vector<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(ring.size(), 2u);
  EXPECT_EQ(ring.frames_outstanding(), 11u);
  EXPECT_EQ(ring.CompleteThrough(2, release), 0u) << "already completed";
  EXPECT_EQ(ring.CompleteThrough(99, release), 11u) << "no further than what was posted";
  EXPECT_EQ(ring.size(), 0u);
  EXPECT_EQ(ring.frames_outstanding(), 0u);
}

TEST(TxCompletionRing, IdsKeepGrowingAcrossTheRingsWrap) {
  TxCompletionRing ring(4);
  int released = 0;
  for (uint64_t id = 0; id < 20; ++id) {
    EXPECT_EQ(ring.Push(TxRecord{{}, 1, kNoSlot}), id);
    if (ring.size() == ring.capacity()) {
      EXPECT_EQ(ring.CompleteThrough(id, [&](const TxRecord&) { ++released; }), 4u);
    }
  }
  EXPECT_EQ(released, 20);
}

TEST(TxCompletionRing, CompleteAllGivesBackEverything) {
  TxCompletionRing ring(4);
  ring.Push(TxRecord{{}, 2, 0});
  ring.Push(TxRecord{{}, 3, 1});
  std::vector<uint32_t> slots;
  EXPECT_EQ(ring.CompleteAll([&](const TxRecord& r) { slots.push_back(r.slot); }), 5u);
  EXPECT_EQ(slots, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(ring.next_id(), 2u);
}

TEST(StagingSlots, AreHandedOutAndReturnedInRingOrder) {
  std::vector<uint8_t> memory(3 * 128);
  StagingSlots slots(memory, 128, 3);
  EXPECT_EQ(slots.Acquire(), 0u);
  EXPECT_EQ(slots.Acquire(), 1u);
  EXPECT_EQ(slots.Acquire(), 2u);
  EXPECT_EQ(slots.Acquire(), std::nullopt) << "all three in flight";
  EXPECT_EQ(slots.in_flight(), 3u);
  slots.Release(0);
  EXPECT_EQ(slots.Acquire(), 0u) << "wraps around";
  EXPECT_EQ(slots.slot(2).data(), memory.data() + 256);
  EXPECT_EQ(slots.slot(2).size(), 128u);
}

}  // namespace
}  // namespace atp::transport::mlx5
