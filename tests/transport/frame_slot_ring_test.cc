// FrameSlotRing: the loopback receive ring (many producers, one consumer).
#include <array>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "transport/loopback/frame_slot_ring.h"

namespace atp::transport::internal {
namespace {

std::array<uint8_t, kFrameBytes> Frame(uint32_t producer, uint32_t n) {
  std::array<uint8_t, kFrameBytes> f{};
  std::memcpy(f.data(), &producer, 4);
  std::memcpy(f.data() + 4, &n, 4);
  f[kFrameBytes - 1] = static_cast<uint8_t>(n * 7 + producer);
  return f;
}

TEST(FrameSlotRing, IsFifoAndRefusesWhenFull) {
  FrameSlotRing ring(4);
  EXPECT_EQ(ring.Front(), nullptr);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_TRUE(ring.TryPush(Frame(0, i).data()));
  EXPECT_FALSE(ring.TryPush(Frame(0, 4).data())) << "4 slots";
  EXPECT_EQ(ring.Backlog(), 4u);
  for (uint32_t lap = 0; lap < 3; ++lap) {
    for (uint32_t i = 0; i < 4; ++i) {
      const uint8_t* front = ring.Front();
      ASSERT_NE(front, nullptr);
      EXPECT_EQ(std::memcmp(front, Frame(lap, i).data(), kFrameBytes), 0);
      ring.Pop();
      EXPECT_TRUE(ring.TryPush(Frame(lap + 1, i).data())) << "a popped slot is free again";
    }
  }
  EXPECT_EQ(ring.Backlog(), 4u);
}

TEST(FrameSlotRing, ManyProducerThreadsLoseNothingAndKeepEachOnesOrder) {
  constexpr uint32_t kProducers = 3;
  constexpr uint32_t kPerProducer = 20000;
  FrameSlotRing ring(64);
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) {
    producers.emplace_back([&ring, p] {
      for (uint32_t n = 0; n < kPerProducer;) {
        if (ring.TryPush(Frame(p, n).data())) {
          ++n;
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  std::array<uint32_t, kProducers> next{};
  uint32_t received = 0;
  while (received < kProducers * kPerProducer) {
    const uint8_t* front = ring.Front();
    if (front == nullptr) {
      std::this_thread::yield();
      continue;
    }
    uint32_t p = 0;
    uint32_t n = 0;
    std::memcpy(&p, front, 4);
    std::memcpy(&n, front + 4, 4);
    ASSERT_LT(p, kProducers);
    ASSERT_EQ(n, next[p]) << "producer " << p << " out of order";
    ASSERT_EQ(front[kFrameBytes - 1], static_cast<uint8_t>(n * 7 + p)) << "torn frame";
    ++next[p];
    ++received;
    ring.Pop();
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(ring.Front(), nullptr);
}

}  // namespace
}  // namespace atp::transport::internal
