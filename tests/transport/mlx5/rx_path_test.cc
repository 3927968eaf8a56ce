// tests/transport/mlx5/rx_path_test.cc: the receive datapaths against fake
// NICs: a striding queue packing several frames per entry (fillers, entries
// and the completion ring wrapping around, chunks re-posted once released)
// and a plain queue with one buffer per entry.
#include "transport/mlx5/rx_path.h"

#include <cstring>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/transport/mlx5/fake_verbs.h"
#include "tests/transport/mlx5/mlx5_test_util.h"

namespace atp::transport::mlx5 {
namespace {

using testing::Bytes;
using testing::FakePlainNic;
using testing::FakeStridingNic;
using testing::Frame;
using testing::FrameBytes;
using testing::StridingShape;

Bytes ToBytes(const FrameBytes& frame) { return Bytes(frame.begin(), frame.end()); }
Bytes ToBytes(const FrameRef& frame) { return Bytes(frame.data, frame.data + frame.length); }

// 16 strides of 64 bytes per entry: 3 frames of 5 strides, then a filler.
MprqGeometry Geometry(uint32_t wq_depth, uint32_t chunks) {
  MprqGeometry g;
  g.log_stride_bytes = 6;
  g.log_strides_per_wqe = 4;
  g.stride_bytes = 64;
  g.strides_per_wqe = 16;
  g.wqe_bytes = 1024;
  g.strides_per_frame = 5;
  g.frames_per_wqe = 3;
  g.wq_depth = wq_depth;
  g.chunks = chunks;
  g.cq_entries = 8;
  return g;
}

class StridingRxPathTest : public ::testing::Test {
 protected:
  void Make(uint32_t wq_depth = 2, uint32_t chunks = 4, uint32_t cq_entries = 8,
            uint32_t cqe_bytes = 64) {
    StridingShape shape;
    shape.wq_entries = wq_depth;
    shape.cq_entries = cq_entries;
    shape.cqe_bytes = cqe_bytes;
    nic_ = std::make_unique<FakeStridingNic>(shape);
    const MprqGeometry g = Geometry(wq_depth, chunks);
    memory_.assign(g.memory_bytes(), 0);
    ring_ = std::make_unique<MprqBufferRing>(g, memory_.data());
    path_ = std::make_unique<StridingRxPath>(nic_->rings(), ring_.get(),
                                             RxSteering{wire::kDefaultBasePort, 0}, &stats_);
    path_->Repost();
  }

  std::unique_ptr<FakeStridingNic> nic_;
  std::vector<uint8_t> memory_;
  std::unique_ptr<MprqBufferRing> ring_;
  std::unique_ptr<StridingRxPath> path_;
  QueueStats stats_;
};

TEST_F(StridingRxPathTest, RepostFillsEveryEntryAndRingsTheDoorbell) {
  Make(/*wq_depth=*/2, /*chunks=*/4);
  EXPECT_EQ(path_->posted_entries(), 2u);
  EXPECT_EQ(nic_->driver_head(), 2u);
  EXPECT_EQ(ring_->free_chunks(), 2u) << "two spare chunks for frames the caller holds";
}

TEST_F(StridingRxPathTest, SeveralFramesInOneEntryArriveByteExactAtTheirStrides) {
  Make();
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(nic_->Deliver(Frame(0, i)));
  FrameRef frames[8];
  ASSERT_EQ(path_->Receive(frames), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(ToBytes(frames[i]), ToBytes(Frame(0, i)));
    EXPECT_EQ(frames[i].data, frames[0].data + i * 5 * 64) << "5 strides of 64 per frame";
    EXPECT_EQ(frames[i].pool, ring_.get());
  }
  EXPECT_EQ(nic_->consumer_index(), 3u) << "the CQ doorbell moved past what was read";
  EXPECT_EQ(stats_.rx_frames, 3u);
  EXPECT_EQ(ring_->free_count(), ring_->capacity() - 3);
  ReleaseFrames({frames, 3});
  EXPECT_EQ(ring_->free_count(), ring_->capacity());
}

TEST_F(StridingRxPathTest, AFillerEndsTheEntryAndTheChunkIsRepostedOnceReleased) {
  Make(/*wq_depth=*/2, /*chunks=*/2);                                        // no spare chunk
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(nic_->Deliver(Frame(0, i)));  // 3 + filler + 1
  EXPECT_EQ(nic_->cqes_written(), 5u);
  FrameRef frames[8];
  ASSERT_EQ(path_->Receive(frames), 4u);
  EXPECT_EQ(path_->posted_entries(), 1u) << "entry 0 is finished";
  EXPECT_EQ(nic_->driver_head(), 2u) << "its chunk is held: nothing to post";
  ReleaseFrames({frames, 3});  // entry 0's frames
  EXPECT_EQ(path_->Receive({frames + 4, 4}), 0u);
  EXPECT_EQ(nic_->driver_head(), 3u) << "released, and posted into the entry the NIC freed";
  EXPECT_EQ(path_->posted_entries(), 2u);
  ReleaseFrames({frames + 3, 1});
  EXPECT_EQ(ring_->free_count(), ring_->capacity());
}

TEST_F(StridingRxPathTest, EntriesAndTheCompletionRingWrapAroundManyTimes) {
  Make(/*wq_depth=*/2, /*chunks=*/3, /*cq_entries=*/8);
  uint32_t sent = 0;
  uint32_t received = 0;
  FrameRef frames[4];
  // Deliver in rounds smaller than the CQ; the receiver releases at once.
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(nic_->Deliver(Frame(0, sent))) << "frame " << sent;
      ++sent;
    }
    size_t n;
    while ((n = path_->Receive(frames)) > 0) {
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(ToBytes(frames[i]), ToBytes(Frame(0, received))) << "frame " << received;
        ++received;
      }
      ReleaseFrames({frames, n});
    }
  }
  EXPECT_EQ(received, sent);
  EXPECT_EQ(stats_.rx_frames, sent);
  EXPECT_EQ(nic_->drops(), 0u);
  EXPECT_GT(nic_->entries_consumed(), 100u) << "the 2-entry work queue wrapped many times";
  EXPECT_GT(nic_->cqes_written(), 8u * 50) << "the completion ring wrapped";
  EXPECT_EQ(ring_->free_count(), ring_->capacity());
}

