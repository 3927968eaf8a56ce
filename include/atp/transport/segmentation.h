// atp/transport/segmentation.h: a segmentation job, the one-call form of
// "send these k consecutive fragments of one queue" (ARCHITECTURE.md,
// "Transport interface").
//
// A job is a header template (the first 58 bytes of the first fragment's frame:
// Ethernet, IPv4, UDP and the ATP header) and k payloads of 248 bytes. All ATP
// frames have the same length (ATP-SPEC section 2), so one template serves the
// whole job; segment i differs from the template only in
//
//   - seq: the template's queue index, and its position + i modulo 2^20
//     (SegmentSeq below); the queue bits, and so the UDP ports, never change;
//   - aggregator: `aggregators[i]` when the job carries per-segment indices
//     (window slots hash to different aggregators, ATP-SPEC section 3), else
//     the template's.
//
// Everything else, IPv4 identification (0) and checksum included, is the
// template's byte for byte. A NIC doing TSO may number the identification;
// decoders ignore it.
//
// Backends send a job with hardware segmentation (mlx5 TSO), kernel UDP GSO
// (UDP_SEGMENT, segment = 264-byte ATP message) or by replicating the template
// in software; the receiver sees the same k frames either way.
//
//   SegmentationJob job = SegmentationJob::FromFrame(first_frame, payload_ptrs, indices);
//   while (!job.empty()) {
//     size_t sent = queue.TxSegmented(job);
//     job.Advance(sent);                      // the rest goes in a later call
//     if (sent == 0) break;                   // back-pressured: retry later
//   }
#ifndef ATP_TRANSPORT_SEGMENTATION_H_
#define ATP_TRANSPORT_SEGMENTATION_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "atp/wire.h"

namespace atp::transport {

// kSegmentTemplateBytes: L2-L4 headers (42) + ATP header (16).
inline constexpr size_t kSegmentTemplateBytes = wire::kPayloadOffset;
static_assert(kSegmentTemplateBytes == 58);
// Offsets of the per-segment fields inside the template (and any frame).
inline constexpr size_t kSeqOffset = wire::kAtpOffset + 1;          // 24-bit seq
inline constexpr size_t kAggregatorOffset = wire::kAtpOffset + 14;  // 16-bit index
static_assert(kAggregatorOffset + 2 == kSegmentTemplateBytes);

// SegmentSeq: the seq of segment i of a job whose first segment has `seq0`.
constexpr uint32_t SegmentSeq(uint32_t seq0, size_t i) {
  return wire::MakeSeq(wire::QueueOfSeq(seq0),
                       wire::PositionOfSeq(seq0) + static_cast<uint32_t>(i & wire::kPositionMask));
}

// SegmentationJob: borrowed payloads plus a template held by value. The
// payloads come in one of two forms:
//
//   - `payloads`: k pointers to 248 bytes each, anywhere; a backend copies
//     them (into frames, or into one contiguous run for GSO/TSO);
//   - `messages` (zero copy): the k segments as 264-byte ATP messages back to
//     back, each payload at bytes 16..263 of its message. The backend writes
//     each segment's ATP header into bytes 0..15 in place and may hand the
//     region to the kernel or NIC as it is. Lay window slots out this way to
//     send them without a copy.
//
// Exactly one form is non-empty. The memory must stay valid (and, for
// `messages`, untouched by others) during each TxSegmented call only; a
// backend is done with it when the call returns.
struct SegmentationJob {
  std::array<uint8_t, kSegmentTemplateBytes> header{};
  std::span<const uint8_t* const> payloads;  // k pointers to kPayloadBytes each, or
  std::span<uint8_t> messages;               // k * kMessageBytes, payloads in place
  std::span<const uint16_t> aggregators;     // empty, or k indices (one per segment)

  // FromFrame: a job whose template is the first 58 bytes of `first_frame` (a
  // whole frame, e.g. from wire::EncodeFrame; its payload is not used).
  static SegmentationJob FromFrame(std::span<const uint8_t, wire::kFrameBytes> first_frame,
                                   std::span<const uint8_t* const> payloads,
                                   std::span<const uint16_t> aggregators = {});
  // FromMessages: the same, with the payloads in place in `messages`.
  static SegmentationJob FromMessages(std::span<const uint8_t, wire::kFrameBytes> first_frame,
                                      std::span<uint8_t> messages,
                                      std::span<const uint16_t> aggregators = {});

  size_t size() const {
    return payloads.empty() ? messages.size() / wire::kMessageBytes : payloads.size();
  }
  bool empty() const { return size() == 0; }
  // payload: segment i's 248 payload bytes, whichever the form.
  const uint8_t* payload(size_t i) const {
    return payloads.empty() ? messages.data() + i * wire::kMessageBytes + wire::kAtpHeaderBytes
                            : payloads[i];
  }
  // seq: the template's (segment 0's) seq.
  uint32_t seq() const;
  // Advance: drops the first n segments (n <= size()): what remains is the
  // same job, starting at segment n.
  void Advance(size_t n);
  // HasValidAggregators: aggregators is empty or has one index per segment.
  bool HasValidAggregators() const {
    return aggregators.empty() || aggregators.size() == size();
  }
};

// WriteSegmentHeader: segment i's 16-byte ATP header.
void WriteSegmentHeader(const SegmentationJob& job, size_t i,
                        std::span<uint8_t, wire::kAtpHeaderBytes> out);
// WriteSegmentMessage: segment i as a UDP socket carries it (ATP header + data).
void WriteSegmentMessage(const SegmentationJob& job, size_t i,
                         std::span<uint8_t, wire::kMessageBytes> out);
// WriteSegmentMessages: segments [first, first + count) as count messages back
// to back at `out` (count * 264 bytes): the payload of one GSO send or one TSO
// work request.
void WriteSegmentMessages(const SegmentationJob& job, size_t first, size_t count, uint8_t* out);
// WriteSegmentHeadersInPlace: for a job in the `messages` form, writes the ATP
// headers of segments [first, first + count) into the messages and returns the
// first one's address: count * 264 bytes ready to send.
uint8_t* WriteSegmentHeadersInPlace(const SegmentationJob& job, size_t first, size_t count);
// WriteSegmentFrame: segment i as a whole 306-byte frame.
void WriteSegmentFrame(const SegmentationJob& job, size_t i,
                       std::span<uint8_t, wire::kFrameBytes> out);

// IsValidSegmentationJob: segment 0 would be a valid ATP frame for
// `base_port` (wire::ValidateFrame), exactly one payload form is used (with
// no null pointer, or whole messages), and the aggregator count is consistent. The
// other segments differ only in fields that cannot make them invalid (the
// position bits of seq, the aggregator index), so a backend checks a job once,
// not per segment.
bool IsValidSegmentationJob(const SegmentationJob& job, uint16_t base_port);

}  // namespace atp::transport

#endif  // ATP_TRANSPORT_SEGMENTATION_H_
