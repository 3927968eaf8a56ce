// atp/wire.h: the ATP frame (ATP-SPEC section 2): constants, the decoded
// header, and the codec.
//
// A frame is 306 bytes: Ethernet II (14) + IPv4 without options (20) + UDP (8)
// + ATP header (16) + 62 big-endian 32-bit values (248). A UDP socket carries
// only the last two: an "ATP message" of 264 bytes.
//
//   atp::wire::FrameFields fields;
//   atp::wire::Payload payload;
//   atp::wire::DecodeError err = atp::wire::DecodeFrame(bytes, kDefaultBasePort, &fields, &payload);
//   if (err != atp::wire::DecodeError::kOk) { counters.malformed++; return; }
//
// Decoding never reads past the span it is given, never crashes on any input,
// and reports the first thing that is wrong as a DecodeError.
#ifndef ATP_WIRE_H_
#define ATP_WIRE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace atp::wire {

// Sizes, in bytes.
inline constexpr size_t kEthernetHeaderBytes = 14;
inline constexpr size_t kIpv4HeaderBytes = 20;
inline constexpr size_t kUdpHeaderBytes = 8;
inline constexpr size_t kAtpHeaderBytes = 16;
inline constexpr size_t kValuesPerFragment = 62;
inline constexpr size_t kPayloadBytes = kValuesPerFragment * 4;
inline constexpr size_t kL2L4HeaderBytes = kEthernetHeaderBytes + kIpv4HeaderBytes + kUdpHeaderBytes;
inline constexpr size_t kMessageBytes = kAtpHeaderBytes + kPayloadBytes;
inline constexpr size_t kFrameBytes = kL2L4HeaderBytes + kMessageBytes;
static_assert(kPayloadBytes == 248);
static_assert(kMessageBytes == 264);
static_assert(kFrameBytes == 306);

// Offsets inside a frame.
inline constexpr size_t kIpv4Offset = kEthernetHeaderBytes;
inline constexpr size_t kUdpOffset = kIpv4Offset + kIpv4HeaderBytes;
inline constexpr size_t kAtpOffset = kUdpOffset + kUdpHeaderBytes;
inline constexpr size_t kPayloadOffset = kAtpOffset + kAtpHeaderBytes;
static_assert(kAtpOffset == 42 && kPayloadOffset == 58);

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint8_t kIpProtocolUdp = 17;
inline constexpr uint16_t kIpv4TotalLength = kIpv4HeaderBytes + kUdpHeaderBytes + kMessageBytes;
inline constexpr uint16_t kUdpLength = kUdpHeaderBytes + kMessageBytes;
static_assert(kIpv4TotalLength == 292 && kUdpLength == 272);
// IPv4 TOS: ECN-capable transport, and what a congested switch rewrites it to.
inline constexpr uint8_t kTosEct0 = 0x02;
inline constexpr uint8_t kTosCe = 0x03;
inline constexpr uint8_t kDefaultTtl = 64;

inline constexpr uint16_t kDefaultBasePort = 50000;

// seq: 4 bits of queue index, then 20 bits of position (ATP-SPEC section 3).
inline constexpr int kSeqBits = 24;
inline constexpr int kQueueShift = 20;
inline constexpr uint32_t kPositionMask = (1u << kQueueShift) - 1;
inline constexpr uint32_t kSeqMask = (1u << kSeqBits) - 1;
inline constexpr int kMaxQueues = 1 << (kSeqBits - kQueueShift);
static_assert(kMaxQueues == 16);

// Fan-in: 1..32 workers per rack, 1..32 racks (encoded as value - 1 in 5 bits).
inline constexpr int kMaxFanIn = 32;
inline constexpr int kMaxJobId = 255;

constexpr uint32_t QueueOfSeq(uint32_t seq) { return (seq & kSeqMask) >> kQueueShift; }
constexpr uint32_t PositionOfSeq(uint32_t seq) { return seq & kPositionMask; }
constexpr uint32_t MakeSeq(uint32_t queue, uint32_t position) {
  return ((queue << kQueueShift) | (position & kPositionMask)) & kSeqMask;
}

// MacAddress: six bytes in wire order.
struct MacAddress {
  std::array<uint8_t, 6> bytes{};

  // Parse: "02:00:00:00:00:10" (hex pairs separated by ':').
  static absl::StatusOr<MacAddress> Parse(std::string_view text);
  std::string ToString() const;
  bool IsMulticast() const { return (bytes[0] & 0x01) != 0; }
  friend bool operator==(const MacAddress&, const MacAddress&) = default;
};

