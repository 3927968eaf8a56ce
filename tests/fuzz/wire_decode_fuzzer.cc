// libFuzzer target for the wire codec: arbitrary bytes decoded as a frame and
// as a message. Whatever is accepted must re-encode to the same bytes, and the
// fast ValidateFrame must agree with the check-by-check reference. Any
// disagreement aborts with a message.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DLIBATP_BUILD_FUZZERS=ON \
//       -DLIBATP_BUILD_BENCHMARKS=OFF
//   ninja -C build-fuzz wire_decode_fuzzer
//   mkdir -p /tmp/fuzz-work
//   build-fuzz/tests/fuzz/wire_decode_fuzzer -max_total_time=60 /tmp/fuzz-work tests/fuzz/corpus
//
// tests/fuzz/corpus holds the golden vectors (tests/vectors/atp-frames.json) as
// binary seeds: each frame (*.frame) and, for valid ones, its 264-byte ATP
// message (*.message). libFuzzer writes new inputs to the first directory only.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "atp/wire.h"
#include "lib/wire/frame_checks.h"
#include "lib/wire/frame_view.h"

namespace atp::wire {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "wire_decode_fuzzer: %s\n", what);
    std::abort();
  }
}

// Bytes the decoder ignores or that depend on them, which EncodeFrame writes
// with fixed values: IPv4 identification, flags/fragment word (DF may be
// either), TTL, header checksum; UDP checksum.
bool IgnoredByDecoder(size_t offset) {
  return (offset >= kIpv4Offset + 4 && offset < kIpv4Offset + 9) ||  // id, flags, TTL
         offset == kIpv4Offset + 10 || offset == kIpv4Offset + 11 ||  // checksum
         offset == kUdpOffset + 6 || offset == kUdpOffset + 7;        // UDP checksum
}

void FuzzFrame(std::span<const uint8_t> in, uint16_t base_port) {
  FrameFields fields;
  Payload payload;
  const DecodeError error = DecodeFrame(in, base_port, &fields, &payload);
  Check(ValidateFrame(in, base_port) == error, "ValidateFrame disagrees with DecodeFrame");
  Check(internal::ValidateFrameInOrder(in, base_port) == error,
        "ValidateFrame disagrees with the check-by-check reference");
  const bool is_atp = IsAtpFrame(in, base_port);
  if (error != DecodeError::kOk) return;
  Check(is_atp, "an accepted frame is not classified as ATP");

  std::array<uint8_t, kFrameBytes> again{};
  EncodeFrame(fields, payload, base_port, again);
  for (size_t i = 0; i < kFrameBytes; ++i) {
    Check(IgnoredByDecoder(i) || again[i] == in[i], "re-encoded frame differs from the input");
  }
  FrameFields fields2;
  Payload payload2;
  Check(DecodeFrame(again, base_port, &fields2, &payload2) == DecodeError::kOk,
        "re-encoded frame is rejected");
  Check(fields2.header == fields.header && payload2 == payload && fields2.ip_tos == fields.ip_tos,
        "re-encoded frame decodes differently");

  // FrameView reads the same fields, and CE marking keeps the frame valid.
  std::array<uint8_t, kFrameBytes> copy;
  std::memcpy(copy.data(), in.data(), kFrameBytes);
  FrameView view(copy.data());
  Check(view.job() == fields.header.job && view.seq() == fields.header.seq &&
            view.bitmap0() == fields.header.bitmap0 && view.bitmap1() == fields.header.bitmap1 &&
            view.fan_in0() == fields.header.fan_in0 && view.fan_in1() == fields.header.fan_in1 &&
            view.aggregator() == fields.header.aggregator,
        "FrameView reads other fields than DecodeFrame");
  view.MarkCongestionExperienced();
  Check(ValidateFrame(copy, base_port) == DecodeError::kOk && view.ip_tos() == kTosCe,
        "CE marking broke the frame");
}

void FuzzMessage(std::span<const uint8_t> in) {
  AtpMessage message;
  const DecodeError error = DecodeMessage(in, &message);
  if (in.size() == kMessageBytes) {
    const AtpHeader header = DecodeHeader(in.first<kAtpHeaderBytes>());
    Check(ValidateHeader(header) == error, "DecodeMessage disagrees with ValidateHeader");
  }
  if (error != DecodeError::kOk) return;
  std::array<uint8_t, kMessageBytes> again{};
  EncodeMessage(message, again);
  Check(std::memcmp(again.data(), in.data(), kMessageBytes) == 0,
        "re-encoded message differs from the input");
}

// FuzzMessageInFrame: a message-sized input wrapped in valid L2-L4 headers for
// its queue: the frame verdict must be the message verdict, so the header
// rules get fuzzed through the frame path without the fuzzer having to find
// a valid IPv4 checksum.
void FuzzMessageInFrame(std::span<const uint8_t> in) {
  if (in.size() != kMessageBytes) return;
  FrameFields fields;
  fields.header.job = 1;
  fields.header.seq = DecodeHeader(in.first<kAtpHeaderBytes>()).seq;
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  std::array<uint8_t, kFrameBytes> frame{};
  EncodeFrame(fields, Payload{}, kDefaultBasePort, frame);
  std::memcpy(frame.data() + kAtpOffset, in.data(), kMessageBytes);
  AtpMessage message;
  Check(DecodeMessage(in, &message) == DecodeFrame(frame, kDefaultBasePort, nullptr, nullptr),
        "frame and message verdicts differ for the same ATP bytes");
  FuzzFrame(frame, kDefaultBasePort);
}

}  // namespace
}  // namespace atp::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  atp::wire::FuzzFrame(in, atp::wire::kDefaultBasePort);
  atp::wire::FuzzMessage(in);
  atp::wire::FuzzMessageInFrame(in);
  // The ATP part of a frame-sized input, as a UDP socket would deliver it.
  if (size >= atp::wire::kFrameBytes) {
    atp::wire::FuzzMessage(in.subspan(atp::wire::kAtpOffset, atp::wire::kMessageBytes));
    atp::wire::FuzzMessageInFrame(in.subspan(atp::wire::kAtpOffset, atp::wire::kMessageBytes));
  }
  return 0;
}
