// tests/transport/mlx5/tx_request_test.cc: the layout of send work requests:
// a frame's gather entry or inline copy, and a segmentation job's TSO request
// (inline header, mss, one gather entry over the staged messages) which, cut
// by the NIC, gives byte for byte the job's k frames.
#include "transport/mlx5/tx_request.h"

#include <array>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/transport/mlx5/mlx5_test_util.h"

namespace atp::transport::mlx5 {
namespace {

using testing::Frame;
using testing::FrameBytes;

const uint8_t* At(uint64_t addr) { return reinterpret_cast<const uint8_t*>(addr); }

// Segment: what the NIC sends for segment i of a TSO request: the inline
// header, then the i-th mss bytes of the gather entry.
std::vector<uint8_t> Segment(const TxRequest& r, size_t i) {
  std::vector<uint8_t> frame(r.tso_header, r.tso_header + r.tso_header_bytes);
  const uint8_t* data = At(r.sge.addr) + i * r.mss;
  frame.insert(frame.end(), data, data + r.mss);
  return frame;
}

std::vector<uint8_t> JobFrame(const SegmentationJob& job, size_t i) {
  std::vector<uint8_t> frame(wire::kFrameBytes);
  WriteSegmentFrame(job, i, std::span<uint8_t, wire::kFrameBytes>(frame.data(), wire::kFrameBytes));
  return frame;
}

class JobFixture : public ::testing::Test {
 protected:
  JobFixture() {
    for (size_t i = 0; i < payloads_.size(); ++i) {
      for (size_t b = 0; b < wire::kPayloadBytes; ++b) {
        payloads_[i][b] = static_cast<uint8_t>(i * 31 + b);
      }
      pointers_[i] = payloads_[i].data();
      aggregators_[i] = static_cast<uint16_t>(100 + i * 7);
    }
    first_ = Frame(2, (1u << 20) - 3);  // positions wrap at 2^20 inside the job
  }

  SegmentationJob Job(size_t k, bool per_segment_aggregators) const {
    return SegmentationJob::FromFrame(first_, {pointers_.data(), k},
                                      per_segment_aggregators
                                          ? std::span<const uint16_t>(aggregators_.data(), k)
                                          : std::span<const uint16_t>());
  }

