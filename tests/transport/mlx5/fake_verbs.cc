// tests/transport/mlx5/fake_verbs.cc
#include "tests/transport/mlx5/fake_verbs.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "gtest/gtest.h"
#include "transport/mlx5/cqe.h"

namespace atp::transport::mlx5::testing {
namespace {

uint32_t LoadBig32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
void StoreBig32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
void StoreBig16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
// A doorbell word as the driver stored it (big-endian bytes in memory).
uint32_t DoorbellValue(const uint32_t& word) {
  uint8_t bytes[4];
  std::memcpy(bytes, &word, sizeof(bytes));
  return LoadBig32(bytes);
}
const uint8_t* At(uint64_t addr) { return reinterpret_cast<const uint8_t*>(addr); }

}  // namespace

// ---------------------------------------------------------------------------

FakeCompletionQueue::FakeCompletionQueue() {
  context_.ops.poll_cq = &FakeCompletionQueue::Poll;
  cq_.context = &context_;
  cq_.cq_context = this;
}

int FakeCompletionQueue::Poll(ibv_cq* cq, int n, ibv_wc* out) {
  auto* self = static_cast<FakeCompletionQueue*>(cq->cq_context);
  int got = 0;
  while (got < n && !self->completions_.empty()) {
    out[got++] = self->completions_.front();
    self->completions_.pop_front();
  }
  return got;
}

// ---------------------------------------------------------------------------

FakeSendQueue::FakeSendQueue() {
  qpx_.qp_base.qp_context = this;
  qpx_.wr_start = &FakeSendQueue::Start;
  qpx_.wr_complete = &FakeSendQueue::Complete;
  qpx_.wr_abort = &FakeSendQueue::Abort;
  qpx_.wr_send = &FakeSendQueue::Send;
  qpx_.wr_send_tso = &FakeSendQueue::SendTso;
  qpx_.wr_set_sge = &FakeSendQueue::SetSge;
  qpx_.wr_set_inline_data = &FakeSendQueue::SetInline;
}

FakeSendQueue* FakeSendQueue::Self(ibv_qp_ex* qpx) {
  return static_cast<FakeSendQueue*>(qpx->qp_base.qp_context);
}

void FakeSendQueue::Start(ibv_qp_ex* qpx) {
  FakeSendQueue* self = Self(qpx);
  EXPECT_TRUE(self->batch_.empty()) << "wr_start inside a batch";
  self->batch_.clear();
}

int FakeSendQueue::Complete(ibv_qp_ex* qpx) {
  FakeSendQueue* self = Self(qpx);
  if (self->fail_next_complete_) {
    self->fail_next_complete_ = false;
    self->batch_.clear();
    return EINVAL;
  }
  ++self->batches_;
  for (const PostedRequest& request : self->batch_) {
    self->queued_.push_back(request);
    self->history_.push_back(request);
  }
  self->batch_.clear();
  return 0;
}

void FakeSendQueue::Abort(ibv_qp_ex* qpx) { Self(qpx)->batch_.clear(); }

void FakeSendQueue::Send(ibv_qp_ex* qpx) {
  PostedRequest request;
  request.kind = PostedRequest::Kind::kSend;
  request.wr_id = qpx->wr_id;
  request.flags = qpx->wr_flags;
  Self(qpx)->batch_.push_back(request);
}

void FakeSendQueue::SendTso(ibv_qp_ex* qpx, void* hdr, uint16_t hdr_sz, uint16_t mss) {
  PostedRequest request;
  request.kind = PostedRequest::Kind::kTso;
  request.wr_id = qpx->wr_id;
  request.flags = qpx->wr_flags;
  const auto* header = static_cast<const uint8_t*>(hdr);
  request.tso_header.assign(header, header + hdr_sz);
  request.mss = mss;
  Self(qpx)->batch_.push_back(request);
}

void FakeSendQueue::SetSge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
  FakeSendQueue* self = Self(qpx);
  ASSERT_FALSE(self->batch_.empty()) << "wr_set_sge without a request";
  PostedRequest& request = self->batch_.back();
  request.lkey = lkey;
  request.addr = addr;
  request.length = length;
}

