#include "lib/quantize/fragment_dequantizer.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "atp/cpu_isa.h"
#include "atp/quantize.h"

#if defined(__x86_64__) || defined(__i386__)
#include "lib/quantize/dequantize_reciprocal.h"
#endif

namespace atp {
namespace {

// NearestFloatReciprocal: the float nearest 1 / b, whatever the thread's
// rounding mode: a guess and its two neighbours, ranked by |1 - b * f|, which
// double arithmetic computes exactly (b * f has at most 48 significant bits
// and lies in [1/2, 2], where 1 - b * f is exact). 1 / b is never a tie.
float NearestFloatReciprocal(float b) {
  const auto error = [b](float f) { return std::fabs(1.0 - double{b} * double{f}); };
  const float guess = static_cast<float>(1.0 / double{b});
  float best = guess;
  for (const float f : {std::nextafter(guess, 0.0f), std::nextafter(guess, 2.0f * guess)}) {
    if (error(f) < error(best)) best = f;
  }
  return best;
}

}  // namespace

FragmentDequantizer::FragmentDequantizer(double scale) : scale_(scale), whole_(nullptr) {
  constants_.scale = scale;
  // In the constructing thread's rounding mode: within an ulp of 1 / scale in
  // any mode, far inside the kernels' 64-ulp margin (dequantize_reciprocal.h).
  constants_.inverse = 1.0 / scale;
#if defined(__x86_64__) || defined(__i386__)
  // The scale's half of ReciprocalApplies; the rounding mode is the calling
  // thread's, so the kernel asks for it on every call (one register read).
  constants_.by_multiply = scale >= 0x1p-1000 && scale <= 0x1p1000;
  constants_.exponents_in_range = quantize_internal::ExponentsInRange(constants_.inverse);
  // Range first: converting a double beyond the float range is undefined.
  if (scale >= 0x1p-24 && scale <= 0x1p64 && double{static_cast<float>(scale)} == scale) {
    const auto float_scale = static_cast<float>(scale);
    constants_.float_quotient = true;
    constants_.float_scale = float_scale;
    constants_.float_reciprocal = NearestFloatReciprocal(float_scale);
  }
  if (MaxCpuIsa() >= CpuIsa::kAvx512) whole_ = &quantize_internal::KeepAndDequantizeFragmentAvx512;
#endif
}

void FragmentDequantizer::KeepAndDequantize(std::span<const uint8_t, kBytes> payload,
                                            std::span<float> out,
                                            std::span<uint8_t, kKeptBytes> keep) const {
  assert(reinterpret_cast<uintptr_t>(keep.data()) % kKeptAlignment == 0);
  if (out.size() == kValues && whole_ != nullptr) {
    whole_(payload.data(), constants_, out.data(), keep.data());
    return;
  }
  // A shorter fragment (an operation's last) or no whole-fragment kernel:
  // the dispatched kernel, then the copy.
  static const DequantizeFromWireFn dequantize = ChosenDequantizeFromWire();
  dequantize(payload, scale_, out.first(std::min(out.size(), kValues)));
  std::memcpy(keep.data(), payload.data(), kBytes);
  std::memset(keep.data() + kBytes, 0, kKeptBytes - kBytes);
}

}  // namespace atp
