// tests/transport/mlx5/mprq_buffer_ring_test.cc: striding receive buffers:
// where frames land, when an entry ends (fillers included), when a chunk may
// be posted again, and the pool counts a leak check relies on.
#include "transport/mlx5/mprq_buffer_ring.h"

#include <vector>

#include "gtest/gtest.h"

namespace atp::transport::mlx5 {
namespace {

// 16 strides of 64 bytes per entry: 3 frames of 5 strides, then a filler of 1.
MprqGeometry SmallGeometry() {
  MprqGeometry g;
  g.log_stride_bytes = 6;
  g.log_strides_per_wqe = 4;
  g.stride_bytes = 64;
  g.strides_per_wqe = 16;
  g.wqe_bytes = 1024;
  g.strides_per_frame = 5;
  g.frames_per_wqe = 3;
  g.wq_depth = 2;
  g.chunks = 4;
  g.cq_entries = 16;
  return g;
}

class MprqBufferRingTest : public ::testing::Test {
 protected:
  MprqBufferRingTest()
      : memory_(SmallGeometry().memory_bytes()), ring_(SmallGeometry(), memory_.data()) {}

  // Post: the next free chunk into entry `counter`.
  uint32_t Post(uint32_t counter) {
    std::optional<uint32_t> chunk = ring_.TakeFreeChunk();
    EXPECT_TRUE(chunk.has_value());
    ring_.MarkPosted(counter, *chunk);
    return *chunk;
  }

  static StridedCompletion Packet(uint16_t wqe, uint16_t stride, uint16_t strides = 5,
                                  uint16_t bytes = 306) {
    return StridedCompletion{wqe, stride, strides, bytes, false};
  }
  static StridedCompletion Filler(uint16_t wqe, uint16_t stride, uint16_t strides) {
    return StridedCompletion{wqe, stride, strides, 0, true};
  }

