// transport/common/segmentation.cc: the per-segment rule of a segmentation job
// (atp/transport/segmentation.h), shared by every backend's software path and
// by the GSO/TSO paths that build the 264-byte messages themselves.
#include "atp/transport/segmentation.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "atp/wire.h"
#include "transport/common/copy.h"

namespace atp::transport {
namespace {

constexpr size_t kSeqInHeader = kSeqOffset - wire::kAtpOffset;
constexpr size_t kAggregatorInHeader = kAggregatorOffset - wire::kAtpOffset;

uint32_t LoadSeq(const uint8_t* p) {
  return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | uint32_t{p[2]};
}
void StoreSeq(uint8_t* p, uint32_t seq) {
  p[0] = static_cast<uint8_t>(seq >> 16);
  p[1] = static_cast<uint8_t>(seq >> 8);
  p[2] = static_cast<uint8_t>(seq);
}
void StoreAggregator(uint8_t* p, uint16_t index) {
  p[0] = static_cast<uint8_t>(index >> 8);
  p[1] = static_cast<uint8_t>(index);
}

}  // namespace

SegmentationJob SegmentationJob::FromFrame(std::span<const uint8_t, wire::kFrameBytes> first_frame,
                                           std::span<const uint8_t* const> payloads,
                                           std::span<const uint16_t> aggregators) {
  SegmentationJob job;
  std::memcpy(job.header.data(), first_frame.data(), kSegmentTemplateBytes);
  job.payloads = payloads;
  job.aggregators = aggregators;
  return job;
}

SegmentationJob SegmentationJob::FromMessages(
    std::span<const uint8_t, wire::kFrameBytes> first_frame, std::span<uint8_t> messages,
    std::span<const uint16_t> aggregators) {
  SegmentationJob job;
  std::memcpy(job.header.data(), first_frame.data(), kSegmentTemplateBytes);
  job.messages = messages;
  job.aggregators = aggregators;
  return job;
}

uint32_t SegmentationJob::seq() const { return LoadSeq(header.data() + kSeqOffset); }

void SegmentationJob::Advance(size_t n) {
  assert(n <= size());
  if (n == 0) return;
  StoreSeq(header.data() + kSeqOffset, SegmentSeq(seq(), n));
  if (payloads.empty()) {
    messages = messages.subspan(n * wire::kMessageBytes);
  } else {
    payloads = payloads.subspan(n);
  }
  if (!aggregators.empty()) {
    StoreAggregator(header.data() + kAggregatorOffset,
                    aggregators.size() > n ? aggregators[n] : aggregators.back());
    aggregators = aggregators.subspan(n);
  }
}

void WriteSegmentHeader(const SegmentationJob& job, size_t i,
                        std::span<uint8_t, wire::kAtpHeaderBytes> out) {
  assert(i < job.size());
  std::memcpy(out.data(), job.header.data() + wire::kAtpOffset, wire::kAtpHeaderBytes);
  StoreSeq(out.data() + kSeqInHeader, SegmentSeq(job.seq(), i));
  if (!job.aggregators.empty()) StoreAggregator(out.data() + kAggregatorInHeader, job.aggregators[i]);
}

void WriteSegmentMessage(const SegmentationJob& job, size_t i,
                         std::span<uint8_t, wire::kMessageBytes> out) {
  WriteSegmentHeader(job, i, out.first<wire::kAtpHeaderBytes>());
  std::memcpy(out.data() + wire::kAtpHeaderBytes, job.payload(i), wire::kPayloadBytes);
}

namespace {

// WriteHeaders: the ATP headers of segments [first, first + count) at `out`,
// 264 bytes apart; with kCopyPayloads, each payload after its header.
template <bool kCopyPayloads>
void WriteHeaders(const SegmentationJob& job, size_t first, size_t count, uint8_t* out) {
  assert(first + count <= job.size());
  const uint8_t* header = job.header.data() + wire::kAtpOffset;
  const uint32_t seq0 = job.seq();
  const bool per_segment_index = !job.aggregators.empty();
  for (size_t i = first; i < first + count; ++i, out += wire::kMessageBytes) {
    internal::CopyBytes<wire::kAtpHeaderBytes>(out, header);
    StoreSeq(out + kSeqInHeader, SegmentSeq(seq0, i));
    if (per_segment_index) StoreAggregator(out + kAggregatorInHeader, job.aggregators[i]);
    if constexpr (kCopyPayloads) {
      internal::CopyBytes<wire::kPayloadBytes>(out + wire::kAtpHeaderBytes, job.payload(i));
    }
  }
}

}  // namespace

void WriteSegmentMessages(const SegmentationJob& job, size_t first, size_t count, uint8_t* out) {
  WriteHeaders<true>(job, first, count, out);
}

uint8_t* WriteSegmentHeadersInPlace(const SegmentationJob& job, size_t first, size_t count) {
  assert(!job.messages.empty());
  uint8_t* out = job.messages.data() + first * wire::kMessageBytes;
  WriteHeaders<false>(job, first, count, out);
  return out;
}

void WriteSegmentFrame(const SegmentationJob& job, size_t i,
                       std::span<uint8_t, wire::kFrameBytes> out) {
  std::memcpy(out.data(), job.header.data(), wire::kAtpOffset);
  WriteSegmentMessage(job, i, out.subspan<wire::kAtpOffset, wire::kMessageBytes>());
}

bool IsValidSegmentationJob(const SegmentationJob& job, uint16_t base_port) {
  if (!job.payloads.empty() && !job.messages.empty()) return false;  // one form only
  if (job.messages.size() % wire::kMessageBytes != 0) return false;
  if (!job.HasValidAggregators()) return false;
  if (job.empty()) return true;
  for (const uint8_t* payload : job.payloads) {
    if (payload == nullptr) return false;
  }
  // Only the template decides validity; the payload bytes never do.
  std::array<uint8_t, wire::kFrameBytes> frame{};
  std::memcpy(frame.data(), job.header.data(), kSegmentTemplateBytes);
  return wire::ValidateFrame(frame, base_port) == wire::DecodeError::kOk;
}

}  // namespace atp::transport
