// lib/quantize/fragment_quantizer.h: a job's quantization of whole
// fragments, straight into a frame's payload, for the worker's per-fragment
// path (lib/worker). Private to the library.
//
//   const FragmentQuantizer quantize(scale);  // once per job
//   if (quantize.ToWire(values, payload) == QuantizeOutcome::kNeedsFloat) ...
//
// Same bytes and outcome as atp::QuantizeToWire (bit-identical, every
// rounding mode). What it adds, measured on the push path (bench/RESULTS.md,
// "Single precision where it is exact, and the replay copy around the
// cache"): the kernel and the scale's checks are chosen once, not per
// fragment, and a whole fragment of small products (the common case:
// gradients) is four blocks of the AVX-512 kernel's single-precision path
// with one branch, without the general kernel's chunking and bounds.
#ifndef ATP_LIB_QUANTIZE_FRAGMENT_QUANTIZER_H_
#define ATP_LIB_QUANTIZE_FRAGMENT_QUANTIZER_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "atp/quantize.h"

namespace atp {

class FragmentQuantizer {
 public:
  // A fragment's payload: 62 big-endian int32 (ATP-SPEC section 2).
  static constexpr size_t kValues = 62;
  static constexpr size_t kBytes = kValues * sizeof(int32_t);

  // scale: as atp::Quantize's (> 0, finite); the kernels are what
  // MaxCpuIsa() allows (atp/cpu_isa.h).
  explicit FragmentQuantizer(double scale);

  // ToWire: QuantizeToWire(in, scale, out) for in.size() <= kValues: the
  // first 4 * in.size() bytes of `out` written, the rest untouched. Any
  // thread; no allocation. Once per fragment sent: defined here, so that
  // the kernel is the only call.
  QuantizeOutcome ToWire(std::span<const float> in, std::span<uint8_t, kBytes> out) const {
    if (in.size() == kValues && whole_ != nullptr) [[likely]] {
      return whole_(in.data(), scale_, float_scale_, out.data());
    }
    return general_(in, scale_, out);
  }

  double scale() const { return scale_; }

  // A kernel for a whole fragment (in.size() == kValues); float_scale is the
  // scale as a float when it is exactly one, else 0.
  using WholeFragmentKernel = QuantizeOutcome (*)(const float* in, double scale, float float_scale,
                                                  uint8_t* out);

 private:
  double scale_;
  float float_scale_;
  QuantizeToWireFn general_;   // any length
  WholeFragmentKernel whole_;  // null: no such kernel on this CPU
};

namespace quantize_internal {
// The AVX-512 kernel (quantize_avx512.cc); HasAvx512() only.
QuantizeOutcome QuantizeFragmentToWireAvx512(const float* in, double scale, float float_scale,
                                             uint8_t* out);
}  // namespace quantize_internal

}  // namespace atp

#endif  // ATP_LIB_QUANTIZE_FRAGMENT_QUANTIZER_H_