  std::vector<uint8_t> memory_;
  MprqBufferRing ring_;
};

TEST_F(MprqBufferRingTest, StartsWithEveryChunkFreeAndTheFullFrameCount) {
  EXPECT_EQ(ring_.free_chunks(), 4u);
  EXPECT_EQ(ring_.capacity(), 12u) << "4 chunks x 3 frames";
  EXPECT_EQ(ring_.free_count(), ring_.capacity());
  EXPECT_GE(ring_.frame_capacity(), 306u);
  EXPECT_EQ(ring_.headroom(), 0u) << "the NIC writes each frame at a stride boundary";
  FrameRef frames[4];
  EXPECT_EQ(ring_.AllocBurst(frames), 0u) << "receive buffers are not lent for sending";
}

TEST_F(MprqBufferRingTest, FramesAreViewsAtTheirStrides) {
  const uint32_t chunk = Post(0);
  const uint8_t* base = ring_.chunk_data(chunk);
  EXPECT_EQ(base, memory_.data() + size_t{chunk} * 1024);
  for (uint16_t i = 0; i < 3; ++i) {
    const MprqArrival a = ring_.Arrive(Packet(0, static_cast<uint16_t>(i * 5)));
    EXPECT_FALSE(a.malformed);
    EXPECT_EQ(a.data, base + i * 5 * 64);
    EXPECT_EQ(a.bytes, 306u);
    EXPECT_FALSE(a.completes_wqe) << "15 of 16 strides";
    const FrameRef f = ring_.Keep(a);
    EXPECT_EQ(f.data, base + i * 5 * 64);
    EXPECT_EQ(f.length, 306u);
    EXPECT_EQ(f.pool, &ring_);
    ring_.Settle(a);
  }
  EXPECT_EQ(ring_.free_count(), 9u);
  EXPECT_EQ(ring_.held_frames(), 3u);
}

TEST_F(MprqBufferRingTest, AFillerEndsTheEntryButHeldFramesKeepTheChunk) {
  const uint32_t chunk = Post(0);
  Post(1);
  std::vector<FrameRef> held;
  for (uint16_t i = 0; i < 3; ++i) {
    const MprqArrival a = ring_.Arrive(Packet(0, static_cast<uint16_t>(i * 5)));
    held.push_back(ring_.Keep(a));
    ring_.Settle(a);
  }
  const MprqArrival filler = ring_.Arrive(Filler(0, 15, 1));
  EXPECT_EQ(filler.data, nullptr);
  EXPECT_TRUE(filler.completes_wqe);
  ring_.Settle(filler);
  EXPECT_EQ(ring_.free_chunks(), 2u) << "done, but 3 frames of it are held";
  ring_.FreeBurst({held.data(), 2});
  EXPECT_EQ(ring_.free_chunks(), 2u);
  ring_.FreeBurst({held.data() + 2, 1});
  EXPECT_EQ(ring_.free_chunks(), 3u) << "the last frame released frees the chunk";
  EXPECT_EQ(ring_.TakeFreeChunk(), chunk) << "the warmest chunk is reused first";
  EXPECT_EQ(ring_.free_count(), ring_.capacity());
}

TEST_F(MprqBufferRingTest, AnEntryWithNoHeldFrameIsFreeAsSoonAsItEnds) {
  Post(0);
  for (uint16_t i = 0; i < 3; ++i)
    ring_.Settle(ring_.Arrive(Packet(0, static_cast<uint16_t>(i * 5))));
  EXPECT_EQ(ring_.free_chunks(), 3u);
  const MprqArrival last = ring_.Arrive(Packet(0, 15, 1, 60));  // a short frame in the last stride
  EXPECT_TRUE(last.completes_wqe);
  ring_.Settle(last);
  EXPECT_EQ(ring_.free_chunks(), 4u);
}

TEST_F(MprqBufferRingTest, EntriesWrapAroundTheWorkQueueAndTheSixteenBitCounter) {
  // Entry counters 0xFFFE, 0xFFFF, 0x10000 (wqe_id 0): slots 0, 1, 0.
  uint32_t counter = 0xFFFE;
  for (int round = 0; round < 6; ++round, ++counter) {
    const uint32_t chunk = Post(counter);
    const uint16_t wqe_id = static_cast<uint16_t>(counter);
    const MprqArrival a = ring_.Arrive(Packet(wqe_id, 0));
    ASSERT_FALSE(a.malformed) << "round " << round;
    EXPECT_EQ(a.chunk, chunk);
    EXPECT_EQ(a.data, ring_.chunk_data(chunk));
    const FrameRef f = ring_.Keep(a);
    ring_.Settle(a);
    const MprqArrival end = ring_.Arrive(Filler(wqe_id, 5, 11));
    EXPECT_TRUE(end.completes_wqe);
    ring_.Settle(end);
    ring_.FreeBurst({&f, 1});
  }
  EXPECT_EQ(ring_.free_chunks(), 4u);
  EXPECT_EQ(ring_.free_count(), ring_.capacity());
}

TEST_F(MprqBufferRingTest, CompletionsBeyondTheEntryOrForNoPostedEntryAreMalformed) {
  Post(0);
  MprqArrival a = ring_.Arrive(Packet(1, 0));  // entry 1 holds no chunk
  EXPECT_TRUE(a.malformed);
  EXPECT_EQ(a.data, nullptr);
  a = ring_.Arrive(Packet(0, 14, 5));  // strides 14..18 of 16
  EXPECT_TRUE(a.malformed);
  a = ring_.Arrive(Packet(0, 0, 1, 100));  // 100 bytes in one 64-byte stride
  EXPECT_TRUE(a.malformed);
  a = ring_.Arrive(Packet(0, 0, 0, 0));
  EXPECT_TRUE(a.malformed);
  EXPECT_EQ(ring_.held_frames(), 0u);
}

TEST_F(MprqBufferRingTest, AMalformedCompletionStillCountsItsStrides) {
  Post(0);
  ring_.Settle(ring_.Arrive(Packet(0, 0, 10)));
  const MprqArrival bad = ring_.Arrive(Packet(0, 10, 6, 1000));  // more bytes than 6 strides
  EXPECT_TRUE(bad.malformed);
  EXPECT_TRUE(bad.completes_wqe) << "so that the entry still ends";
  ring_.Settle(bad);
  EXPECT_EQ(ring_.free_chunks(), 4u);
}

}  // namespace
}  // namespace atp::transport::mlx5