TEST_F(StridingRxPathTest, TheSixteenBitEntryCounterWraps) {
  Make(/*wq_depth=*/4, /*chunks=*/6, /*cq_entries=*/16);
  std::vector<FrameBytes> frames_by_position;
  for (uint32_t p = 0; p < 64; ++p) frames_by_position.push_back(Frame(0, p));
  uint64_t sent = 0;
  uint64_t received = 0;
  FrameRef frames[8];
  while (nic_->entries_consumed() < 70000) {
    for (int i = 0; i < 3; ++i, ++sent) {
      ASSERT_TRUE(nic_->Deliver(frames_by_position[sent % 64])) << "frame " << sent;
    }
    size_t n;
    while ((n = path_->Receive(frames)) > 0) {
      for (size_t i = 0; i < n; ++i, ++received) {
        ASSERT_EQ(std::memcmp(frames[i].data, frames_by_position[received % 64].data(), 306), 0)
            << "frame " << received;
      }
      ReleaseFrames({frames, n});
    }
  }
  EXPECT_EQ(received, sent);
  EXPECT_GT(path_->wq_counter(), 65536u);
  EXPECT_EQ(ring_->free_count(), ring_->capacity());
}

TEST_F(StridingRxPathTest, WorksWith128ByteCqes) {
  Make(2, 4, 8, /*cqe_bytes=*/128);
  for (uint32_t i = 0; i < 5; ++i) ASSERT_TRUE(nic_->Deliver(Frame(0, i)));
  FrameRef frames[8];
  ASSERT_EQ(path_->Receive(frames), 5u);
  for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(ToBytes(frames[i]), ToBytes(Frame(0, i)));
  ReleaseFrames({frames, 5});
}

TEST_F(StridingRxPathTest, ABurstSmallerThanWhatWaitsLeavesTheRestForLater) {
  Make();
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(nic_->Deliver(Frame(0, i)));
  FrameRef frames[2];
  ASSERT_EQ(path_->Receive(frames), 2u);
  EXPECT_EQ(nic_->consumer_index(), 2u);
  FrameRef rest[2];
  ASSERT_EQ(path_->Receive(rest), 1u);
  EXPECT_EQ(ToBytes(rest[0]), ToBytes(Frame(0, 2)));
  ReleaseFrames(frames);
  ReleaseFrames({rest, 1});
}

TEST_F(StridingRxPathTest, FramesNotForThisQueueAreCountedBadAndTheirStridesStillCount) {
  Make(/*wq_depth=*/2, /*chunks=*/2);
  ASSERT_TRUE(nic_->Deliver(Frame(1, 0)));  // queue 1's port
  FrameBytes short_frame = Frame(0, 1);
  ASSERT_TRUE(nic_->Deliver({short_frame.data(), 200}));
  FrameBytes not_ipv4 = Frame(0, 2);
  not_ipv4[12] = 0x86;
  ASSERT_TRUE(nic_->Deliver(not_ipv4));
  ASSERT_TRUE(nic_->Deliver(Frame(0, 3)));  // after the filler, in entry 1
  FrameRef frames[8];
  ASSERT_EQ(path_->Receive(frames), 1u);
  EXPECT_EQ(ToBytes(frames[0]), ToBytes(Frame(0, 3)));
  EXPECT_EQ(stats_.rx_bad_frames, 3u);
  EXPECT_EQ(nic_->driver_head(), 3u) << "entry 0 held nothing: its chunk went straight back";
  ReleaseFrames({frames, 1});
}

TEST_F(StridingRxPathTest, AnErrorCompletionIsCountedDropped) {
  Make();
  nic_->DeliverError();
  ASSERT_TRUE(nic_->Deliver(Frame(0, 0)));
  FrameRef frames[4];
  ASSERT_EQ(path_->Receive(frames), 1u);
  EXPECT_EQ(stats_.rx_dropped, 1u);
  ReleaseFrames({frames, 1});
}