  std::array<std::array<uint8_t, wire::kPayloadBytes>, 70> payloads_{};
  std::array<const uint8_t*, 70> pointers_{};
  std::array<uint16_t, 70> aggregators_{};
  FrameBytes first_{};
};

TEST(BuildFrameRequest, AFrameInRegisteredMemoryIsOneGatherEntry) {
  alignas(64) uint8_t buffer[512] = {};
  const FrameRef frame{buffer + 70, nullptr, 5, 306};
  const TxRequest r = BuildFrameRequest(frame, 0xBEEF, 0);
  EXPECT_EQ(r.opcode, TxOpcode::kSend);
  EXPECT_EQ(At(r.sge.addr), buffer + 70);
  EXPECT_EQ(r.sge.length, 306u);
  EXPECT_EQ(r.sge.lkey, 0xBEEFu);
  EXPECT_EQ(r.record.frames, 1u);
  EXPECT_EQ(r.record.frame.data, frame.data) << "held until the NIC completes it";
  EXPECT_EQ(r.record.slot, kNoSlot);
  EXPECT_EQ(r.release_at_post.pool, nullptr);
}

TEST(BuildFrameRequest, ASmallEnoughFrameGoesInlineAndBackAtPost) {
  auto pool = *HeapFramePool::Create({});
  FrameRef frame;
  ASSERT_TRUE(pool->Alloc(&frame));
  frame.length = 306;
  TxRequest r = BuildFrameRequest(frame, 0xBEEF, 306);
  EXPECT_EQ(r.opcode, TxOpcode::kSendInline);
  EXPECT_EQ(At(r.sge.addr), frame.data);
  EXPECT_EQ(r.sge.length, 306u);
  EXPECT_EQ(r.record.frame.pool, nullptr) << "the request holds no buffer";
  EXPECT_EQ(r.record.frames, 1u);
  EXPECT_EQ(r.release_at_post.data, frame.data);
  r = BuildFrameRequest(frame, 0xBEEF, 305);
  EXPECT_EQ(r.opcode, TxOpcode::kSend) << "306 bytes do not fit a 305-byte inline limit";
  pool->Free(frame);
}

TEST_F(JobFixture, ATsoRequestCarriesTheWholeJobAndTheNicCutsItIntoTheJobsFrames) {
  const SegmentationJob job = Job(10, true);
  std::vector<uint8_t> slot(TsoSlotBytes(10));
  const TxRequest r = BuildTsoRequest(job, 0, 10, slot, 4, 0x77);
  EXPECT_EQ(r.opcode, TxOpcode::kTso);
  EXPECT_EQ(r.tso_header, slot.data());
  EXPECT_EQ(r.tso_header_bytes, 42);
  EXPECT_EQ(r.mss, 264);
  EXPECT_EQ(At(r.sge.addr), slot.data() + 42);
  EXPECT_EQ(r.sge.length, 10u * 264);
  EXPECT_EQ(r.sge.lkey, 0x77u);
  EXPECT_EQ(r.record.frames, 10u);
  EXPECT_EQ(r.record.slot, 4u);
  EXPECT_EQ(r.record.frame.pool, nullptr);
  EXPECT_EQ(std::memcmp(r.tso_header, first_.data(), 42), 0)
      << "Ethernet, IPv4, UDP of the template";
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(Segment(r, i), JobFrame(job, i)) << "segment " << i;
  }
}

TEST_F(JobFixture, ARequestMayStartInsideTheJob) {
  const SegmentationJob job = Job(70, false);
  std::vector<uint8_t> slot(TsoSlotBytes(64));
  const TxRequest r = BuildTsoRequest(job, 64, 6, slot, 0, 1);
  EXPECT_EQ(r.sge.length, 6u * 264);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(Segment(r, i), JobFrame(job, 64 + i)) << i;
}

TEST_F(JobFixture, OneSegmentIsAPlainSendOfTheWholeFrame) {
  const SegmentationJob job = Job(3, true);
  std::vector<uint8_t> slot(TsoSlotBytes(1));
  const TxRequest r = BuildTsoRequest(job, 2, 1, slot, 9, 0x77);
  EXPECT_EQ(r.opcode, TxOpcode::kSend);
  EXPECT_EQ(At(r.sge.addr), slot.data());
  EXPECT_EQ(r.sge.length, 306u);
  EXPECT_EQ(r.record.frames, 1u);
  EXPECT_EQ(r.record.slot, 9u);
  EXPECT_EQ(std::vector<uint8_t>(slot.begin(), slot.begin() + 306), JobFrame(job, 2));
}

TEST(TsoSlotBytes, IsTheHeaderPlusTheMessages) {
  EXPECT_EQ(TsoSlotBytes(1), wire::kFrameBytes);
  EXPECT_EQ(TsoSlotBytes(64), 42u + 64 * 264);
}

TEST(LkeyTable, FindsTheRegionHoldingAWholeFrame) {
  std::vector<uint8_t> a(4096);
  std::vector<uint8_t> b(4096);
  LkeyTable table;
  table.Add(a.data(), a.size(), 11);
  table.Add(b.data(), b.size(), 22);
  EXPECT_EQ(table.Find(a.data(), 306), 11u);
  EXPECT_EQ(table.Find(b.data() + 4096 - 306, 306), 22u) << "ends exactly at the region's end";
  EXPECT_EQ(table.Find(b.data() + 4096 - 305, 306), std::nullopt) << "runs past the end";
  std::vector<uint8_t> elsewhere(512);
  EXPECT_EQ(table.Find(elsewhere.data(), 306), std::nullopt);
  EXPECT_EQ(table.size(), 2u);
}

}  // namespace
}  // namespace atp::transport::mlx5
