// The per-segment rule of a segmentation job: seq and aggregator change,
// nothing else does.
#include <array>
#include <cstring>
#include <vector>

#include "atp/transport/segmentation.h"
#include "gtest/gtest.h"
#include "tests/transport/transport_test_util.h"

namespace atp::transport {
namespace {

using testing::FrameBytes;
using testing::FrameSpec;
using testing::MakeFrame;

DeviceAddress Src() { return {wire::Ipv4Address{0x0A000001}, DefaultMacFor(wire::Ipv4Address{0x0A000001})}; }
DeviceAddress Dst() { return {wire::Ipv4Address{0x0A000002}, DefaultMacFor(wire::Ipv4Address{0x0A000002})}; }

TEST(SegmentSeq, AddsToThePositionAndKeepsTheQueue) {
  EXPECT_EQ(SegmentSeq(wire::MakeSeq(3, 10), 0), wire::MakeSeq(3, 10));
  EXPECT_EQ(SegmentSeq(wire::MakeSeq(3, 10), 5), wire::MakeSeq(3, 15));
  EXPECT_EQ(SegmentSeq(wire::MakeSeq(15, wire::kPositionMask), 1), wire::MakeSeq(15, 0))
      << "the position wraps at 2^20 inside its queue";
  EXPECT_EQ(SegmentSeq(wire::MakeSeq(7, wire::kPositionMask - 1), 3), wire::MakeSeq(7, 1));
}

TEST(SegmentationJob, EverySegmentIsTheTemplateWithItsSeqAggregatorAndPayload) {
  const uint32_t seq0 = wire::MakeSeq(1, wire::kPositionMask - 1);
  const FrameBytes first = MakeFrame(Src(), Dst(), FrameSpec{seq0, 0, 500});
  std::vector<std::array<uint8_t, wire::kPayloadBytes>> payloads(4);
  std::vector<const uint8_t*> pointers;
  for (size_t i = 0; i < payloads.size(); ++i) {
    wire::EncodePayload(testing::MakePayload(static_cast<uint32_t>(i + 1)), payloads[i]);
    pointers.push_back(payloads[i].data());
  }
  const uint16_t aggregators[4] = {500, 9, 65535, 0};
  const SegmentationJob job = SegmentationJob::FromFrame(first, pointers, aggregators);
  ASSERT_TRUE(IsValidSegmentationJob(job, wire::kDefaultBasePort));
  for (size_t i = 0; i < 4; ++i) {
    FrameBytes frame{};
    WriteSegmentFrame(job, i, frame);
    const FrameSpec want{SegmentSeq(seq0, i), static_cast<uint32_t>(i + 1), aggregators[i]};
    EXPECT_EQ(frame, MakeFrame(Src(), Dst(), want)) << "segment " << i;
    std::array<uint8_t, wire::kMessageBytes> message{};
    WriteSegmentMessage(job, i, message);
    EXPECT_EQ(std::memcmp(message.data(), frame.data() + wire::kAtpOffset, message.size()), 0);
  }
}

TEST(SegmentationJob, WithoutIndicesEverySegmentKeepsTheTemplateIndex) {
  const FrameBytes first = MakeFrame(Src(), Dst(), FrameSpec{wire::MakeSeq(0, 7), 0, 1234});
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  const uint8_t* pointers[3] = {payload.data(), payload.data(), payload.data()};
  const SegmentationJob job = SegmentationJob::FromFrame(first, pointers);
  for (size_t i = 0; i < 3; ++i) {
    FrameBytes frame{};
    WriteSegmentFrame(job, i, frame);
    wire::FrameFields fields;
    ASSERT_EQ(wire::DecodeFrame(frame, wire::kDefaultBasePort, &fields, nullptr),
              wire::DecodeError::kOk);
    EXPECT_EQ(fields.header.aggregator, 1234);
    EXPECT_EQ(fields.header.seq, wire::MakeSeq(0, 7 + static_cast<uint32_t>(i)));
  }
}

TEST(SegmentationJob, AdvanceLeavesTheSameJobFromSegmentN) {
  const uint32_t seq0 = wire::MakeSeq(2, 100);
  const FrameBytes first = MakeFrame(Src(), Dst(), FrameSpec{seq0, 0, 10});
  std::vector<std::array<uint8_t, wire::kPayloadBytes>> payloads(5);
  std::vector<const uint8_t*> pointers;
  for (size_t i = 0; i < 5; ++i) {
    payloads[i].fill(static_cast<uint8_t>(i));
    pointers.push_back(payloads[i].data());
  }
  const uint16_t aggregators[5] = {10, 11, 12, 13, 14};
  const SegmentationJob whole = SegmentationJob::FromFrame(first, pointers, aggregators);
  SegmentationJob rest = whole;
  rest.Advance(2);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest.seq(), wire::MakeSeq(2, 102));
  for (size_t i = 0; i < 3; ++i) {
    FrameBytes from_whole{};
    FrameBytes from_rest{};
    WriteSegmentFrame(whole, i + 2, from_whole);
    WriteSegmentFrame(rest, i, from_rest);
    EXPECT_EQ(from_rest, from_whole) << "segment " << i + 2;
  }
  // The template of the advanced job is segment 2's header.
  FrameBytes segment2{};
  WriteSegmentFrame(whole, 2, segment2);
  EXPECT_EQ(std::memcmp(rest.header.data(), segment2.data(), kSegmentTemplateBytes), 0);
  rest.Advance(3);
  EXPECT_TRUE(rest.empty());
}

TEST(SegmentationJob, MessagesFormGetsItsHeadersWrittenInPlace) {
  const uint32_t seq0 = wire::MakeSeq(4, 10);
  const FrameBytes first = MakeFrame(Src(), Dst(), FrameSpec{seq0, 0, 50});
  std::vector<uint8_t> messages(3 * wire::kMessageBytes, 0xAB);
  const uint16_t aggregators[3] = {50, 51, 52};
  SegmentationJob job = SegmentationJob::FromMessages(first, messages, aggregators);
  ASSERT_EQ(job.size(), 3u);
  ASSERT_TRUE(IsValidSegmentationJob(job, wire::kDefaultBasePort));
  EXPECT_EQ(job.payload(1), messages.data() + wire::kMessageBytes + wire::kAtpHeaderBytes);
  // The copying writer and the in-place one agree.
  std::vector<uint8_t> copied(3 * wire::kMessageBytes);
  WriteSegmentMessages(job, 0, 3, copied.data());
  uint8_t* in_place = WriteSegmentHeadersInPlace(job, 0, 3);
  EXPECT_EQ(in_place, messages.data());
  EXPECT_EQ(messages, copied);
  FrameBytes frame{};
  WriteSegmentFrame(job, 2, frame);
  EXPECT_EQ(wire::ValidateFrame(frame, wire::kDefaultBasePort), wire::DecodeError::kOk);
  job.Advance(2);
  ASSERT_EQ(job.size(), 1u);
  EXPECT_EQ(job.messages.data(), messages.data() + 2 * wire::kMessageBytes);
  EXPECT_EQ(job.seq(), wire::MakeSeq(4, 12));
}

TEST(SegmentationJob, ValidityIsDecidedByTheTemplateAndTheIndexCount) {
  std::array<uint8_t, wire::kPayloadBytes> payload{};
  const uint8_t* pointers[2] = {payload.data(), payload.data()};
  FrameBytes first = MakeFrame(Src(), Dst(), FrameSpec{wire::MakeSeq(0, 1)});
  EXPECT_TRUE(IsValidSegmentationJob(SegmentationJob::FromFrame(first, pointers),
                                     wire::kDefaultBasePort));
  EXPECT_FALSE(IsValidSegmentationJob(SegmentationJob::FromFrame(first, pointers),
                                      wire::kDefaultBasePort + 1))
      << "ports outside the receiver's range";
  const uint16_t one_index[1] = {4};
  EXPECT_FALSE(IsValidSegmentationJob(SegmentationJob::FromFrame(first, pointers, one_index),
                                      wire::kDefaultBasePort));
  const uint8_t* with_null[2] = {payload.data(), nullptr};
  EXPECT_FALSE(IsValidSegmentationJob(SegmentationJob::FromFrame(first, with_null),
                                      wire::kDefaultBasePort));
  std::vector<uint8_t> messages(2 * wire::kMessageBytes);
  SegmentationJob both = SegmentationJob::FromFrame(first, pointers);
  both.messages = messages;
  EXPECT_FALSE(IsValidSegmentationJob(both, wire::kDefaultBasePort)) << "one payload form only";
  std::vector<uint8_t> ragged(wire::kMessageBytes + 1);
  EXPECT_FALSE(IsValidSegmentationJob(SegmentationJob::FromMessages(first, ragged),
                                      wire::kDefaultBasePort))
      << "whole messages only";
  first[wire::kIpv4Offset + 10] ^= 0xFF;  // IPv4 checksum
  EXPECT_FALSE(IsValidSegmentationJob(SegmentationJob::FromFrame(first, pointers),
                                      wire::kDefaultBasePort));
}

}  // namespace
}  // namespace atp::transport