TEST_F(StridingRxPathTest, WhenTheCallerHoldsEveryChunkTheNicDropsUntilOneIsReleased) {
  Make(/*wq_depth=*/2, /*chunks=*/2);
  std::vector<FrameRef> held;
  FrameRef frames[8];
  for (uint32_t i = 0; i < 6; ++i) ASSERT_TRUE(nic_->Deliver(Frame(0, i)));
  size_t n;
  while ((n = path_->Receive(frames)) > 0) held.insert(held.end(), frames, frames + n);
  ASSERT_EQ(held.size(), 6u);
  EXPECT_FALSE(nic_->Deliver(Frame(0, 6))) << "no entry posted: the NIC drops";
  ReleaseFrames({held.data(), 3});
  EXPECT_EQ(path_->Receive(frames), 0u);  // reposts the freed chunk
  ASSERT_TRUE(nic_->Deliver(Frame(0, 7)));
  ASSERT_EQ(path_->Receive(frames), 1u);
  EXPECT_EQ(ToBytes(frames[0]), ToBytes(Frame(0, 7)));
  ReleaseFrames({frames, 1});
  ReleaseFrames({held.data() + 3, 3});
  EXPECT_EQ(ring_->free_count(), ring_->capacity());
}

// --- Plain -------------------------------------------------------------------

class PlainRxPathTest : public ::testing::Test {
 protected:
  PlainRxPathTest() {
    FramePoolOptions options;
    options.frames = 16;
    options.frame_capacity = 1536;
    pool_ = std::make_unique<PostedFramePool>(*HeapFramePool::Create(options));
    path_ = std::make_unique<PlainRxPath>(nic_.wq(), nic_.cq(), pool_.get(), 0x44, 8,
                                          RxSteering{wire::kDefaultBasePort, 0}, &stats_);
  }

  FakePlainNic nic_;
  std::unique_ptr<PostedFramePool> pool_;
  QueueStats stats_;
  std::unique_ptr<PlainRxPath> path_;
};

TEST_F(PlainRxPathTest, PostsOneBufferPerEntryWhichStillCountAsFree) {
  path_->Repost();
  EXPECT_EQ(nic_.posted(), 8u);
  EXPECT_EQ(path_->posted_entries(), 8u);
  EXPECT_EQ(pool_->free_count(), pool_->capacity()) << "posted buffers are the queue's, not lost";
}

TEST_F(PlainRxPathTest, ReceivesFramesAndRefillsTheQueue) {
  path_->Repost();
  for (uint32_t i = 0; i < 5; ++i) ASSERT_TRUE(nic_.Deliver(Frame(0, i)));
  FrameRef frames[8];
  ASSERT_EQ(path_->Receive(frames), 5u);
  for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(ToBytes(frames[i]), ToBytes(Frame(0, i)));
  EXPECT_EQ(nic_.posted(), 8u) << "refilled";
  EXPECT_EQ(pool_->free_count(), pool_->capacity() - 5);
  ReleaseFrames({frames, 5});
  EXPECT_EQ(pool_->free_count(), pool_->capacity());
}

TEST_F(PlainRxPathTest, BadFramesAndErrorsAreCountedAndTheirBuffersReused) {
  path_->Repost();
  FrameBytes bad = Frame(0, 0);
  ASSERT_TRUE(nic_.Deliver({bad.data(), 100}));
  ASSERT_TRUE(nic_.Deliver(Frame(0, 1), IBV_WC_LOC_LEN_ERR));
  ASSERT_TRUE(nic_.Deliver(Frame(3, 2)));  // another queue's port
  ASSERT_TRUE(nic_.Deliver(Frame(0, 3)));
  FrameRef frames[8];
  ASSERT_EQ(path_->Receive(frames), 1u);
  EXPECT_EQ(ToBytes(frames[0]), ToBytes(Frame(0, 3)));
  EXPECT_EQ(stats_.rx_bad_frames, 2u);
  EXPECT_EQ(stats_.rx_dropped, 1u);
  ReleaseFrames({frames, 1});
  EXPECT_EQ(pool_->free_count(), pool_->capacity());
}

TEST_F(PlainRxPathTest, AFailedPostGivesTheUnpostedBuffersBack) {
  nic_.FailPostAfter(5);
  path_->Repost();
  EXPECT_EQ(nic_.posted(), 5u);
  EXPECT_EQ(path_->posted_entries(), 5u);
  EXPECT_EQ(pool_->posted(), 5u);
  EXPECT_EQ(pool_->free_count(), pool_->capacity());
}

TEST_F(PlainRxPathTest, StopGivesThePostedBuffersBack) {
  path_->Repost();
  path_->Stop();
  EXPECT_EQ(pool_->posted(), 0u);
  EXPECT_EQ(pool_->free_count(), pool_->capacity());
  FrameRef frames[4];
  EXPECT_EQ(path_->Receive(frames), 0u);
}

}  // namespace
}  // namespace atp::transport::mlx5
