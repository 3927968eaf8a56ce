// lib/worker/fragment_codec.h: the data part of a worker's fragments and
// parameter packets (ATP-SPEC sections 2 and 5): float32 values to a 62-value
// payload (quantized int32, or float32 bits on the overflow path) and a
// parameter packet's payload back to float32.
//
//   wire::Payload payload;
//   FragmentEncoding enc = EncodeFragment(values, scale, FragmentEncoding::kInteger, payload);
//   header.fp = enc == FragmentEncoding::kFloat;
//   ...
//   DecodeResult(parameter_packet, scale, output.subspan(offset, n));
//
// Pure functions: any thread, no allocation. Encoding the same values twice
// gives the same payload (atp::Quantize is deterministic and its AVX2 and
// scalar versions agree bit for bit), which is what lets the engine resend a
// fragment by encoding the caller's input again instead of keeping a copy.
#ifndef ATP_LIB_WORKER_FRAGMENT_CODEC_H_
#define ATP_LIB_WORKER_FRAGMENT_CODEC_H_

#include <cstdint>
#include <span>

#include "atp/wire.h"
#include "lib/quantize/fragment_quantizer.h"

namespace atp::worker {

// FragmentEncoding: how a fragment's payload holds its values.
enum class FragmentEncoding : uint8_t {
  kInteger,  // int32 round(x * scale), the switches can add it
  kFloat,    // float32 bits (`fp`): NaN, infinity, saturation, or an overflow request
};

// EncodeFragment: writes `values` (at most 62) into `payload`, zero-padding
// the rest. With `wanted` = kInteger it quantizes and falls back to float32
// when a value is a NaN, an infinity or saturates; with kFloat it always
// writes float32 bits. Returns the encoding used (the message's `fp` flag).
FragmentEncoding EncodeFragment(std::span<const float> values, double scale,
                                FragmentEncoding wanted, wire::Payload& payload);

// EncodeFragmentToWire: the same with the job's FragmentQuantizer (its
// scale), written straight into a frame's 248 payload bytes in network byte
// order (quantized in one pass, no host-order copy): what the I/O loop sends.
// Once per fragment sent: a whole fragment that quantizes exactly (nearly
// every one) is handled here, inlined, with the kernel as its only call.
FragmentEncoding EncodeFragmentToWireGeneral(std::span<const float> values,
                                             const FragmentQuantizer& quantizer,
                                             FragmentEncoding wanted,
                                             std::span<uint8_t, wire::kPayloadBytes> payload);
inline FragmentEncoding EncodeFragmentToWire(std::span<const float> values,
                                             const FragmentQuantizer& quantizer,
                                             FragmentEncoding wanted,
                                             std::span<uint8_t, wire::kPayloadBytes> payload) {
  if (wanted == FragmentEncoding::kInteger && values.size() == wire::kValuesPerFragment &&
      quantizer.ToWire(values, payload) == QuantizeOutcome::kExact) [[likely]] {
    return FragmentEncoding::kInteger;
  }
  // Anything else (rare: a shorter last fragment, float32 asked for, or a
  // value that needs it, whose quantization the general path redoes).
  return EncodeFragmentToWireGeneral(values, quantizer, wanted, payload);
}

// DecodeResult: the first out.size() (at most 62) values of a parameter
// packet: int32 sums dequantized with `scale`, or float32 bits when `fp`.
void DecodeResult(const wire::AtpMessage& message, double scale, std::span<float> out);
// DecodeResult: the same, from a payload and the header's `fp` flag.
void DecodeResult(bool fp, const wire::Payload& payload, double scale, std::span<float> out);

// DecodeResultFromWire: the same, read straight from a received frame's 248
// payload bytes (network byte order); `fp` is the header's flag.
void DecodeResultFromWire(bool fp, std::span<const uint8_t, wire::kPayloadBytes> payload,
                          double scale, std::span<float> out);

}  // namespace atp::worker

#endif  // ATP_LIB_WORKER_FRAGMENT_CODEC_H_
