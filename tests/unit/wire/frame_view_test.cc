// FrameView: in-place reads and rewrites of an accepted frame's ATP fields,
// and the incremental checksum update of MarkCongestionExperienced.
#include <array>
#include <cstdint>

#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/wire/frame_view.h"
#include "tests/unit/wire/wire_test_util.h"

namespace atp::wire {
namespace {

using testing::Frame;

AtpHeader DecodedHeader(const Frame& frame) {
  FrameFields fields;
  const DecodeError error = DecodeFrame(frame, kDefaultBasePort, &fields, nullptr);
  EXPECT_EQ(error, DecodeError::kOk) << DecodeErrorName(error);
  return fields.header;
}

TEST(WireFrameView, AccessorsReadWhatDecodeFrameReads) {
  testing::Rng rng(0xF7A3E);
  for (int i = 0; i < 2000; ++i) {
    const FrameFields fields = testing::RandomFields(rng);
    Frame frame = testing::Encode(fields, testing::RandomPayload(rng));
    const FrameView view(frame.data());
    const AtpHeader& h = fields.header;
    ASSERT_EQ(view.job(), h.job);
    ASSERT_EQ(view.seq(), h.seq);
    ASSERT_EQ(view.bitmap0(), h.bitmap0);
    ASSERT_EQ(view.bitmap1(), h.bitmap1);
    ASSERT_EQ(view.fan_in0(), h.fan_in0);
    ASSERT_EQ(view.fan_in1(), h.fan_in1);
    ASSERT_EQ(view.flag(FrameView::kEdge), h.edge);
    ASSERT_EQ(view.flag(FrameView::kResend), h.resend);
    ASSERT_EQ(view.flag(FrameView::kCollision), h.collision);
    ASSERT_EQ(view.flag(FrameView::kEcn), h.ecn);
    ASSERT_EQ(view.flag(FrameView::kAck), h.ack);
    ASSERT_EQ(view.flag(FrameView::kFp), h.fp);
    ASSERT_EQ(view.aggregator(), h.aggregator);
    ASSERT_EQ(view.ip_tos(), fields.ip_tos);
    ASSERT_EQ(view.payload(), frame.data() + kPayloadOffset);
  }
}

TEST(WireFrameView, SettersChangeOnlyTheirField) {
  Frame frame = testing::Encode(testing::SampleFields(), testing::SamplePayload());
  FrameView view(frame.data());
  AtpHeader want = testing::SampleFields().header;
  view.set_bitmap0(0x3);
  want.bitmap0 = 0x3;
  EXPECT_EQ(DecodedHeader(frame), want);
  view.set_flag(FrameView::kEdge, true);
  view.set_bitmap1(0x3);
  want.edge = true;
  want.bitmap1 = 0x3;
  EXPECT_EQ(DecodedHeader(frame), want);
  view.set_aggregator(0xFFFF);
  want.aggregator = 0xFFFF;
  EXPECT_EQ(DecodedHeader(frame), want);
  view.set_bitmap1(0x2);  // one rack, so that edge may also be cleared
  want.bitmap1 = 0x2;
  struct Case {
    FrameView::Flag flag;
    bool AtpHeader::*field;
  };
  for (const Case& c : {Case{FrameView::kResend, &AtpHeader::resend},
                        Case{FrameView::kCollision, &AtpHeader::collision},
                        Case{FrameView::kEcn, &AtpHeader::ecn}, Case{FrameView::kFp, &AtpHeader::fp},
                        Case{FrameView::kEdge, &AtpHeader::edge}}) {
    for (bool on : {true, false, true}) {
      view.set_flag(c.flag, on);
      want.*c.field = on;
      EXPECT_EQ(DecodedHeader(frame), want);
      EXPECT_EQ(view.flag(c.flag), on);
    }
  }
  EXPECT_EQ(view.fan_in0(), 4) << "flags leave the fan-ins alone";
  EXPECT_EQ(view.fan_in1(), 2);
  Payload payload;
  ASSERT_EQ(DecodeFrame(frame, kDefaultBasePort, nullptr, &payload), DecodeError::kOk);
  EXPECT_EQ(payload, testing::SamplePayload()) << "header edits leave the data alone";
}

TEST(WireFrameView, MarkCongestionExperiencedKeepsTheChecksumValid) {
  testing::Rng rng(0xCE);
  for (int i = 0; i < 5000; ++i) {
    FrameFields fields = testing::RandomFields(rng);
    fields.ip_tos = kTosEct0;
    Frame frame = testing::Encode(fields, {});
    FrameView view(frame.data());
    view.MarkCongestionExperienced();
    ASSERT_EQ(view.ip_tos(), kTosCe);
    FrameFields decoded;
    ASSERT_EQ(DecodeFrame(frame, kDefaultBasePort, &decoded, nullptr), DecodeError::kOk);
    ASSERT_EQ(decoded.ip_tos, kTosCe);
    // The incremental update equals a full recomputation (RFC 1624).
    fields.ip_tos = kTosCe;
    ASSERT_EQ(frame, testing::Encode(fields, {}));
  }
}

TEST(WireFrameView, MarkCongestionExperiencedIsIdempotent) {
  FrameFields fields = testing::SampleFields();
  fields.ip_tos = kTosCe;
  const Frame marked = testing::Encode(fields, {});
  Frame frame = marked;
  FrameView(frame.data()).MarkCongestionExperienced();
  EXPECT_EQ(frame, marked);
}

}  // namespace
}  // namespace atp::wire
