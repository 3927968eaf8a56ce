// lib/wire/frame.cc: the whole-frame codec (Ethernet II + IPv4 + UDP + ATP
// message, ATP-SPEC section 2) and the per-packet validation that forwarding
// elements run.
#include <cassert>
#include <cstdint>
#include <cstring>
#include <span>

#include "atp/wire.h"
#include "lib/wire/byte_order.h"
#include "lib/wire/frame_checks.h"
#include "lib/wire/header_layout.h"

namespace atp::wire {
namespace {

using internal::HostToBig16;
using internal::LoadBig16;
using internal::LoadBig32;
using internal::LoadNative16;
using internal::LoadNative32;
using internal::StoreBig16;
using internal::StoreBig32;

// Offsets inside the Ethernet header.
constexpr size_t kEthDstOffset = 0;
constexpr size_t kEthSrcOffset = 6;
constexpr size_t kEtherTypeOffset = 12;
static_assert(kEtherTypeOffset + 2 == kEthernetHeaderBytes);

// Offsets inside the IPv4 header.
constexpr size_t kIpVersionIhl = 0;
constexpr size_t kIpTos = 1;
constexpr size_t kIpTotalLength = 2;
constexpr size_t kIpIdentification = 4;
constexpr size_t kIpFlagsFragment = 6;
constexpr size_t kIpTtl = 8;
constexpr size_t kIpProtocol = 9;
constexpr size_t kIpChecksum = 10;
constexpr size_t kIpSrc = 12;
constexpr size_t kIpDst = 16;
static_assert(kIpDst + 4 == kIpv4HeaderBytes);

constexpr uint8_t kIpv4VersionIhl = 0x45;  // version 4, 5 words: no options.
static_assert((kIpv4VersionIhl & 0xF) * 4 == kIpv4HeaderBytes);
constexpr uint16_t kIpDontFragment = 0x4000;
// More-fragments flag and fragment offset: both zero in an unfragmented packet.
constexpr uint16_t kIpFragmentMask = 0x3FFF;

// Offsets inside the UDP header.
constexpr size_t kUdpSrcPort = 0;
constexpr size_t kUdpDstPort = 2;
constexpr size_t kUdpLengthOffset = 4;
constexpr size_t kUdpChecksum = 6;
static_assert(kUdpChecksum + 2 == kUdpHeaderBytes);

// OnesComplementSum: the RFC 1071 sum of the 20-byte IPv4 header, in the byte
// order the words lie in memory (the one's-complement sum commutes with byte
// swapping, so no per-word swap is needed). `checksum_word` is what to count
// for the checksum field: the field itself when verifying, 0 when computing.
uint16_t OnesComplementSum(const uint8_t* ip, uint16_t checksum_word) {
  // Five 32-bit words, with the checksum field's half replaced; a 64-bit
  // accumulator cannot overflow, and folding reduces it to 16 bits.
  uint64_t sum = uint64_t{LoadNative32(ip)} + LoadNative32(ip + 4) + LoadNative16(ip + kIpTtl) +
                 checksum_word + LoadNative32(ip + 12) + LoadNative32(ip + 16);
  sum = (sum & 0xFFFFFFFF) + (sum >> 32);
  sum = (sum & 0xFFFFFFFF) + (sum >> 32);
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

// UdpPortOf: the port a frame with `job_seq` must carry, as a 32-bit value that
// exceeds 0xFFFF when base_port + queue does not fit a port (never matches).
uint32_t UdpPortOf(uint32_t job_seq, uint16_t base_port) {
  return uint32_t{base_port} + QueueOfSeq(job_seq);
}

DecodeError LengthError(size_t size) {
  return size < kFrameBytes ? DecodeError::kShortFrame : DecodeError::kLongFrame;
}

}  // namespace

namespace internal {

bool Ipv4ChecksumVerifies(const uint8_t* ipv4_header) {
  return OnesComplementSum(ipv4_header, LoadNative16(ipv4_header + kIpChecksum)) == 0xFFFF;
}

DecodeError ValidateFrameInOrder(std::span<const uint8_t> frame, uint16_t base_port) {
  if (frame.size() != kFrameBytes) return LengthError(frame.size());
  const uint8_t* p = frame.data();
  const uint8_t* ip = p + kIpv4Offset;
  const uint8_t* udp = p + kUdpOffset;
  if (LoadBig16(p + kEtherTypeOffset) != kEtherTypeIpv4) return DecodeError::kNotIpv4;
  if (ip[kIpVersionIhl] != kIpv4VersionIhl ||
      (LoadBig16(ip + kIpFlagsFragment) & kIpFragmentMask) != 0) {
    return DecodeError::kBadIpv4Header;
  }
  if (LoadBig16(ip + kIpTotalLength) != kIpv4TotalLength) return DecodeError::kBadIpv4TotalLength;
  if (!Ipv4ChecksumVerifies(ip)) return DecodeError::kBadIpv4Checksum;
  if (ip[kIpProtocol] != kIpProtocolUdp) return DecodeError::kNotUdp;
  if (LoadBig16(udp + kUdpLengthOffset) != kUdpLength) return DecodeError::kBadUdpLength;
  const uint32_t port = UdpPortOf(LoadBig32(p + kAtpOffset), base_port);
  if (LoadBig16(udp + kUdpSrcPort) != port || LoadBig16(udp + kUdpDstPort) != port) {
    return DecodeError::kBadUdpPort;
  }
  if (ip[kIpTos] != kTosEct0 && ip[kIpTos] != kTosCe) return DecodeError::kBadTos;
  return ValidateHeader(DecodeHeader(frame.subspan<kAtpOffset, kAtpHeaderBytes>()));
}

}  // namespace internal

uint16_t Ipv4HeaderChecksum(std::span<const uint8_t, kIpv4HeaderBytes> header) {
  // The sum is in memory byte order; HostToBig16 (its own inverse) turns it
  // into the value a big-endian load of the stored field would read.
  return HostToBig16(static_cast<uint16_t>(~OnesComplementSum(header.data(), 0)));
}

void EncodeFrame(const FrameFields& fields, const Payload& payload, uint16_t base_port,
                 std::span<uint8_t, kFrameBytes> out) {
  assert(ValidateHeader(fields.header) == DecodeError::kOk);
  assert(fields.ip_tos == kTosEct0 || fields.ip_tos == kTosCe);
  assert(uint32_t{base_port} + fields.header.queue() <= 0xFFFF);
  uint8_t* p = out.data();
  std::memcpy(p + kEthDstOffset, fields.dst_mac.bytes.data(), fields.dst_mac.bytes.size());
  std::memcpy(p + kEthSrcOffset, fields.src_mac.bytes.data(), fields.src_mac.bytes.size());
  StoreBig16(p + kEtherTypeOffset, kEtherTypeIpv4);

  uint8_t* ip = p + kIpv4Offset;
  ip[kIpVersionIhl] = kIpv4VersionIhl;
  ip[kIpTos] = fields.ip_tos;
  StoreBig16(ip + kIpTotalLength, kIpv4TotalLength);
  StoreBig16(ip + kIpIdentification, 0);
  StoreBig16(ip + kIpFlagsFragment, kIpDontFragment);
  ip[kIpTtl] = kDefaultTtl;
  ip[kIpProtocol] = kIpProtocolUdp;
  StoreBig32(ip + kIpSrc, fields.src_ip.value);
  StoreBig32(ip + kIpDst, fields.dst_ip.value);
  StoreBig16(ip + kIpChecksum,
             Ipv4HeaderChecksum(std::span<const uint8_t, kIpv4HeaderBytes>(ip, kIpv4HeaderBytes)));

  uint8_t* udp = p + kUdpOffset;
  const uint16_t port = static_cast<uint16_t>(base_port + fields.header.queue());
  StoreBig16(udp + kUdpSrcPort, port);
  StoreBig16(udp + kUdpDstPort, port);
  StoreBig16(udp + kUdpLengthOffset, kUdpLength);
  StoreBig16(udp + kUdpChecksum, 0);  // Optional in IPv4; the data is not checksummed.

  EncodeHeader(fields.header, out.subspan<kAtpOffset, kAtpHeaderBytes>());
  EncodePayload(payload, out.subspan<kPayloadOffset, kPayloadBytes>());
}

DecodeError ValidateFrame(std::span<const uint8_t> frame, uint16_t base_port) {
  // Fast path: the checks inline (frame_checks.h), each a branch that valid
  // frames always predict; only a bad frame pays for finding the first failure.
  if (frame.size() == kFrameBytes && internal::FrameChecksPass(frame.data(), base_port))
      [[likely]] {
    return DecodeError::kOk;
  }
  return internal::ValidateFrameInOrder(frame, base_port);
}

DecodeError DecodeFrame(std::span<const uint8_t> frame, uint16_t base_port, FrameFields* fields,
                        Payload* payload) {
  const DecodeError error = ValidateFrame(frame, base_port);
  if (error != DecodeError::kOk) return error;
  const uint8_t* p = frame.data();
  if (fields != nullptr) {
    const uint8_t* ip = p + kIpv4Offset;
    std::memcpy(fields->dst_mac.bytes.data(), p + kEthDstOffset, fields->dst_mac.bytes.size());
    std::memcpy(fields->src_mac.bytes.data(), p + kEthSrcOffset, fields->src_mac.bytes.size());
    fields->src_ip.value = LoadBig32(ip + kIpSrc);
    fields->dst_ip.value = LoadBig32(ip + kIpDst);
    fields->ip_tos = ip[kIpTos];
    fields->header = DecodeHeader(frame.subspan<kAtpOffset, kAtpHeaderBytes>());
  }
  if (payload != nullptr) {
    DecodePayload(frame.subspan<kPayloadOffset, kPayloadBytes>(), *payload);
  }
  return DecodeError::kOk;
}

bool IsAtpFrame(std::span<const uint8_t> frame, uint16_t base_port) {
  // Reads only what classification needs, each read bounds-checked. An IPv4
  // header with options still classifies by its UDP port (DecodeFrame then
  // rejects it), so a malformed ATP frame is dropped, not forwarded.
  if (frame.size() < kL2L4HeaderBytes) return false;
  const uint8_t* p = frame.data();
  const uint8_t* ip = p + kIpv4Offset;
  if (LoadBig16(p + kEtherTypeOffset) != kEtherTypeIpv4) return false;
  if ((ip[kIpVersionIhl] >> 4) != 4 || ip[kIpProtocol] != kIpProtocolUdp) return false;
  const size_t ihl_bytes = size_t{ip[kIpVersionIhl] & 0xFu} * 4;
  if (ihl_bytes < kIpv4HeaderBytes) return false;
  const size_t udp_offset = kIpv4Offset + ihl_bytes;
  if (frame.size() < udp_offset + kUdpHeaderBytes) return false;
  const uint32_t dst_port = LoadBig16(p + udp_offset + kUdpDstPort);
  return dst_port >= base_port && dst_port < uint32_t{base_port} + kMaxQueues;
}

}  // namespace atp::wire
