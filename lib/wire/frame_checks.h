// lib/wire/frame_checks.h: the frame checks, twice: one at a time in the order
// ATP-SPEC section 2 and atp/wire.h define (the first failure is reported),
// and fast, inline, for the per-packet path (scalar, AVX2 and AVX-512 forms:
// masked compares of the fixed header bytes, the checksum without folding,
// the header rules on raw words). Private to lib/wire, its forwarding
// elements (the switch pipeline) and the hosts' receive paths
// (ValidFrameHeader), and visible to tests and the fuzzer, which prove that
// they all agree on every input.
//
//   if (frame.size() == kFrameBytes && internal::FrameChecksPass(frame.data(), base_port)) {
//     ... the frame is valid: ValidateFrame(frame, base_port) == kOk ...
//   }
#ifndef ATP_LIB_WIRE_FRAME_CHECKS_H_
#define ATP_LIB_WIRE_FRAME_CHECKS_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "atp/wire.h"
#include "lib/wire/byte_order.h"
#include "lib/wire/header_layout.h"

namespace atp::wire::internal {

// ValidateFrameInOrder: what ValidateFrame returns, computed check by check:
// length, EtherType, IPv4 version/IHL and fragmentation, total length,
// checksum, protocol, UDP length, ports, TOS, then ValidateHeader.
DecodeError ValidateFrameInOrder(std::span<const uint8_t> frame, uint16_t base_port);

// Ipv4ChecksumVerifies: the RFC 1071 sum over the 20 header bytes, checksum
// field included, is 0xFFFF.
bool Ipv4ChecksumVerifies(const uint8_t* ipv4_header);

// --- The fast checks ----------------------------------------------------------

// FixedByte: a frame byte whose bits under `mask` must equal `value`.
struct FixedByte {
  uint8_t offset;
  uint8_t mask;
  uint8_t value;
};
static_assert((kTosEct0 | 1) == kTosCe, "ECT(0) and CE differ in the low bit only");

// kFixedBytes: every fixed bit of a valid frame outside the ATP header, but
// the UDP ports (which depend on seq). The bytes not listed (MACs, IPv4
// identification, TTL, checksum and addresses, UDP checksum) may hold anything.
inline constexpr FixedByte kFixedBytes[] = {
    {12, 0xFF, kEtherTypeIpv4 >> 8},
    {13, 0xFF, kEtherTypeIpv4 & 0xFF},  // EtherType IPv4
    {14, 0xFF, 0x45},                   // version 4, IHL 5
    {15, 0xFE, kTosEct0},               // TOS: ECT(0) or CE
    {16, 0xFF, kIpv4TotalLength >> 8},
    {17, 0xFF, kIpv4TotalLength & 0xFF},
    {20, 0x3F, 0},
    {21, 0xFF, 0},               // MF, offset zero; reserved bit, DF free
    {23, 0xFF, kIpProtocolUdp},  // protocol
    {38, 0xFF, kUdpLength >> 8},
    {39, 0xFF, kUdpLength & 0xFF},
};

// The fixed bytes as 64-byte images of the first 64 frame bytes: the mask,
// and the value under it.
inline constexpr size_t kFixedImageBytes = 64;
constexpr std::array<uint8_t, kFixedImageBytes> FixedImage(bool mask) {
  std::array<uint8_t, kFixedImageBytes> image{};
  for (const FixedByte& b : kFixedBytes) image[b.offset] = mask ? b.mask : b.value;
  return image;
}
alignas(64) inline constexpr std::array<uint8_t, kFixedImageBytes> kFixedMaskImage =
    FixedImage(true);
alignas(64) inline constexpr std::array<uint8_t, kFixedImageBytes> kFixedValueImage =
    FixedImage(false);

// NativeWord: image bytes at..at+7 as one uint64_t loaded from memory would
// hold them (no byte swap), so that fixed fields compare as masked words.
constexpr uint64_t NativeWord(const std::array<uint8_t, kFixedImageBytes>& image, size_t at) {
  uint64_t word = 0;
  for (size_t i = 0; i < 8; ++i) {
    const size_t shift = std::endian::native == std::endian::little ? 8 * i : 8 * (7 - i);
    word |= uint64_t{image[at + i]} << shift;
  }
  return word;
}

// The scalar checks compare three 8-byte windows, which cover every fixed byte.
inline constexpr size_t kFixedWindows[3] = {12, 20, 34};
struct FixedWindow {
  size_t at;
  uint64_t mask;
  uint64_t value;
};
constexpr FixedWindow MakeFixedWindow(size_t at) {
  return {at, NativeWord(kFixedMaskImage, at), NativeWord(kFixedValueImage, at)};
}
inline constexpr FixedWindow kFixedWindow0 = MakeFixedWindow(kFixedWindows[0]);
inline constexpr FixedWindow kFixedWindow1 = MakeFixedWindow(kFixedWindows[1]);
inline constexpr FixedWindow kFixedWindow2 = MakeFixedWindow(kFixedWindows[2]);
constexpr bool WindowsCoverFixedBytes() {
  for (const FixedByte& b : kFixedBytes) {
    bool covered = false;
    for (size_t w : kFixedWindows) covered = covered || (b.offset >= w && b.offset < w + 8);
    if (!covered || (b.value & ~b.mask) != 0) return false;
  }
  return true;
}
static_assert(WindowsCoverFixedBytes());

// The UDP ports: two big-endian 16-bit words at kUdpOffset, each base_port +
// queue of seq.
inline constexpr size_t kPortsAt = kUdpOffset;
static_assert(kPortsAt + 4 <= kFixedWindows[2] + 8 && kPortsAt >= kFixedWindows[2]);

// HeaderWords: the 16 ATP header bytes of a frame as host-order words, read
// once: the fast checks and the forwarding element that runs them share them.
struct HeaderWords {
  uint32_t job_seq;  // job << 24 | seq
  uint32_t bitmap0;
  uint32_t bitmap1;
  uint16_t fan_flags;   // fanIn0 - 1, fanIn1 - 1 and the six flags (header_layout.h)
  uint16_t aggregator;  // the aggregator index

