// transport/mlx5/cqe.h: the mlx5 completion queue entry (CQE) and striding
// receive entry layouts, read and written as bytes. Pure (no device): the
// datapath points these at the rings mlx5dv_init_obj exposes; tests point them
// at synthetic buffers. Private to transport/mlx5.
//
// A completion queue is a ring of cqe_count entries (a power of two) of 64 or
// 128 bytes; the 64-byte CQE is the last 64 bytes of an entry. The NIC writes
// entry (ci mod cqe_count) on pass ci / cqe_count with an owner bit equal to
// that pass's parity; software consumes in order and reports its consumer
// index in the doorbell record.
//
// A striding receive queue's completion describes one packet (or a filler):
//   byte_cnt (big-endian, offset 44): bits 0-15 packet bytes, bits 16-30
//       strides consumed, bit 31 filler (no packet: the strides left in an
//       entry too short for the next packet);
//   wqe_counter (offset 60): the index of the packet's first stride;
//   wqe_id (offset 2): the receive entry (its ring index, mod 2^16).
// An entry is done when its strides are all consumed (fillers included).
//
//   CqCursor cq(dv_cq.buf, dv_cq.cqe_cnt, dv_cq.cqe_size);
//   while (const uint8_t* cqe = cq.Peek()) {
//     if (ClassifyCqe(cqe) == CqeClass::kReceive) { StridedCompletion c = ParseStridedCqe(cqe); ...
//     } cq.Pop();
//   }
//   dv_cq.dbrec[kCqDoorbellConsumerIndex] = CqDoorbellValue(cq.consumer_index());
#ifndef ATP_TRANSPORT_MLX5_CQE_H_
#define ATP_TRANSPORT_MLX5_CQE_H_

#include <cassert>
#include <cstddef>
#include <cstdint>

#include "transport/mlx5/dma_barrier.h"

namespace atp::transport::mlx5 {

inline constexpr size_t kCqeBytes = 64;
// Offsets inside the 64-byte CQE (struct mlx5_cqe64 in infiniband/mlx5dv.h;
// cqe.cc checks them against the struct).
inline constexpr size_t kCqeWqeIdOffset = 2;
inline constexpr size_t kCqeByteCountOffset = 44;
inline constexpr size_t kCqeSyndromeOffset = 55;  // error CQEs (struct mlx5_err_cqe)
inline constexpr size_t kCqeWqeCounterOffset = 60;
inline constexpr size_t kCqeOpOwnOffset = 63;

// The striding byte_cnt word.
inline constexpr uint32_t kStridedBytesMask = 0xFFFF;
inline constexpr int kStridedStridesShift = 16;
inline constexpr uint32_t kStridedStridesMask = 0x7FFF;
inline constexpr uint32_t kStridedFillerBit = 0x80000000u;

// CQE opcodes (the high nibble of op_own; MLX5_CQE_* in mlx5dv.h).
inline constexpr uint8_t kCqeOpRequester = 0;
inline constexpr uint8_t kCqeOpResponderSend = 2;
inline constexpr uint8_t kCqeOpRequesterError = 13;
inline constexpr uint8_t kCqeOpResponderError = 14;
inline constexpr uint8_t kCqeOpInvalid = 15;

// CqeClass: what a software-owned CQE is.
enum class CqeClass : uint8_t {
  kReceive,       // a packet (or a striding filler) arrived
  kSend,          // a send request completed
  kReceiveError,  // a receive entry failed (flushed on teardown, or an error)
  kSendError,     // a send request failed; the QP is in error
  kCompressed,    // a compressed-CQE block (the queue never asks for them)
  kOther,         // anything else (resize, signature, ...)
};

CqeClass ClassifyCqe(const uint8_t* cqe);
// CqeSyndrome: the error syndrome of a kReceiveError / kSendError CQE.
uint8_t CqeSyndrome(const uint8_t* cqe);

// StridedCompletion: one striding receive CQE, decoded.
struct StridedCompletion {
  uint16_t wqe_id = 0;        // receive entry, mod 2^16
  uint16_t stride_index = 0;  // first stride of the packet in its entry
  uint16_t strides = 0;       // strides consumed (by the packet or the filler)
  uint16_t bytes = 0;         // packet bytes (0 in a filler)
  bool filler = false;
  friend bool operator==(const StridedCompletion&, const StridedCompletion&) = default;
};

StridedCompletion ParseStridedCqe(const uint8_t* cqe);

// CqCursor: the consumer side of a CQ ring in memory. Not thread-safe.
class CqCursor {
 public:
  // buffer: cqe_count entries of cqe_size (64 or 128) bytes; cqe_count a power of two.
  CqCursor(uint8_t* buffer, uint32_t cqe_count, uint32_t cqe_size)
      : buffer_(buffer), count_(cqe_count), size_(cqe_size) {
    assert(cqe_count != 0 && (cqe_count & (cqe_count - 1)) == 0);
    assert(cqe_size == 64 || cqe_size == 128);
  }

  // Peek: the 64-byte CQE at the consumer index if software owns it (opcode
  // not invalid, owner bit = parity of the pass), else null. Reads after a
  // non-null Peek see what the NIC wrote before the owner bit.
  const uint8_t* Peek() const {
    const uint8_t* cqe = buffer_ + size_t{ci_ & (count_ - 1)} * size_ + (size_ - kCqeBytes);
    // The NIC writes op_own by DMA: read memory on every poll.
    const uint8_t op_own = *static_cast<const volatile uint8_t*>(cqe + kCqeOpOwnOffset);
    const uint8_t pass_parity = (ci_ & count_) != 0 ? 1 : 0;
    if ((op_own >> 4) == kCqeOpInvalid || (op_own & 1) != pass_parity) return nullptr;
    DmaReadBarrier();
    return cqe;
  }
  void Pop() { ++ci_; }

  // consumer_index: entries consumed so far (the doorbell takes its low 24 bits).
  uint32_t consumer_index() const { return ci_; }

 private:
  uint8_t* buffer_;
  uint32_t count_;
  uint32_t size_;
  uint32_t ci_ = 0;
};

// Doorbell records: the CQ's consumer index (24 bits, big-endian, in word 0)
// and a receive queue's producer counter (16 bits, big-endian).
inline constexpr size_t kCqDoorbellConsumerIndex = 0;
uint32_t CqDoorbellValue(uint32_t consumer_index);
uint32_t RqDoorbellValue(uint32_t producer_counter);

// kMprqWqeBytes: a striding receive entry (struct mlx5_mprq_wqe): a 16-byte
// next segment (unused in a cyclic queue) and one 16-byte data segment.
inline constexpr size_t kMprqWqeBytes = 32;

// WriteMprqWqe: entry `wqe` points at `bytes` bytes at `addr` (lkey).
void WriteMprqWqe(uint8_t* wqe, uint64_t addr, uint32_t bytes, uint32_t lkey);

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_CQE_H_
