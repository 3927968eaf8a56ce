// transport/mlx5/tx_request.cc: building send work requests as plain data.
#include "transport/mlx5/tx_request.h"

#include <cassert>
#include <cstring>

namespace atp::transport::mlx5 {
namespace {

uint64_t AddressOf(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

}  // namespace

TxRequest BuildFrameRequest(const FrameRef& frame, uint32_t lkey, uint32_t max_inline_frame) {
  TxRequest request;
  request.sge.addr = AddressOf(frame.data);
  request.sge.length = frame.length;
  request.record.frames = 1;
  if (frame.length <= max_inline_frame) {
    request.opcode = TxOpcode::kSendInline;
    request.release_at_post = frame;
  } else {
    request.opcode = TxOpcode::kSend;
    request.sge.lkey = lkey;
    request.record.frame = frame;
  }
  return request;
}

TxRequest BuildTsoRequest(const SegmentationJob& job, size_t first, size_t count,
                          std::span<uint8_t> slot, uint32_t slot_index, uint32_t lkey) {
  assert(count >= 1 && first + count <= job.size());
  assert(slot.size() >= TsoSlotBytes(count));
  std::memcpy(slot.data() + kTsoSlotHeaderOffset, job.header.data(), kTsoHeaderBytes);
  WriteSegmentMessages(job, first, count, slot.data() + kTsoSlotMessagesOffset);

  TxRequest request;
  request.record.frames = static_cast<uint32_t>(count);
  request.record.slot = slot_index;
  request.sge.lkey = lkey;
  if (count == 1) {
    request.opcode = TxOpcode::kSend;
    request.sge.addr = AddressOf(slot.data());
    request.sge.length = static_cast<uint32_t>(TsoSlotBytes(1));
    return request;
  }
  request.opcode = TxOpcode::kTso;
  request.tso_header = slot.data() + kTsoSlotHeaderOffset;
  request.tso_header_bytes = kTsoHeaderBytes;
  request.mss = kTsoSegmentBytes;
  request.sge.addr = AddressOf(slot.data() + kTsoSlotMessagesOffset);
  request.sge.length = static_cast<uint32_t>(count * kTsoSegmentBytes);
  return request;
}

void LkeyTable::Add(const void* begin, size_t bytes, uint32_t lkey) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(begin);
  regions_.push_back(Region{start, start + bytes, lkey});
}

std::optional<uint32_t> LkeyTable::Find(const uint8_t* data, size_t length) const {
  const uintptr_t start = reinterpret_cast<uintptr_t>(data);
  for (const Region& region : regions_) {
    if (start >= region.begin && start <= region.end && length <= region.end - start) {
      return region.lkey;
    }
  }
  return std::nullopt;
}

}  // namespace atp::transport::mlx5