  uint8_t job() const { return static_cast<uint8_t>(job_seq >> kJobShift); }
};

// LoadHeaderWordsAt: the header words of the 16 ATP header bytes at `header`.
inline HeaderWords LoadHeaderWordsAt(const uint8_t* header) {
  const auto big32 = [header](size_t at) { return LoadBig32(header + at); };
  static_assert(kFanFlagsOffset + 2 == kAggregatorOffset, "one word holds both");
  const uint32_t fan_flags_aggregator = big32(kFanFlagsOffset);
  return {big32(kJobSeqOffset), big32(kBitmap0Offset), big32(kBitmap1Offset),
          static_cast<uint16_t>(fan_flags_aggregator >> 16),
          static_cast<uint16_t>(fan_flags_aggregator)};
}

// LoadHeaderWords: the header words of the frame at `frame` (reads bytes 42..57).
inline HeaderWords LoadHeaderWords(const uint8_t* frame) {
  return LoadHeaderWordsAt(frame + kAtpOffset);
}

// DecodeHeaderWords: *h = the AtpHeader the words hold (DecodeHeader's one
// home), written field by field: a receive path's header then never passes
// through a whole-struct temporary, whose copy the compiler makes with loads
// wider than the stores that built it (a store-forwarding stall per frame,
// about a fifth of a pulled fragment's cost).
inline void DecodeHeaderWords(const HeaderWords& w, AtpHeader* h) {
  h->job = w.job();
  h->seq = w.job_seq & kSeqMask;
  h->bitmap0 = w.bitmap0;
  h->bitmap1 = w.bitmap1;
  h->fan_in0 = static_cast<uint8_t>(((w.fan_flags >> kFanIn0Shift) & kFanInFieldMask) + 1);
  h->fan_in1 = static_cast<uint8_t>(((w.fan_flags >> kFanIn1Shift) & kFanInFieldMask) + 1);
  h->edge = (w.fan_flags & kEdgeBit) != 0;
  h->resend = (w.fan_flags & kResendBit) != 0;
  h->collision = (w.fan_flags & kCollisionBit) != 0;
  h->ecn = (w.fan_flags & kEcnBit) != 0;
  h->ack = (w.fan_flags & kAckBit) != 0;
  h->fp = (w.fan_flags & kFpBit) != 0;
  h->aggregator = w.aggregator;
}

// Ipv4ChecksumPasses: Ipv4ChecksumVerifies(frame + kIpv4Offset) for a frame
// whose version/IHL byte is 0x45, without folding. The 16-bit one's-complement
// sum of the header (checksum field included) must be 0xFFFF, i.e. the plain
// sum T of its ten 16-bit words must be a non-zero multiple of 0xFFFF
// (folding carries preserves T modulo 0xFFFF and never folds a non-zero T to
// zero). Summing five 32-bit words instead changes T by multiples of 2^16 - 1
// only (2^16 = 1 mod 0xFFFF), and so does the host byte order (a byte swap
// multiplies a word by 2^8 modulo 0xFFFF, which is invertible). T != 0 needs
// no check: the version byte 0x45 is part of it.
inline bool Ipv4ChecksumPasses(const uint8_t* frame) {
  const auto load32 = [frame](size_t at) {
    uint32_t v;
    std::memcpy(&v, frame + kIpv4Offset + at, sizeof(v));
    return uint64_t{v};
  };
  return (load32(0) + load32(4) + load32(8) + load32(12) + load32(16)) % 0xFFFF == 0;
}

// PortsMatch: both UDP ports are base_port + queue of seq (a sum beyond 0xFFFF
// never matches).
inline bool PortsMatch(const uint8_t* frame, uint16_t base_port, uint32_t job_seq) {
  const uint32_t ports = LoadBig32(frame + kPortsAt);
  const uint32_t port = uint32_t{base_port} + QueueOfSeq(job_seq);
  return ports == port * 0x10001u && (port >> 16) == 0;
}

// FrameChecksPass: whether a frame of exactly kFrameBytes bytes at `frame`,
// whose header words are `h` (LoadHeaderWords(frame)), passes every check of
// ValidateFrame (that is, ValidateFrame == kOk): the fixed bytes as three
// masked 8-byte compares, then ports, checksum and header rules, each a
// branch that a stream of valid frames always predicts. Callers check the
// length first. Reads bytes 12..41 besides `h`.
inline bool FrameChecksPass(const uint8_t* frame, uint16_t base_port, const HeaderWords& h) {
  const auto window_mismatch = [frame](const FixedWindow& w) {
    uint64_t v;
    std::memcpy(&v, frame + w.at, sizeof(v));
    return (v & w.mask) ^ w.value;
  };
  const uint64_t mismatch = window_mismatch(kFixedWindow0) | window_mismatch(kFixedWindow1) |
                            window_mismatch(kFixedWindow2);
  return mismatch == 0 && PortsMatch(frame, base_port, h.job_seq) && Ipv4ChecksumPasses(frame) &&
         RawHeaderIsValid(h.job_seq, h.bitmap0, h.bitmap1, h.fan_flags);
}

// FrameChecksPass: the same, reading the header words itself.
inline bool FrameChecksPass(const uint8_t* frame, uint16_t base_port) {
  return FrameChecksPass(frame, base_port, LoadHeaderWords(frame));
}

// ValidFrameHeader: ValidateFrame(frame, base_port) == kOk, and then *header
// = DecodeHeader of its ATP header, from one read of the header words: for a
// host's receive path, which needs both for every frame. On false, *header
// is untouched (ValidateFrame says why).
inline bool ValidFrameHeader(std::span<const uint8_t> frame, uint16_t base_port,
                             AtpHeader* header) {
  if (frame.size() != kFrameBytes) return false;
  const HeaderWords words = LoadHeaderWords(frame.data());
  if (!FrameChecksPass(frame.data(), base_port, words)) return false;
  DecodeHeaderWords(words, header);
  return true;
}

#if defined(__x86_64__)
// FrameChecksPassAvx2: FrameChecksPass with the fixed bytes 12..43 compared as
// one 32-byte masked compare. Only where the CPU has AVX2; inlines only into
// code compiled for it. Reads bytes 12..43 besides `h`.
__attribute__((target("avx2"))) inline bool FrameChecksPassAvx2(const uint8_t* frame,
                                                                uint16_t base_port,
                                                                const HeaderWords& h) {
  constexpr size_t kAt = kFixedWindows[0];
  static_assert(kAt + 32 <= kFixedImageBytes && kFixedWindows[2] + 8 <= kAt + 32);
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(frame + kAt));
  const __m256i mask =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kFixedMaskImage.data() + kAt));
  const __m256i value =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kFixedValueImage.data() + kAt));
  const __m256i equal = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, mask), value);
  return _mm256_movemask_epi8(equal) == -1 && PortsMatch(frame, base_port, h.job_seq) &&
         Ipv4ChecksumPasses(frame) &&
         RawHeaderIsValid(h.job_seq, h.bitmap0, h.bitmap1, h.fan_flags);
}