void FakeSendQueue::SetInline(ibv_qp_ex* qpx, void* addr, size_t length) {
  FakeSendQueue* self = Self(qpx);
  ASSERT_FALSE(self->batch_.empty()) << "wr_set_inline_data without a request";
  PostedRequest& request = self->batch_.back();
  request.has_inline = true;
  const auto* bytes = static_cast<const uint8_t*>(addr);
  request.inline_bytes.assign(bytes, bytes + length);
}

size_t FakeSendQueue::Transmit(size_t n, ibv_wc_status status) {
  size_t frames = 0;
  for (size_t i = 0; i < n && !queued_.empty(); ++i) {
    const PostedRequest request = queued_.front();
    queued_.pop_front();
    if (request.kind == PostedRequest::Kind::kSend) {
      if (request.has_inline) {
        wire_.push_back(request.inline_bytes);
      } else {
        wire_.emplace_back(At(request.addr), At(request.addr) + request.length);
      }
      ++frames;
    } else {
      for (uint32_t offset = 0; offset < request.length; offset += request.mss) {
        const uint32_t bytes = std::min<uint32_t>(request.mss, request.length - offset);
        Bytes frame = request.tso_header;
        frame.insert(frame.end(), At(request.addr + offset), At(request.addr + offset) + bytes);
        wire_.push_back(std::move(frame));
        ++frames;
      }
    }
    if ((request.flags & IBV_SEND_SIGNALED) != 0) {
      ibv_wc wc{};
      wc.wr_id = request.wr_id;
      wc.status = status;
      wc.opcode = request.kind == PostedRequest::Kind::kTso ? IBV_WC_TSO : IBV_WC_SEND;
      completion_queue_.Push(wc);
    }
  }
  return frames;
}

// ---------------------------------------------------------------------------

FakeStridingNic::FakeStridingNic(const StridingShape& shape)
    : shape_(shape),
      wq_(size_t{shape.wq_entries} * kMprqWqeBytes, 0),
      cq_(size_t{shape.cq_entries} * shape.cqe_bytes, 0) {
  // As the provider leaves a new CQ: every entry invalid, owner bit 0.
  for (uint32_t i = 0; i < shape.cq_entries; ++i) {
    cq_[size_t{i} * shape.cqe_bytes + shape.cqe_bytes - 1] = kCqeOpInvalid << 4;
  }
}

StridingRings FakeStridingNic::rings() {
  StridingRings rings;
  rings.wq_buffer = wq_.data();
  rings.wq_entries = shape_.wq_entries;
  rings.wq_stride = kMprqWqeBytes;
  rings.wq_doorbell = &wq_doorbell_;
  rings.cq_buffer = cq_.data();
  rings.cq_entries = shape_.cq_entries;
  rings.cq_entry_bytes = shape_.cqe_bytes;
  rings.cq_doorbell = &cq_doorbell_;
  rings.lkey = kLkey;
  return rings;
}

uint32_t FakeStridingNic::driver_head() const { return DoorbellValue(wq_doorbell_) & 0xFFFF; }
uint32_t FakeStridingNic::consumer_index() const { return DoorbellValue(cq_doorbell_) & 0xFFFFFF; }

bool FakeStridingNic::CqFull() const {
  return ((cq_pi_ - consumer_index()) & 0xFFFFFF) + 2 > shape_.cq_entries;
}

void FakeStridingNic::WriteCqe(uint8_t opcode, uint32_t byte_cnt, uint16_t wqe_id,
                               uint16_t stride_index) {
  uint8_t* cqe = cq_.data() + size_t{cq_pi_ & (shape_.cq_entries - 1)} * shape_.cqe_bytes +
                 (shape_.cqe_bytes - kCqeBytes);
  std::memset(cqe, 0, kCqeBytes);
  StoreBig16(cqe + kCqeWqeIdOffset, wqe_id);
  StoreBig32(cqe + kCqeByteCountOffset, byte_cnt);
  StoreBig16(cqe + kCqeWqeCounterOffset, stride_index);
  const uint8_t owner = (cq_pi_ / shape_.cq_entries) & 1;
  cqe[kCqeOpOwnOffset] = static_cast<uint8_t>((opcode << 4) | owner);
  ++cq_pi_;
}

