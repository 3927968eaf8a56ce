// transport/mlx5/cqe.cc: CQE decoding and striding entry writing, checked
// against rdma-core's structs.
#include "transport/mlx5/cqe.h"

#include <infiniband/mlx5dv.h>

#include <cstddef>
#include <cstring>

namespace atp::transport::mlx5 {

static_assert(sizeof(mlx5_cqe64) == kCqeBytes);
static_assert(offsetof(mlx5_cqe64, byte_cnt) == kCqeByteCountOffset);
static_assert(offsetof(mlx5_cqe64, wqe_counter) == kCqeWqeCounterOffset);
static_assert(offsetof(mlx5_cqe64, op_own) == kCqeOpOwnOffset);
static_assert(offsetof(mlx5_err_cqe, syndrome) == kCqeSyndromeOffset);
static_assert(sizeof(mlx5_mprq_wqe) == kMprqWqeBytes);
static_assert(offsetof(mlx5_mprq_wqe, dseg) == 16);
static_assert(MLX5_CQE_REQ == kCqeOpRequester && MLX5_CQE_RESP_SEND == kCqeOpResponderSend &&
              MLX5_CQE_REQ_ERR == kCqeOpRequesterError &&
              MLX5_CQE_RESP_ERR == kCqeOpResponderError && MLX5_CQE_INVALID == kCqeOpInvalid);

namespace {

uint16_t LoadBig16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint32_t LoadBig32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
void StoreBig32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
void StoreBig64(uint8_t* p, uint64_t v) {
  StoreBig32(p, static_cast<uint32_t>(v >> 32));
  StoreBig32(p + 4, static_cast<uint32_t>(v));
}
// Big-endian bytes as the native value a doorbell word holds.
uint32_t BigEndianWord(uint32_t v) {
  uint8_t bytes[4];
  StoreBig32(bytes, v);
  uint32_t word;
  std::memcpy(&word, bytes, sizeof(word));
  return word;
}

}  // namespace

CqeClass ClassifyCqe(const uint8_t* cqe) {
  const uint8_t op_own = cqe[kCqeOpOwnOffset];
  if (((op_own >> 2) & 0x3) != 0) return CqeClass::kCompressed;
  switch (op_own >> 4) {
    case MLX5_CQE_REQ:
      return CqeClass::kSend;
    case MLX5_CQE_RESP_WR_IMM:
    case MLX5_CQE_RESP_SEND:
    case MLX5_CQE_RESP_SEND_IMM:
    case MLX5_CQE_RESP_SEND_INV:
      return CqeClass::kReceive;
    case MLX5_CQE_REQ_ERR:
      return CqeClass::kSendError;
    case MLX5_CQE_RESP_ERR:
      return CqeClass::kReceiveError;
    default:
      return CqeClass::kOther;
  }
}

uint8_t CqeSyndrome(const uint8_t* cqe) { return cqe[kCqeSyndromeOffset]; }

StridedCompletion ParseStridedCqe(const uint8_t* cqe) {
  const uint32_t byte_cnt = LoadBig32(cqe + kCqeByteCountOffset);
  StridedCompletion c;
  c.wqe_id = LoadBig16(cqe + kCqeWqeIdOffset);
  c.stride_index = LoadBig16(cqe + kCqeWqeCounterOffset);
  c.strides = static_cast<uint16_t>((byte_cnt >> kStridedStridesShift) & kStridedStridesMask);
  c.filler = (byte_cnt & kStridedFillerBit) != 0;
  c.bytes = c.filler ? 0 : static_cast<uint16_t>(byte_cnt & kStridedBytesMask);
  return c;
}

uint32_t CqDoorbellValue(uint32_t consumer_index) {
  return BigEndianWord(consumer_index & 0xFFFFFF);
}

uint32_t RqDoorbellValue(uint32_t producer_counter) {
  return BigEndianWord(producer_counter & 0xFFFF);
}

void WriteMprqWqe(uint8_t* wqe, uint64_t addr, uint32_t bytes, uint32_t lkey) {
  std::memset(wqe, 0, kMprqWqeBytes);
  uint8_t* data = wqe + 16;  // struct mlx5_wqe_data_seg: byte_count, lkey, addr
  StoreBig32(data, bytes);
  StoreBig32(data + 4, lkey);
  StoreBig64(data + 8, addr);
}

}  // namespace atp::transport::mlx5
