// Properties over thousands of random headers, payloads and frames (fixed
// seeds): encode/decode round trips, detection of IPv4 header corruption,
// bounds safety on truncation, and the fast ValidateFrame agreeing with the
// check-by-check reference on corrupted frames.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/wire/frame_checks.h"
#include "tests/unit/wire/wire_test_util.h"

namespace atp::wire {
namespace {

using testing::Frame;
using testing::Rng;

constexpr int kCases = 5000;

TEST(WireProperty, HeaderEncodeThenDecodeIsIdentity) {
  Rng rng(1);
  for (int i = 0; i < kCases; ++i) {
    const AtpHeader h = testing::RandomValidHeader(rng);
    ASSERT_EQ(ValidateHeader(h), DecodeError::kOk);
    std::array<uint8_t, kAtpHeaderBytes> bytes{};
    EncodeHeader(h, bytes);
    ASSERT_EQ(DecodeHeader(bytes), h);
  }
}

TEST(WireProperty, MessageEncodeThenDecodeIsIdentity) {
  Rng rng(2);
  for (int i = 0; i < kCases; ++i) {
    const AtpMessage message{testing::RandomValidHeader(rng), testing::RandomPayload(rng)};
    std::array<uint8_t, kMessageBytes> bytes{};
    EncodeMessage(message, bytes);
    AtpMessage decoded;
    ASSERT_EQ(DecodeMessage(bytes, &decoded), DecodeError::kOk);
    ASSERT_EQ(decoded.header, message.header);
    ASSERT_EQ(decoded.payload, message.payload);
  }
}

TEST(WireProperty, FrameEncodeThenDecodeIsIdentity) {
  Rng rng(3);
  for (int i = 0; i < kCases; ++i) {
    const FrameFields fields = testing::RandomFields(rng);
    const Payload payload = testing::RandomPayload(rng);
    const auto base_port = static_cast<uint16_t>(testing::Uniform(rng, 0, 0xFFFF - kMaxQueues + 1));
    const Frame frame = testing::Encode(fields, payload, base_port);
    FrameFields decoded;
    Payload decoded_payload;
    ASSERT_EQ(DecodeFrame(frame, base_port, &decoded, &decoded_payload), DecodeError::kOk);
    ASSERT_EQ(decoded.dst_mac, fields.dst_mac);
    ASSERT_EQ(decoded.src_mac, fields.src_mac);
    ASSERT_EQ(decoded.src_ip, fields.src_ip);
    ASSERT_EQ(decoded.dst_ip, fields.dst_ip);
    ASSERT_EQ(decoded.ip_tos, fields.ip_tos);
    ASSERT_EQ(decoded.header, fields.header);
    ASSERT_EQ(decoded_payload, payload);
    ASSERT_TRUE(IsAtpFrame(frame, base_port));
    // Re-encoding what was decoded gives the same bytes.
    ASSERT_EQ(testing::Encode(decoded, decoded_payload, base_port), frame);
  }
}

TEST(WireProperty, EverySingleBitFlipInTheIpv4HeaderIsDetected) {
  Rng rng(4);
  for (int i = 0; i < 500; ++i) {
    const Frame frame = testing::Encode(testing::RandomFields(rng), testing::RandomPayload(rng));
    for (size_t bit = 0; bit < kIpv4HeaderBytes * 8; ++bit) {
      Frame corrupt = frame;
      corrupt[kIpv4Offset + bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      const DecodeError error = ValidateFrame(corrupt, kDefaultBasePort);
      ASSERT_NE(error, DecodeError::kOk) << "bit " << bit;
      ASSERT_EQ(error, internal::ValidateFrameInOrder(corrupt, kDefaultBasePort));
    }
  }
}

TEST(WireProperty, EveryTruncationIsShortAndReadsNothingBeyondIt) {
  // Each prefix is copied into a heap buffer of exactly its size, so that a
  // read past the end trips AddressSanitizer in the sanitizer build.
  Rng rng(5);
  for (int i = 0; i < 20; ++i) {
    const Frame frame = testing::Encode(testing::RandomFields(rng), testing::RandomPayload(rng));
    for (size_t n = 0; n < kFrameBytes; ++n) {
      const std::vector<uint8_t> prefix(frame.begin(), frame.begin() + n);
      FrameFields fields;
      Payload payload;
      ASSERT_EQ(DecodeFrame(prefix, kDefaultBasePort, &fields, &payload), DecodeError::kShortFrame);
      ASSERT_EQ(ValidateFrame(prefix, kDefaultBasePort), DecodeError::kShortFrame);
      ASSERT_EQ(IsAtpFrame(prefix, kDefaultBasePort), n >= kL2L4HeaderBytes) << n;
      const std::vector<uint8_t> message(frame.begin() + kAtpOffset,
                                         frame.begin() + kAtpOffset + std::min(n, kMessageBytes));
      AtpMessage decoded;
      if (message.size() < kMessageBytes) {
        ASSERT_EQ(DecodeMessage(message, &decoded), DecodeError::kShortFrame);
      }
    }
  }
}

TEST(WireProperty, FastValidationAgreesWithTheReferenceOnCorruptFrames) {
  // Random byte edits anywhere in the headers, including the ATP header that
  // the IPv4 checksum does not cover: ValidateFrame (one branch for a valid
  // frame) reports exactly what the check-by-check reference reports.
  Rng rng(6);
  int accepted = 0;
  for (int i = 0; i < 50 * kCases; ++i) {
    Frame frame = testing::Encode(testing::RandomFields(rng), {});
    const int edits = static_cast<int>(testing::Uniform(rng, 1, 3));
    for (int e = 0; e < edits; ++e) {
      // Mostly the ATP header (its rules are the subtle ones), sometimes L2-L4.
      const size_t at = testing::Coin(rng) ? testing::Uniform(rng, kAtpOffset, kPayloadOffset - 1)
                                           : testing::Uniform(rng, 0, kPayloadOffset - 1);
      frame[at] = static_cast<uint8_t>(rng());
    }
    if (testing::Coin(rng)) testing::RefreshIpv4Checksum(frame);
    const DecodeError fast = ValidateFrame(frame, kDefaultBasePort);
    ASSERT_EQ(fast, internal::ValidateFrameInOrder(frame, kDefaultBasePort)) << i;
    ASSERT_EQ(DecodeFrame(frame, kDefaultBasePort, nullptr, nullptr), fast);
    if (fast == DecodeError::kOk) ++accepted;
  }
  EXPECT_GT(accepted, 0) << "some edits (MACs, addresses, payload-free fields) stay valid";
}

TEST(WireProperty, FastValidationAgreesWithTheReferenceOnEveryHeaderByteValue) {
  // Every value of every header byte (0..57), in random valid frames with
  // random base ports (some so high that base_port + queue leaves the port
  // range), the IPv4 checksum left stale or refreshed: the inline fast checks
  // (internal::FrameChecksPass, behind ValidateFrame) accept exactly what the
  // check-by-check reference accepts, and report the same first failure. The
  // AVX2 and AVX-512 forms of the fast checks (used by the switch pipeline's
  // vector datapaths) agree too, where the CPU has them, and so does the
  // hosts' ValidFrameHeader, whose header is DecodeHeader's.
  Rng rng(8);
  for (int i = 0; i < 12; ++i) {
    const uint16_t base_port =
        static_cast<uint16_t>(i % 3 == 0 ? testing::Uniform(rng, 0xFFFF - 2 * kMaxQueues, 0xFFFF)
                                         : testing::Uniform(rng, 0, 0xFFFF - kMaxQueues + 1));
    FrameFields fields = testing::RandomFields(rng);
    const Frame valid = testing::Encode(
        fields, testing::RandomPayload(rng),
        static_cast<uint16_t>(std::min<uint32_t>(base_port, 0xFFFF - fields.header.queue())));
    for (size_t at = 0; at < kPayloadOffset; ++at) {
      for (uint32_t value = 0; value <= 0xFF; ++value) {
        Frame frame = valid;
        frame[at] = static_cast<uint8_t>(value);
        if (value % 2 == 0) testing::RefreshIpv4Checksum(frame);
        const DecodeError reference = internal::ValidateFrameInOrder(frame, base_port);
        ASSERT_EQ(ValidateFrame(frame, base_port), reference) << "byte " << at << " = " << value;
        const bool ok = reference == DecodeError::kOk;
        const internal::HeaderWords h = internal::LoadHeaderWords(frame.data());
        ASSERT_EQ(internal::FrameChecksPass(frame.data(), base_port), ok)
            << "byte " << at << " = " << value;
        // The hosts' one-read form: the same verdict, and DecodeHeader's header.
        AtpHeader header;
        ASSERT_EQ(internal::ValidFrameHeader(frame, base_port, &header), ok)
            << "byte " << at << " = " << value;
        if (ok) {
          ASSERT_EQ(header, DecodeHeader(std::span<const uint8_t, kFrameBytes>(frame)
                                             .subspan<kAtpOffset, kAtpHeaderBytes>()))
              << "byte " << at << " = " << value;
        }
#if defined(__x86_64__)
        if (__builtin_cpu_supports("avx2")) {
          ASSERT_EQ(internal::FrameChecksPassAvx2(frame.data(), base_port, h), ok)
              << "AVX2: byte " << at << " = " << value;
        }
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
          ASSERT_EQ(internal::FrameChecksPassAvx512(frame.data(), base_port, h), ok)
              << "AVX-512: byte " << at << " = " << value;
        }
#endif
      }
    }
  }
}

TEST(WireProperty, FastChecksumVerificationMatchesRfc1071) {
  // The fast path's checksum test (a non-zero multiple of 0xFFFF) against the
  // folded RFC 1071 sum, on random headers, including the two encodings of
  // one's-complement zero in the checksum field.
  Rng rng(9);
  for (int i = 0; i < 200000; ++i) {
    Frame frame = testing::Encode(testing::RandomFields(rng), {});
    if (testing::Coin(rng)) {
      for (size_t b = kIpv4Offset + 10; b < kIpv4Offset + 12; ++b) {
        frame[b] = testing::Coin(rng) ? 0x00 : 0xFF;
      }
    } else if (testing::Coin(rng)) {
      frame[kIpv4Offset + testing::Uniform(rng, 10, 19)] ^= static_cast<uint8_t>(rng());
    }
    const bool reference = internal::Ipv4ChecksumVerifies(frame.data() + kIpv4Offset);
    ASSERT_EQ(internal::FrameChecksPass(frame.data(), kDefaultBasePort), reference) << i;
  }
}

TEST(WireProperty, ValidateHeaderAgreesWithFrameValidationOnRandomHeaders) {
  // Arbitrary (mostly invalid) 16-byte headers inside an otherwise valid frame.
  Rng rng(7);
  for (int i = 0; i < 20 * kCases; ++i) {
    Frame frame = testing::Encode(testing::SampleFields(), {});
    for (size_t b = kAtpOffset; b < kPayloadOffset; ++b) frame[b] = static_cast<uint8_t>(rng());
    if (testing::Coin(rng)) frame[kAtpOffset + 12] &= 0x07;  // small fan-ins: more bitmap errors
    // Keep the ports right so that the header rules decide.
    const uint32_t queue = frame[kAtpOffset + 1] >> 4;
    testing::Put16(frame, testing::kSrcPortAt, static_cast<uint16_t>(kDefaultBasePort + queue));
    testing::Put16(frame, testing::kDstPortAt, static_cast<uint16_t>(kDefaultBasePort + queue));
    const AtpHeader h = DecodeHeader(std::span(frame).subspan<kAtpOffset, kAtpHeaderBytes>());
    ASSERT_EQ(ValidateFrame(frame, kDefaultBasePort), ValidateHeader(h)) << i;
  }
}

}  // namespace
}  // namespace atp::wire