void FakeStridingNic::FinishEntryIfFull() {
  if (stride_pos_ == shape_.strides_per_wqe) {
    ++entry_;
    stride_pos_ = 0;
  }
}

bool FakeStridingNic::Deliver(std::span<const uint8_t> frame) {
  const uint32_t needed =
      static_cast<uint32_t>((frame.size() + shape_.stride_bytes - 1) / shape_.stride_bytes);
  auto posted = [&] { return (driver_head() - entry_) & 0xFFFF; };
  if (posted() == 0 || CqFull() || needed > shape_.strides_per_wqe) {
    ++drops_;
    return false;
  }
  if (stride_pos_ + needed > shape_.strides_per_wqe) {
    const uint32_t left = shape_.strides_per_wqe - stride_pos_;
    WriteCqe(kCqeOpResponderSend, kStridedFillerBit | (left << kStridedStridesShift),
             static_cast<uint16_t>(entry_), static_cast<uint16_t>(stride_pos_));
    stride_pos_ = shape_.strides_per_wqe;
    FinishEntryIfFull();
    if (posted() == 0) {
      ++drops_;
      return false;
    }
  }
  const uint8_t* wqe = wq_.data() + size_t{entry_ & (shape_.wq_entries - 1)} * kMprqWqeBytes;
  const uint32_t byte_count = LoadBig32(wqe + 16);
  const uint32_t lkey = LoadBig32(wqe + 20);
  const uint64_t addr = (uint64_t{LoadBig32(wqe + 24)} << 32) | LoadBig32(wqe + 28);
  EXPECT_EQ(lkey, kLkey);
  EXPECT_EQ(byte_count, shape_.stride_bytes * shape_.strides_per_wqe);
  std::memcpy(reinterpret_cast<uint8_t*>(addr) + size_t{stride_pos_} * shape_.stride_bytes,
              frame.data(), frame.size());
  WriteCqe(kCqeOpResponderSend,
           (needed << kStridedStridesShift) | static_cast<uint32_t>(frame.size()),
           static_cast<uint16_t>(entry_), static_cast<uint16_t>(stride_pos_));
  stride_pos_ += needed;
  FinishEntryIfFull();
  return true;
}

void FakeStridingNic::DeliverError() {
  WriteCqe(kCqeOpResponderError, 0, static_cast<uint16_t>(entry_), 0);
  uint8_t* cqe = cq_.data() + size_t{(cq_pi_ - 1) & (shape_.cq_entries - 1)} * shape_.cqe_bytes +
                 (shape_.cqe_bytes - kCqeBytes);
  cqe[kCqeSyndromeOffset] = 0x04;
}

// ---------------------------------------------------------------------------

FakePlainNic::FakePlainNic() {
  wq_.wq_context = this;
  wq_.post_recv = &FakePlainNic::PostRecv;
}

int FakePlainNic::PostRecv(ibv_wq* wq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  auto* self = static_cast<FakePlainNic*>(wq->wq_context);
  for (; wr != nullptr; wr = wr->next) {
    if (self->fail_after_ == 0) {
      *bad = wr;
      return ENOMEM;
    }
    if (self->fail_after_ > 0) --self->fail_after_;
    EXPECT_EQ(wr->num_sge, 1);
    self->posted_.push_back(Posted{wr->wr_id, wr->sg_list[0]});
  }
  return 0;
}

bool FakePlainNic::Deliver(std::span<const uint8_t> frame, ibv_wc_status status) {
  if (posted_.empty()) return false;
  const Posted entry = posted_.front();
  posted_.pop_front();
  std::memcpy(reinterpret_cast<uint8_t*>(entry.sge.addr), frame.data(),
              std::min<size_t>(frame.size(), entry.sge.length));
  ibv_wc wc{};
  wc.wr_id = entry.wr_id;
  wc.status = status;
  wc.opcode = IBV_WC_RECV;
  wc.byte_len = static_cast<uint32_t>(frame.size());
  completion_queue_.Push(wc);
  return true;
}

}  // namespace atp::transport::mlx5::testing
