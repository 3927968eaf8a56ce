// tests/transport/mlx5/posted_frame_pool_test.cc: a plain receive queue's
// pool counts posted buffers as free, so the no-leak check holds.
#include "transport/mlx5/posted_frame_pool.h"

#include <memory>

#include "gtest/gtest.h"

namespace atp::transport::mlx5 {
namespace {

std::unique_ptr<PostedFramePool> MakePool(uint32_t frames) {
  FramePoolOptions options;
  options.frames = frames;
  return std::make_unique<PostedFramePool>(*HeapFramePool::Create(options));
}

TEST(PostedFramePool, PostedBuffersCountAsFreeAndCompletedOnesAsTheCallers) {
  auto pool = MakePool(4);
  FrameRef posted[3];
  for (FrameRef& f : posted) ASSERT_TRUE(pool->TakeForPosting(&f));
  EXPECT_EQ(pool->posted(), 3u);
  EXPECT_EQ(pool->free_count(), 4u) << "the queue holds them, nobody leaked them";
  EXPECT_EQ(posted[0].pool, pool.get()) << "frames go back to the wrapper";
  pool->Completed();  // posted[0] now belongs to the caller
  EXPECT_EQ(pool->free_count(), 3u);
  ReleaseFrames({posted, 1});
  EXPECT_EQ(pool->free_count(), 4u);
  FrameRef more[2];
  ASSERT_TRUE(pool->TakeForPosting(&more[0]));
  ASSERT_TRUE(pool->TakeForPosting(&more[1]));
  FrameRef none;
  EXPECT_FALSE(pool->TakeForPosting(&none)) << "4 posted: the heap is empty";
  EXPECT_EQ(pool->free_count(), 4u);
}

TEST(PostedFramePool, AllocBurstLendsBuffersThatComeBackThroughTheWrapper) {
  auto pool = MakePool(4);
  FrameRef frames[2];
  ASSERT_EQ(pool->AllocBurst(frames), 2u);
  EXPECT_EQ(frames[0].pool, pool.get());
  EXPECT_EQ(pool->free_count(), 2u);
  ReleaseFrames(frames);
  EXPECT_EQ(pool->free_count(), 4u);
  EXPECT_EQ(pool->headroom(), kDefaultHeadroom);
}

}  // namespace
}  // namespace atp::transport::mlx5