// Ipv4Address: host byte order (192.0.2.1 is 0xC0000201).
struct Ipv4Address {
  uint32_t value = 0;

  // Parse: dotted quad "192.0.2.1".
  static absl::StatusOr<Ipv4Address> Parse(std::string_view text);
  std::string ToString() const;
  friend bool operator==(const Ipv4Address&, const Ipv4Address&) = default;
};

// AtpHeader: the 16-byte ATP header, decoded. Fan-ins are real counts (1..32),
// not the encoded value - 1.
struct AtpHeader {
  uint8_t job = 0;          // 1..255; 0 is never valid on the wire.
  uint32_t seq = 0;         // 24 bits: queue (4) | position (20).
  uint32_t bitmap0 = 0;     // level-1 contributors: bit i = worker i of the rack.
  uint32_t bitmap1 = 0;     // level-2 contributors: bit r = rack r (new index in
                            // the low 16 bits of a parameter packet with collision).
  uint8_t fan_in0 = 1;      // workers in the sender's rack, 1..32.
  uint8_t fan_in1 = 1;      // racks in the job, 1..32.
  bool edge = false;        // false: level 1 (bitmap0/fanIn0); true: level 2.
  bool resend = false;      // retransmission or flushed partial (with ack: overflow request).
  bool collision = false;   // aggregator owned by another (job, seq); with ack: new index.
  bool ecn = false;         // congestion seen on the way.
  bool ack = false;         // parameter packet (PS to workers).
  bool fp = false;          // payload is float32 (overflow path).
  uint16_t aggregator = 0;  // aggregator index (switches use it modulo their count).

  uint32_t queue() const { return QueueOfSeq(seq); }
  uint32_t position() const { return PositionOfSeq(seq); }
  // IsOverflowRequest: a parameter packet asking every worker to resend as fp.
  bool IsOverflowRequest() const { return ack && resend && !fp; }
  // NewAggregatorIndex: the index a collision-reporting parameter packet carries.
  uint16_t NewAggregatorIndex() const { return static_cast<uint16_t>(bitmap1 & 0xFFFF); }

  friend bool operator==(const AtpHeader&, const AtpHeader&) = default;
};

// Payload: the 62 values in host byte order: int32 (two's complement) or,
// when the header's fp flag is set, float32 bit patterns.
using Payload = std::array<uint32_t, kValuesPerFragment>;

// AtpMessage: what the protocol engines consume and produce, and what a UDP
// socket carries (as 264 bytes, see EncodeMessage).
struct AtpMessage {
  AtpHeader header;
  Payload payload{};
};

// FrameFields: everything in a frame but the payload.
struct FrameFields {
  MacAddress dst_mac;
  MacAddress src_mac;
  Ipv4Address src_ip;
  Ipv4Address dst_ip;
  uint8_t ip_tos = kTosEct0;  // kTosEct0, or kTosCe once a switch marked it.
  AtpHeader header;
};

// DecodeError: the first thing wrong with a frame or message (kOk if nothing).
enum class DecodeError : uint8_t {
  kOk = 0,
  kShortFrame,           // fewer bytes than a frame (or message) needs
  kLongFrame,            // more bytes than a frame (or message) holds
  kNotIpv4,              // EtherType is not 0x0800
  kBadIpv4Header,        // version/IHL not 0x45, or fragmented
  kBadIpv4TotalLength,   // IPv4 total length is not 292
  kBadIpv4Checksum,      // IPv4 header checksum does not verify
  kNotUdp,               // IPv4 protocol is not 17
  kBadUdpLength,         // UDP length is not 272
  kBadUdpPort,           // ports are not base port + queue index of seq
  kBadTos,               // TOS is neither ECT(0) nor CE
  kJobZero,              // job 0 is never valid on the wire
  kSeqOutOfRange,        // seq wider than 24 bits (encoder input only)
  kFanInOutOfRange,      // fan-in outside 1..32 (encoder input only)
  kBitmap0BeyondFanIn,   // bitmap0 names a worker >= fanIn0
  kBitmap1BeyondFanIn,   // bitmap1 names a rack >= fanIn1
  kEmptyBitmap,          // a gradient with no contributor
  kAmbiguousRack,        // a level-1 gradient naming more or fewer than one rack
};

// kDecodeErrorCount: the number of DecodeError values, for counter arrays
// indexed by static_cast<size_t>(error).
inline constexpr size_t kDecodeErrorCount = static_cast<size_t>(DecodeError::kAmbiguousRack) + 1;

