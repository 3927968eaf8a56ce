// The engine's wire forms (CollectSends into headers and network-order
// payloads, OnParameterPacket from a frame's header and payload bytes) behave exactly as
// its host-order forms: two engines with the same configuration and input,
// one driven each way, send the same headers and bytes and produce the same
// results, fp fragments and resends included.
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/worker/worker_queue_engine.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using testing::Completions;
using testing::EchoAck;
using testing::kT0;
using testing::MakeEngine;
using testing::Ms;
using testing::SmallConfig;

using PayloadBytes = std::array<uint8_t, wire::kPayloadBytes>;

// WireSend: the wire form of testing::Send; payload i in bytes[i].
size_t WireSend(WorkerQueueEngine& engine, TimePoint now, std::vector<wire::AtpHeader>& headers,
                std::vector<PayloadBytes>& bytes) {
  std::vector<uint8_t*> payloads(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) payloads[i] = bytes[i].data();
  return engine.CollectSends(now, headers, payloads);
}

TEST(WorkerQueueEngineWireTest, WireFormsMatchTheHostForms) {
  const WorkerQueueConfig config = SmallConfig(/*slots=*/16, /*initial_window=*/8);
  auto host = MakeEngine(config);
  auto wire_engine = MakeEngine(config);
  ASSERT_NE(host, nullptr);
  ASSERT_NE(wire_engine, nullptr);
  std::vector<float> in = testing::Ramp(62 * 12 + 9, 0.003f, -1.0f);
  in[62 * 2 + 5] = std::numeric_limits<float>::infinity();  // fragment 2 goes as fp
  std::vector<float> host_out(in.size(), -7.0f);
  std::vector<float> wire_out(in.size(), -7.0f);
  ASSERT_TRUE(host->Enqueue(in, host_out).ok());
  ASSERT_TRUE(wire_engine->Enqueue(in, wire_out).ok());

  TimePoint now = kT0;
  size_t rounds = 0;
  bool dropped_one = false;
  while (Completions(*host).empty() && rounds++ < 100) {
    const std::vector<wire::AtpMessage> sent = testing::Send(*host, now, 5);
    std::vector<wire::AtpHeader> headers(5);
    std::vector<PayloadBytes> bytes(5);
    const size_t n = WireSend(*wire_engine, now, headers, bytes);
    ASSERT_EQ(n, sent.size());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(headers[i], sent[i].header) << "round " << rounds << " i " << i;
      PayloadBytes expected;
      wire::EncodePayload(sent[i].payload, expected);
      EXPECT_EQ(bytes[i], expected) << "round " << rounds << " i " << i;
    }
    for (size_t i = 0; i < n; ++i) {
      // Lose position 4's first send once: the timeout resend must match too.
      if (!dropped_one && sent[i].header.position() == 4) {
        dropped_one = true;
        continue;
      }
      const wire::AtpMessage ack = EchoAck(sent[i]);
      std::array<uint8_t, wire::kMessageBytes> ack_bytes;
      wire::EncodeMessage(ack, ack_bytes);
      host->OnParameterPacket(ack, now);
      wire_engine->OnParameterPacket(ack.header, ack_bytes, now);
    }
    now += n == 0 ? Ms(20) : Ms(1);
  }
  ASSERT_TRUE(dropped_one);
  EXPECT_EQ(Completions(*wire_engine).size(), 1u);
  EXPECT_EQ(wire_out, host_out);
  EXPECT_EQ(wire_engine->stats().fp_fragments_sent, 1u);
  EXPECT_GE(wire_engine->stats().resends_timeout, 1u);
  EXPECT_EQ(wire_engine->stats().resends_timeout, host->stats().resends_timeout);
}

}  // namespace
}  // namespace atp::worker
