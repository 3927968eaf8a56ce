// tests/transport/mlx5/cqe_test.cc: reading CQEs (striding fields, classes,
// ownership across passes of the ring) and writing striding entries and
// doorbells, over synthetic buffers.
#include "transport/mlx5/cqe.h"

#include <endian.h>
#include <infiniband/mlx5dv.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace atp::transport::mlx5 {
namespace {

// SyntheticCqe: a 64-byte CQE as a ConnectX writes it.
struct SyntheticCqe {
  uint8_t opcode = kCqeOpResponderSend;
  uint8_t owner = 0;
  uint8_t format = 0;
  uint32_t byte_cnt = 0;
  uint16_t wqe_id = 0;
  uint16_t wqe_counter = 0;
};

void Write(const SyntheticCqe& c, uint8_t* out) {
  mlx5_cqe64 cqe;
  std::memset(&cqe, 0, sizeof(cqe));
  cqe.wqe_id = htobe16(c.wqe_id);
  cqe.byte_cnt = htobe32(c.byte_cnt);
  cqe.wqe_counter = htobe16(c.wqe_counter);
  cqe.op_own = static_cast<uint8_t>((c.opcode << 4) | (c.format << 2) | c.owner);
  std::memcpy(out, &cqe, sizeof(cqe));
}

uint32_t Strided(uint32_t strides, uint32_t bytes) { return (strides << 16) | bytes; }

TEST(ParseStridedCqe, ReadsByteCountStridesStrideIndexAndEntry) {
  uint8_t cqe[64];
  Write({kCqeOpResponderSend, 0, 0, Strided(5, 306), 3, 10}, cqe);
  const StridedCompletion c = ParseStridedCqe(cqe);
  EXPECT_EQ(c, (StridedCompletion{3, 10, 5, 306, false}));
}

TEST(ParseStridedCqe, FillerConsumesStridesAndCarriesNoPacket) {
  uint8_t cqe[64];
  Write({kCqeOpResponderSend, 0, 0, kStridedFillerBit | Strided(7, 0x1234), 9, 505}, cqe);
  const StridedCompletion c = ParseStridedCqe(cqe);
  EXPECT_TRUE(c.filler);
  EXPECT_EQ(c.strides, 7);
  EXPECT_EQ(c.bytes, 0) << "a filler has no packet bytes, whatever the low bits say";
  EXPECT_EQ(c.wqe_id, 9);
  EXPECT_EQ(c.stride_index, 505);
}

TEST(ParseStridedCqe, UsesAllFifteenStrideCountBitsAndSixteenByteBits) {
  uint8_t cqe[64];
  Write({kCqeOpResponderSend, 0, 0, Strided(0x7FFF, 0xFFFF), 0xFFFF, 0xFFFF}, cqe);
  const StridedCompletion c = ParseStridedCqe(cqe);
  EXPECT_FALSE(c.filler);
  EXPECT_EQ(c.strides, 0x7FFF);
  EXPECT_EQ(c.bytes, 0xFFFF);
  EXPECT_EQ(c.wqe_id, 0xFFFF);
}

TEST(ClassifyCqe, SortsReceiveSendErrorsAndCompressedBlocks) {
  uint8_t cqe[64];
  Write({kCqeOpResponderSend}, cqe);
  EXPECT_EQ(ClassifyCqe(cqe), CqeClass::kReceive);
  Write({kCqeOpRequester}, cqe);
  EXPECT_EQ(ClassifyCqe(cqe), CqeClass::kSend);
  Write({kCqeOpRequesterError}, cqe);
  EXPECT_EQ(ClassifyCqe(cqe), CqeClass::kSendError);
  Write({kCqeOpResponderError}, cqe);
  EXPECT_EQ(ClassifyCqe(cqe), CqeClass::kReceiveError);
  cqe[kCqeSyndromeOffset] = 0x04;
  EXPECT_EQ(CqeSyndrome(cqe), 0x04);
  Write({MLX5_CQE_RESIZE_CQ}, cqe);
  EXPECT_EQ(ClassifyCqe(cqe), CqeClass::kOther);
  Write({kCqeOpResponderSend, 0, 3}, cqe);
  EXPECT_EQ(ClassifyCqe(cqe), CqeClass::kCompressed);
}

// A ring as the provider leaves it: every entry invalid, owner 0.
std::vector<uint8_t> NewRing(uint32_t entries, uint32_t entry_bytes) {
  std::vector<uint8_t> ring(size_t{entries} * entry_bytes, 0);
  for (uint32_t i = 0; i < entries; ++i) ring[(i + 1) * entry_bytes - 1] = kCqeOpInvalid << 4;
  return ring;
}

TEST(CqCursor, SeesNothingInANewRing) {
  std::vector<uint8_t> ring = NewRing(4, 64);
  CqCursor cursor(ring.data(), 4, 64);
  EXPECT_EQ(cursor.Peek(), nullptr);
}

TEST(CqCursor, ReadsEntriesInOrderAsTheNicWritesThem) {
  std::vector<uint8_t> ring = NewRing(4, 64);
  CqCursor cursor(ring.data(), 4, 64);
  Write({kCqeOpResponderSend, 0, 0, Strided(5, 306), 0, 0}, &ring[0]);
  Write({kCqeOpResponderSend, 0, 0, Strided(5, 306), 0, 5}, &ring[64]);
  ASSERT_NE(cursor.Peek(), nullptr);
  EXPECT_EQ(ParseStridedCqe(cursor.Peek()).stride_index, 0);
  cursor.Pop();
  ASSERT_NE(cursor.Peek(), nullptr);
  EXPECT_EQ(ParseStridedCqe(cursor.Peek()).stride_index, 5);
  cursor.Pop();
  EXPECT_EQ(cursor.Peek(), nullptr) << "entry 2 not written yet";
  EXPECT_EQ(cursor.consumer_index(), 2u);
}

TEST(CqCursor, OwnerBitFlipsOnEachPassAroundTheRing) {
  std::vector<uint8_t> ring = NewRing(4, 64);
  CqCursor cursor(ring.data(), 4, 64);
  for (uint16_t i = 0; i < 4; ++i)
    Write({kCqeOpResponderSend, 0, 0, Strided(1, 64), 0, i}, &ring[i * 64]);
  for (int i = 0; i < 4; ++i) {
    ASSERT_NE(cursor.Peek(), nullptr);
    cursor.Pop();
  }
  // Second pass: the old entries (owner 0) are stale until rewritten with owner 1.
  EXPECT_EQ(cursor.Peek(), nullptr) << "a stale entry from the first pass is not new";
  Write({kCqeOpResponderSend, 1, 0, Strided(1, 64), 1, 42}, &ring[0]);
  ASSERT_NE(cursor.Peek(), nullptr);
  EXPECT_EQ(ParseStridedCqe(cursor.Peek()).stride_index, 42);
  cursor.Pop();
  EXPECT_EQ(cursor.Peek(), nullptr);
  EXPECT_EQ(cursor.consumer_index(), 5u);
  // Third pass expects owner 0 again.
  for (uint16_t i = 1; i < 4; ++i)
    Write({kCqeOpResponderSend, 1, 0, Strided(1, 64), 1, i}, &ring[i * 64]);
  for (int i = 0; i < 3; ++i) {
    ASSERT_NE(cursor.Peek(), nullptr);
    cursor.Pop();
  }
  EXPECT_EQ(cursor.Peek(), nullptr);
  Write({kCqeOpResponderSend, 0, 0, Strided(1, 64), 2, 7}, &ring[0]);
  ASSERT_NE(cursor.Peek(), nullptr);
  EXPECT_EQ(ParseStridedCqe(cursor.Peek()).wqe_id, 2);
}

TEST(CqCursor, ReadsTheLastSixtyFourBytesOfA128ByteEntry) {
  std::vector<uint8_t> ring = NewRing(2, 128);
  CqCursor cursor(ring.data(), 2, 128);
  Write({kCqeOpResponderSend, 0, 0, Strided(5, 306), 0, 0}, &ring[64]);
  ASSERT_NE(cursor.Peek(), nullptr);
  EXPECT_EQ(cursor.Peek(), &ring[64]);
  cursor.Pop();
  Write({kCqeOpResponderSend, 0, 0, Strided(5, 306), 0, 5}, &ring[128 + 64]);
  ASSERT_NE(cursor.Peek(), nullptr);
  EXPECT_EQ(ParseStridedCqe(cursor.Peek()).stride_index, 5);
}

TEST(Doorbells, AreBigEndianWithTheirCounterWidths) {
  uint8_t bytes[4];
  const uint32_t cq = CqDoorbellValue(0x01234567);
  std::memcpy(bytes, &cq, 4);
  EXPECT_EQ(bytes[0], 0x00) << "24-bit consumer index";
  EXPECT_EQ(bytes[1], 0x23);
  EXPECT_EQ(bytes[2], 0x45);
  EXPECT_EQ(bytes[3], 0x67);
  const uint32_t rq = RqDoorbellValue(0x12345);
  std::memcpy(bytes, &rq, 4);
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[1], 0x00) << "16-bit producer counter";
  EXPECT_EQ(bytes[2], 0x23);
  EXPECT_EQ(bytes[3], 0x45);
}

TEST(WriteMprqWqe, FillsTheDataSegmentOfAnMlx5MprqWqe) {
  uint8_t bytes[kMprqWqeBytes];
  std::memset(bytes, 0xAB, sizeof(bytes));
  WriteMprqWqe(bytes, 0x0000123456789ABCull, 32768, 0x1F2E3D4C);
  mlx5_mprq_wqe wqe;
  std::memcpy(&wqe, bytes, sizeof(wqe));
  EXPECT_EQ(be32toh(wqe.dseg.byte_count), 32768u);
  EXPECT_EQ(be32toh(wqe.dseg.lkey), 0x1F2E3D4Cu);
  EXPECT_EQ(be64toh(wqe.dseg.addr), 0x0000123456789ABCull);
  const uint8_t zeros[16] = {};
  EXPECT_EQ(std::memcmp(bytes, zeros, 16), 0) << "the next segment is cleared";
}

}  // namespace
}  // namespace atp::transport::mlx5