// DecodeErrorName: a short stable name ("bad_ipv4_checksum") for logs and counters.
std::string_view DecodeErrorName(DecodeError error);

// ValidateHeader: the header-level rules, checked in this order:
//   job != 0 (kJobZero); seq < 2^24 (kSeqOutOfRange); fan-ins in 1..32
//   (kFanInOutOfRange); bitmap0 names only workers < fanIn0
//   (kBitmap0BeyondFanIn); bitmap1 names only racks < fanIn1
//   (kBitmap1BeyondFanIn), except in an ack with collision, where it carries
//   the new aggregator index; a gradient (not ack) has bitmap0 and bitmap1
//   non-empty (kEmptyBitmap) and, at level 1 (edge 0), names exactly one rack
//   in bitmap1 (kAmbiguousRack). Parameter packets (ack), overflow requests
//   among them, may carry empty bitmaps.
DecodeError ValidateHeader(const AtpHeader& header);

// EncodeHeader / DecodeHeader: the 16 header bytes. DecodeHeader does not
// validate; pair it with ValidateHeader.
void EncodeHeader(const AtpHeader& header, std::span<uint8_t, kAtpHeaderBytes> out);
AtpHeader DecodeHeader(std::span<const uint8_t, kAtpHeaderBytes> in);

// EncodePayload / DecodePayload: 62 values to and from big-endian bytes.
void EncodePayload(const Payload& payload, std::span<uint8_t, kPayloadBytes> out);
void DecodePayload(std::span<const uint8_t, kPayloadBytes> in, Payload& out);

// EncodeMessage / DecodeMessage: header + payload, 264 bytes, as a UDP socket
// carries them. DecodeMessage validates the header.
void EncodeMessage(const AtpMessage& message, std::span<uint8_t, kMessageBytes> out);
DecodeError DecodeMessage(std::span<const uint8_t> in, AtpMessage* out);

// EncodeFrame: a whole frame. The UDP ports are base_port + header.queue().
// IPv4: TOS fields.ip_tos, identification 0, DF set, TTL 64, a valid checksum;
// the UDP checksum is 0. The caller must pass a valid header (ValidateHeader
// == kOk), a TOS of kTosEct0 or kTosCe, and base_port + 15 <= 65535; these
// are checked in debug builds only.
void EncodeFrame(const FrameFields& fields, const Payload& payload, uint16_t base_port,
                 std::span<uint8_t, kFrameBytes> out);

// DecodeFrame: validates and decodes a whole frame, checking in this order:
// length (kShortFrame, kLongFrame), EtherType (kNotIpv4), version/IHL 0x45 and
// not fragmented: MF clear, offset 0, DF either (kBadIpv4Header), total length
// (kBadIpv4TotalLength), header checksum (kBadIpv4Checksum), protocol
// (kNotUdp), UDP length (kBadUdpLength), both ports == base_port + queue of
// seq (kBadUdpPort), TOS 0x02 or 0x03 (kBadTos), then ValidateHeader. The IPv4
// identification, TTL and UDP checksum are ignored. `fields` and `payload` may
// be null when not wanted. On error the outputs are unspecified.
DecodeError DecodeFrame(std::span<const uint8_t> frame, uint16_t base_port, FrameFields* fields,
                        Payload* payload);

// ValidateFrame: the same checks as DecodeFrame (same result on every input),
// without producing fields: what a forwarding element runs on every ATP frame
// before FrameView touches it. A valid frame costs a few predictable branches;
// only a rejected one pays for finding which check failed first.
DecodeError ValidateFrame(std::span<const uint8_t> frame, uint16_t base_port);

// IsAtpFrame: a cheap classification for forwarding elements: EtherType IPv4,
// IP version 4, protocol UDP, and a UDP destination port in [base_port,
// base_port + 16), read after any IPv4 options. Reads nothing beyond `frame`.
// Non-ATP frames are forwarded untouched; ATP frames go through ValidateFrame
// or DecodeFrame (and FrameView after it), which drop malformed ones.
bool IsAtpFrame(std::span<const uint8_t> frame, uint16_t base_port);

// Ipv4HeaderChecksum: the RFC 1071 checksum of a 20-byte IPv4 header, with its
// checksum field taken as zero.
uint16_t Ipv4HeaderChecksum(std::span<const uint8_t, kIpv4HeaderBytes> header);

}  // namespace atp::wire

#endif  // ATP_WIRE_H_
