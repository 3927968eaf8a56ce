// The worker engine's copies of the parameter packets it received
// (WorkerQueueEngine::Received, ResultsAfterLowest): what a worker replays
// to a restarted PS and what its join says it holds (docs/protocol.md
// "Failures, runs and restarts").
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/worker/worker_queue_engine.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using testing::AckFor;
using testing::AckOptions;
using testing::kT0;
using testing::MakeEngine;
using testing::Ramp;
using testing::Send;
using testing::SmallConfig;

wire::Payload Distinct(uint32_t salt) {
  wire::Payload p;
  for (size_t i = 0; i < p.size(); ++i) p[i] = salt * 1000u + static_cast<uint32_t>(i);
  return p;
}

TEST(ReceivedPacketsTest, KeepsEachSlotsLastResultAsOnTheWire) {
  auto engine = MakeEngine(SmallConfig(/*slots=*/8, /*initial_window=*/8));
  const std::vector<float> in = Ramp(62 * 12);
  std::vector<float> out(in.size());
  ASSERT_TRUE(engine->Enqueue(in, out).ok());
  ASSERT_EQ(Send(*engine, kT0).size(), 8u);
  EXPECT_EQ(engine->Received(0), nullptr) << "nothing received yet";

  const wire::AtpMessage ack0 = AckFor(0, Distinct(1));
  engine->OnParameterPacket(ack0, kT0);
  const WorkerQueueEngine::ReceivedPacket* copy = engine->Received(0);
  ASSERT_NE(copy, nullptr);
  EXPECT_EQ(copy->position, 0u);
  EXPECT_EQ(copy->header(), ack0.header);
  std::array<uint8_t, wire::kPayloadBytes> bytes{};
  wire::EncodePayload(ack0.payload, bytes);
  EXPECT_TRUE(std::ranges::equal(copy->payload(), bytes));

  // Wire form: the bytes are kept as they came.
  const wire::AtpMessage ack1 = AckFor(1, Distinct(2), AckOptions{.collision = true, .new_index = 9});
  std::array<uint8_t, wire::kMessageBytes> message_bytes{};
  wire::EncodeMessage(ack1, message_bytes);
  engine->OnParameterPacket(ack1.header, message_bytes, kT0);
  ASSERT_NE(engine->Received(1), nullptr);
  wire::EncodePayload(ack1.payload, bytes);
  EXPECT_TRUE(std::ranges::equal(engine->Received(1)->payload(), bytes));
  EXPECT_EQ(engine->Received(1)->header(), ack1.header);
  EXPECT_EQ(engine->Received(1)->header().NewAggregatorIndex(), 9);

  // Position 8 takes slot 0: the copy of 0 gives way.
  ASSERT_EQ(Send(*engine, kT0).size(), 2u);  // positions 8 and 9
  engine->OnParameterPacket(AckFor(8, Distinct(3)), kT0);
  EXPECT_EQ(engine->Received(0), nullptr);
  ASSERT_NE(engine->Received(8), nullptr);
  EXPECT_EQ(engine->Received(8)->position, 8u);
}

TEST(ReceivedPacketsTest, SaysWhichResultsItHoldsBeyondTheLowestUnacknowledged) {
  auto engine = MakeEngine(SmallConfig(/*slots=*/16, /*initial_window=*/16));
  const std::vector<float> in = Ramp(62 * 16);
  std::vector<float> out(in.size());
  ASSERT_TRUE(engine->Enqueue(in, out).ok());
  ASSERT_EQ(Send(*engine, kT0).size(), 16u);
  std::array<uint32_t, 2> bits{};
  EXPECT_EQ(engine->ResultsAfterLowest(bits), 0u) << "no result: acked_end is the lowest";
  EXPECT_EQ(bits, (std::array<uint32_t, 2>{0, 0}));

  // 0 and 1 in order, then 3 and 7 out of order: the lowest unacknowledged is 2.
  for (uint64_t p : {0, 1, 3, 7}) engine->OnParameterPacket(AckFor(p), kT0);
  ASSERT_EQ(engine->stats().lowest_unacked, 2u);
  EXPECT_EQ(engine->ResultsAfterLowest(bits), 8u);
  // Bit i is position 2 + 1 + i: 3 is bit 0, 7 is bit 4.
  EXPECT_EQ(bits[0], (1u << 0) | (1u << 4));
  EXPECT_EQ(bits[1], 0u);
  EXPECT_NE(engine->Received(7), nullptr);
  EXPECT_EQ(engine->Received(2), nullptr) << "no result of the lowest unacknowledged";

  // A one-word span names only what fits.
  std::array<uint32_t, 1> narrow{};
  engine->OnParameterPacket(AckFor(15), kT0);
  EXPECT_EQ(engine->ResultsAfterLowest(narrow), 16u);
  EXPECT_EQ(narrow[0], (1u << 0) | (1u << 4) | (1u << 12));
}

}  // namespace
}  // namespace atp::worker
