// atp/quantize.h: float32 <-> int32 fixed point, as workers quantize gradients
// before the switches add them (ATP-SPEC section 5).
//
// q = saturate(round_half_even(double(x) * scale)). A fragment holding a NaN,
// an infinity or a value that hits the int32 bounds cannot be summed exactly
// as integers: it goes the float32 ("fp") path instead.
//
//   std::array<int32_t, 62> q;
//   if (atp::Quantize(values, scale, q) == atp::QuantizeOutcome::kNeedsFloat) send_fp();
//
// The dispatching entry points pick an AVX2 version at run time when the CPU
// has it; it is bit-identical to the scalar one.
#ifndef ATP_QUANTIZE_H_
#define ATP_QUANTIZE_H_

#include <cstdint>
#include <span>

namespace atp {

// kDefaultScale: 1e8 gives 1e-8 resolution and room for sums up to about +-21.
inline constexpr double kDefaultScale = 1e8;

enum class QuantizeOutcome : uint8_t {
  kExact,       // every value finite and strictly inside the int32 range
  kNeedsFloat,  // a NaN, an infinity or a saturated value: send as fp
};

// Quantize: out[i] = saturate(round(in[i] * scale)) for i < in.size(); out must
// be at least as long as in, and the rest of out is left untouched. NaN
// quantizes to 0. Any thread; no allocation.
QuantizeOutcome Quantize(std::span<const float> in, double scale, std::span<int32_t> out);

// Dequantize: out[i] = float(double(in[i]) / scale). out at least as long as in.
void Dequantize(std::span<const int32_t> in, double scale, std::span<float> out);

// The two implementations behind the dispatchers, for tests and benchmarks.
// The AVX2 ones must only be called when HasAvx2() is true.
QuantizeOutcome QuantizeScalar(std::span<const float> in, double scale, std::span<int32_t> out);
QuantizeOutcome QuantizeAvx2(std::span<const float> in, double scale, std::span<int32_t> out);
void DequantizeScalar(std::span<const int32_t> in, double scale, std::span<float> out);
void DequantizeAvx2(std::span<const int32_t> in, double scale, std::span<float> out);
bool HasAvx2();

}  // namespace atp

#endif  // ATP_QUANTIZE_H_