// The fixed bytes and the UDP ports as one 64-byte mask; the ports' value is
// filled in per frame (16-bit words 17 and 18 of the image).
constexpr std::array<uint8_t, kFixedImageBytes> FixedAndPortsMaskImage() {
  std::array<uint8_t, kFixedImageBytes> image = kFixedMaskImage;
  for (size_t i = kPortsAt; i < kPortsAt + 4; ++i) image[i] = 0xFF;
  return image;
}
alignas(64) inline constexpr std::array<uint8_t, kFixedImageBytes> kFixedAndPortsMaskImage =
    FixedAndPortsMaskImage();
inline constexpr __mmask32 kPortWords = (1u << (kPortsAt / 2)) | (1u << (kPortsAt / 2 + 1));
static_assert(kPortsAt % 2 == 0);

// FrameChecksPassAvx512: FrameChecksPass with every fixed byte and both ports
// compared in one 64-byte masked compare. Only where the CPU has AVX-512 F and
// BW; inlines only into code compiled for them. Reads bytes 0..63.
__attribute__((target("avx512f,avx512bw"))) inline bool FrameChecksPassAvx512(
    const uint8_t* frame, uint16_t base_port, const HeaderWords& h) {
  const uint32_t port = uint32_t{base_port} + QueueOfSeq(h.job_seq);
  // The ports as they lie in memory: big-endian.
  const auto port_in_memory = static_cast<int16_t>(HostToBig16(static_cast<uint16_t>(port)));
  const __m512i bytes = _mm512_loadu_si512(frame);
  const __m512i mask = _mm512_load_si512(kFixedAndPortsMaskImage.data());
  const __m512i value = _mm512_mask_set1_epi16(_mm512_load_si512(kFixedValueImage.data()),
                                               kPortWords, port_in_memory);
  // (bytes & mask) ^ value: truth table 0x6A over (bytes, mask, value).
  const __m512i diff = _mm512_ternarylogic_epi32(bytes, mask, value, 0x6A);
  return _mm512_test_epi8_mask(diff, diff) == 0 && (port >> 16) == 0 && Ipv4ChecksumPasses(frame) &&
         RawHeaderIsValid(h.job_seq, h.bitmap0, h.bitmap1, h.fan_flags);
}
#endif  // defined(__x86_64__)

}  // namespace atp::wire::internal

#endif  // ATP_LIB_WIRE_FRAME_CHECKS_H_
