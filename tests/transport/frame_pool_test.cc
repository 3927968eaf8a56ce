// HeapFramePool and ReleaseFrames: counts, layout, options.
#include <cstdint>
#include <vector>

#include "atp/transport.h"
#include "gtest/gtest.h"

namespace atp::transport {
namespace {

std::unique_ptr<HeapFramePool> MakePool(uint32_t frames) {
  FramePoolOptions options;
  options.frames = frames;
  auto pool = HeapFramePool::Create(options);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return *std::move(pool);
}

TEST(HeapFramePool, AllocatesEveryBufferOnceAndCountsThemBack) {
  auto pool = MakePool(8);
  EXPECT_EQ(pool->capacity(), 8u);
  EXPECT_EQ(pool->free_count(), 8u);
  FrameRef frames[10];
  EXPECT_EQ(pool->AllocBurst(frames), 8u) << "only 8 buffers to give";
  EXPECT_EQ(pool->free_count(), 0u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(frames[i].pool, pool.get());
    EXPECT_EQ(frames[i].length, 0u);
    for (size_t j = 0; j < i; ++j) EXPECT_NE(frames[i].data, frames[j].data);
  }
  FrameRef extra;
  EXPECT_FALSE(pool->Alloc(&extra));
  pool->FreeBurst({frames, 3});
  EXPECT_EQ(pool->free_count(), 3u);
  ReleaseFrames({frames + 3, 5});
  EXPECT_EQ(pool->free_count(), 8u);
}

TEST(HeapFramePool, PayloadStartsOnACacheLineWithTheDefaultHeadroom) {
  auto pool = MakePool(4);
  EXPECT_EQ(pool->headroom(), kDefaultHeadroom);
  EXPECT_EQ(pool->stride() % kCacheLineBytes, 0u);
  EXPECT_GE(pool->frame_capacity(), wire::kFrameBytes);
  FrameRef frames[4];
  ASSERT_EQ(pool->AllocBurst(frames), 4u);
  for (const FrameRef& f : frames) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.data + wire::kPayloadOffset) % kCacheLineBytes, 0u);
    EXPECT_GE(f.data - kDefaultHeadroom, pool->region().data());
    EXPECT_LE(f.data + pool->frame_capacity(), pool->region().data() + pool->region().size());
  }
  pool->FreeBurst(frames);
}

TEST(HeapFramePool, ReleaseFramesReturnsEachFrameToItsOwnPool) {
  auto one = MakePool(4);
  auto two = MakePool(4);
  FrameRef mixed[6];
  ASSERT_TRUE(one->Alloc(&mixed[0]));
  ASSERT_TRUE(two->Alloc(&mixed[1]));
  ASSERT_TRUE(two->Alloc(&mixed[2]));
  ASSERT_TRUE(one->Alloc(&mixed[3]));
  ASSERT_TRUE(one->Alloc(&mixed[4]));
  ASSERT_TRUE(two->Alloc(&mixed[5]));
  ReleaseFrames(mixed);
  EXPECT_EQ(one->free_count(), 4u);
  EXPECT_EQ(two->free_count(), 4u);
}

TEST(FramePoolOptions, ValidateNamesTheBadField) {
  FramePoolOptions options;
  EXPECT_TRUE(options.Validate().ok());
  options.frames = 0;
  EXPECT_NE(options.Validate().message().find("frames"), std::string::npos);
  options = {};
  options.frame_capacity = 100;
  EXPECT_NE(options.Validate().message().find("frame_capacity"), std::string::npos);
  options = {};
  options.headroom = 1 << 20;
  EXPECT_NE(options.Validate().message().find("headroom"), std::string::npos);
  EXPECT_FALSE(HeapFramePool::Create(options).ok());
}

TEST(DeviceOptions, ValidateNamesTheBadField) {
  DeviceOptions options;
  EXPECT_TRUE(options.Validate().ok()) << options.Validate();
  const auto message_of = [](const DeviceOptions& o) { return std::string(o.Validate().message()); };
  DeviceOptions bad = options;
  bad.num_queues = 17;
  EXPECT_NE(message_of(bad).find("num_queues"), std::string::npos);
  bad = options;
  bad.num_queues = 0;
  EXPECT_NE(message_of(bad).find("num_queues"), std::string::npos);
  bad = options;
  bad.base_port = 65530;
  EXPECT_NE(message_of(bad).find("base_port"), std::string::npos);
  bad = options;
  bad.rx_ring_frames = 1000;
  EXPECT_NE(message_of(bad).find("rx_ring_frames"), std::string::npos);
  bad = options;
  bad.tx_ring_frames = 1;
  EXPECT_NE(message_of(bad).find("tx_ring_frames"), std::string::npos);
  bad = options;
  bad.max_burst = 0;
  EXPECT_NE(message_of(bad).find("max_burst"), std::string::npos);
  bad = options;
  bad.tx_pool_frames = 8;
  EXPECT_NE(message_of(bad).find("pool"), std::string::npos);
}

TEST(DeviceAddress, DefaultMacIsLocallyAdministeredUnicastFromTheIpv4) {
  const wire::MacAddress mac = DefaultMacFor(wire::Ipv4Address{0x0A000102});
  EXPECT_EQ(mac.ToString(), "02:00:0a:00:01:02");
  EXPECT_FALSE(mac.IsMulticast());
}

}  // namespace
}  // namespace atp::transport
