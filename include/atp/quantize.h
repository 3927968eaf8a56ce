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
// The dispatching entry points pick an AVX-512 or AVX2 version at run time when the CPU has it and ATP_MAX_CPU_ISA does not cap it
// (atp/cpu_isa.h); each is bit-identical to the scalar one.
#ifndef ATP_QUANTIZE_H_
#define ATP_QUANTIZE_H_

#include <cstdint>
#include <span>

namespace atp {

// kDefaultScale: 1e8 gives 1e-8 resolution and room for sums up to about +-21.
inline constexpr double kDefaultScale = 1e8;

// kMinScale: the smallest scale a job may use, 2^31 / FLT_MAX (about
// 6.3e-30). Below it an int32 sum dequantizes past the largest float (to
// infinity) and every float quantizes inside the int32 range, so that a
// scale such as 1e-300 would round every value to 0 and deliver zeros.
inline constexpr double kMinScale = 2147483648.0 / 3.4028234663852886e38;

enum class QuantizeOutcome : uint8_t {
  kExact,       // every value finite and strictly inside the int32 range
  kNeedsFloat,  // a NaN, an infinity or a saturated value: send as fp
};

// Quantize: out[i] = saturate(round_half_even(double(in[i]) * scale)) for
// i < in.size(); the rest of out is left untouched. NaN quantizes to 0, +inf
// and anything rounding to >= INT32_MAX to INT32_MAX, -inf and anything
// rounding to <= INT32_MIN to INT32_MIN; any of these makes the outcome
// kNeedsFloat (a bound itself counts: the int path carries only values strictly
// inside the range, so a switch's saturated sum signals overflow).
// Preconditions, not checked (this is the per-fragment path):
//   - scale > 0 and finite;
//   - out.size() >= in.size();
//   - in and out do not overlap.
// Ties round to even whatever the FP rounding mode; the product itself is an
// ordinary IEEE multiply in the current mode (round-to-nearest unless the
// program changed it). Any thread; no allocation.
QuantizeOutcome Quantize(std::span<const float> in, double scale, std::span<int32_t> out);

// Dequantize: out[i] = float(double(in[i]) / scale) for i < in.size(): a
// division, one correctly rounded operation (see quantize.cc for why not a
// multiplication by 1 / scale). Same preconditions as Quantize. Any thread; no
// allocation.
void Dequantize(std::span<const int32_t> in, double scale, std::span<float> out);

// QuantizeToWire / DequantizeFromWire: the same two functions with the int32
// side in network byte order (big-endian), as an ATP frame's payload carries
// it (ATP-SPEC section 2): a worker quantizes its floats straight into the
// frame and dequantizes a parameter packet straight out of it, one pass each,
// with no host-order copy between. Same values, outcome and preconditions as
// Quantize / Dequantize; the int32 side is 4 * n bytes at any alignment
// (QuantizeToWire: out.size() >= 4 * in.size(), the rest untouched;
// DequantizeFromWire: converts out.size() values, in.size() >= 4 * out.size()).
QuantizeOutcome QuantizeToWire(std::span<const float> in, double scale, std::span<uint8_t> out);
void DequantizeFromWire(std::span<const uint8_t> in, double scale, std::span<float> out);

// ChosenQuantizeToWire / ChosenDequantizeFromWire: the kernels
// QuantizeToWire and DequantizeFromWire call (what MaxCpuIsa() allows, fixed
// for the process), for a caller on the per-packet path that keeps them
// rather than dispatching per call.
using QuantizeToWireFn = QuantizeOutcome (*)(std::span<const float> in, double scale,
                                             std::span<uint8_t> out);
QuantizeToWireFn ChosenQuantizeToWire();
using DequantizeFromWireFn = void (*)(std::span<const uint8_t> in, double scale,
                                      std::span<float> out);
DequantizeFromWireFn ChosenDequantizeFromWire();

// The implementations behind the dispatchers, for tests and benchmarks;
// bit-identical in every rounding mode. The AVX2 ones must only be called when
// HasAvx2() is true.
QuantizeOutcome QuantizeScalar(std::span<const float> in, double scale, std::span<int32_t> out);
QuantizeOutcome QuantizeAvx2(std::span<const float> in, double scale, std::span<int32_t> out);
void DequantizeScalar(std::span<const int32_t> in, double scale, std::span<float> out);
void DequantizeAvx2(std::span<const int32_t> in, double scale, std::span<float> out);
QuantizeOutcome QuantizeToWireScalar(std::span<const float> in, double scale,
                                     std::span<uint8_t> out);
QuantizeOutcome QuantizeToWireAvx2(std::span<const float> in, double scale, std::span<uint8_t> out);
void DequantizeFromWireScalar(std::span<const uint8_t> in, double scale, std::span<float> out);
void DequantizeFromWireAvx2(std::span<const uint8_t> in, double scale, std::span<float> out);
// 16 lanes per block (lib/quantize/quantize_avx512.cc and
// dequantize_avx512.cc say why). Must only be called when HasAvx512() is
// true; shorter than 16 values they run the AVX2 kernels.
QuantizeOutcome QuantizeAvx512(std::span<const float> in, double scale, std::span<int32_t> out);
QuantizeOutcome QuantizeToWireAvx512(std::span<const float> in, double scale,
                                     std::span<uint8_t> out);
void DequantizeAvx512(std::span<const int32_t> in, double scale, std::span<float> out);
void DequantizeFromWireAvx512(std::span<const uint8_t> in, double scale, std::span<float> out);
// HasAvx2 / HasAvx512: whether this CPU and OS support the kernels
// (CpuIsaOfThisCpu, atp/cpu_isa.h), whatever ATP_MAX_CPU_ISA says; the
// dispatchers above use only what MaxCpuIsa() allows.
bool HasAvx2();
bool HasAvx512();

}  // namespace atp

#endif  // ATP_QUANTIZE_H_
