#include "lib/worker/fragment_codec.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "atp/quantize.h"

namespace atp::worker {
namespace {

static_assert(sizeof(float) == sizeof(uint32_t), "fp payloads carry float32 bit patterns");
static_assert(sizeof(wire::Payload) == wire::kValuesPerFragment * sizeof(int32_t));
static_assert(FragmentQuantizer::kBytes == wire::kPayloadBytes);

// AsInt32: the payload's words as int32. Signed and unsigned variants of one
// type may alias each other ([basic.lval]), so this is a view, not a copy.
std::span<int32_t, wire::kValuesPerFragment> AsInt32(wire::Payload& payload) {
  return std::span<int32_t, wire::kValuesPerFragment>(reinterpret_cast<int32_t*>(payload.data()),
                                                      wire::kValuesPerFragment);
}
std::span<const int32_t, wire::kValuesPerFragment> AsInt32(const wire::Payload& payload) {
  return std::span<const int32_t, wire::kValuesPerFragment>(
      reinterpret_cast<const int32_t*>(payload.data()), wire::kValuesPerFragment);
}

// CopyFloatBits: n floats' bytes; nothing when n is 0 (an empty span's
// data() may be null, which memcpy must not be given).
void CopyFloatBits(void* to, const void* from, size_t n) {
  if (n > 0) std::memcpy(to, from, n * sizeof(float));
}

}  // namespace

FragmentEncoding EncodeFragment(std::span<const float> values, double scale,
                                FragmentEncoding wanted, wire::Payload& payload) {
  assert(values.size() <= wire::kValuesPerFragment);
  const size_t n = std::min(values.size(), wire::kValuesPerFragment);
  std::fill(payload.begin() + static_cast<ptrdiff_t>(n), payload.end(), 0u);
  if (wanted == FragmentEncoding::kInteger &&
      Quantize(values.first(n), scale, AsInt32(payload)) == QuantizeOutcome::kExact) {
    return FragmentEncoding::kInteger;
  }
  CopyFloatBits(payload.data(), values.data(), n);
  return FragmentEncoding::kFloat;
}

FragmentEncoding EncodeFragmentToWireGeneral(std::span<const float> values,
                                             const FragmentQuantizer& quantizer,
                                             FragmentEncoding wanted,
                                             std::span<uint8_t, wire::kPayloadBytes> payload) {
  assert(values.size() <= wire::kValuesPerFragment);
  const size_t n = std::min(values.size(), wire::kValuesPerFragment);
  std::fill(payload.begin() + static_cast<ptrdiff_t>(n * sizeof(int32_t)), payload.end(),
            uint8_t{0});
  if (wanted == FragmentEncoding::kInteger &&
      quantizer.ToWire(values.first(n), payload) == QuantizeOutcome::kExact) {
    return FragmentEncoding::kInteger;
  }
  // The float32 path is the rare one (NaN, infinity, saturation, overflow
  // requests): it goes through the wire codec's byte swap.
  wire::Payload bits{};
  CopyFloatBits(bits.data(), values.data(), n);
  wire::EncodePayload(bits, payload);
  return FragmentEncoding::kFloat;
}

void DecodeResult(const wire::AtpMessage& message, double scale, std::span<float> out) {
  DecodeResult(message.header.fp, message.payload, scale, out);
}

void DecodeResult(bool fp, const wire::Payload& payload, double scale, std::span<float> out) {
  assert(out.size() <= wire::kValuesPerFragment);
  const size_t n = std::min(out.size(), wire::kValuesPerFragment);
  if (fp) {
    CopyFloatBits(out.data(), payload.data(), n);
  } else {
    Dequantize(AsInt32(payload).first(n), scale, out.first(n));
  }
}

void DecodeResultFromWire(bool fp, std::span<const uint8_t, wire::kPayloadBytes> payload,
                          double scale, std::span<float> out) {
  assert(out.size() <= wire::kValuesPerFragment);
  const size_t n = std::min(out.size(), wire::kValuesPerFragment);
  if (fp) {
    wire::Payload bits;
    wire::DecodePayload(payload, bits);
    CopyFloatBits(out.data(), bits.data(), n);
  } else {
    // The kernel chosen once: DequantizeFromWire's dispatch on every packet
    // was 5% of the instructions of a pulled fragment.
    static const DequantizeFromWireFn dequantize = ChosenDequantizeFromWire();
    dequantize(payload, scale, out.first(n));
  }
}

}  // namespace atp::worker
