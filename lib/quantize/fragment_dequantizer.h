// lib/quantize/fragment_dequantizer.h: a job's dequantization of whole
// parameter packets, straight from a frame's payload, for the worker's
// per-packet path (lib/worker). Private to the library.
//
//   const FragmentDequantizer dequantize(scale);  // once per job
//   dequantize.KeepAndDequantize(payload, output.subspan(offset, n), kept_copy);
//
// Same values as atp::DequantizeFromWire (bit-identical, every rounding
// mode). What it adds, measured on the pull path (bench/RESULTS.md, "Single
// precision where it is exact, and the replay copy around the cache"):
//   - the scale's constants (its reciprocal, which kernel variant applies)
//     and the kernel are chosen once, not per packet, and a whole fragment
//     of small sums (the common case: gradients) takes the single-precision
//     path (dequantize_avx512.cc);
//   - the payload's wire bytes are copied to `keep` from the same loads (the
//     worker keeps each result for replays to a restarted PS): no second
//     pass over the frame. The copy is read only for those rare replays, so
//     it goes with non-temporal stores, whole cache lines: to memory, without
//     fetching its lines first and without taking cache from the output
//     (bench/RESULTS.md measured the copy at 8 ns of a pulled fragment with
//     ordinary stores).
#ifndef ATP_LIB_QUANTIZE_FRAGMENT_DEQUANTIZER_H_
#define ATP_LIB_QUANTIZE_FRAGMENT_DEQUANTIZER_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "lib/quantize/fragment_quantizer.h"

namespace atp {

class FragmentDequantizer {
 public:
  // A fragment's payload, as FragmentQuantizer's.
  static constexpr size_t kValues = FragmentQuantizer::kValues;
  static constexpr size_t kBytes = FragmentQuantizer::kBytes;
  // A kept copy: the payload's kBytes, then zeros to a whole number of cache
  // lines, at a 64-byte aligned address.
  static constexpr size_t kKeptAlignment = 64;
  static constexpr size_t kKeptBytes = 4 * kKeptAlignment;
  static_assert(kKeptBytes >= kBytes && kKeptBytes - kBytes < kKeptAlignment);

  // scale: as atp::Dequantize's (> 0, finite); the kernel is what
  // MaxCpuIsa() allows (atp/cpu_isa.h).
  explicit FragmentDequantizer(double scale);

  // KeepAndDequantize: out[i] = float(double(q[i]) / scale) for the first
  // out.size() (at most kValues) big-endian int32 q of `payload`, and all
  // kBytes of `payload` copied to the start of `keep`, the rest of `keep`
  // zeroed. `keep` is kKeptAlignment-aligned and overlaps neither of the
  // others. The stores to `keep` are non-temporal: the calling thread sees
  // them at once, another thread only after an _mm_sfence() on this one
  // (C++ fences do not order them on x86). No allocation.
  void KeepAndDequantize(std::span<const uint8_t, kBytes> payload, std::span<float> out,
                         std::span<uint8_t, kKeptBytes> keep) const;

  double scale() const { return scale_; }

  // The scale's constants, for the kernels (fragment_dequantizer.cc).
  struct Constants {
    double scale = 0;
    double inverse = 0;               // 1 / scale
    bool by_multiply = false;         // the reciprocal applies (dequantize_reciprocal.h)
    bool exponents_in_range = false;  // and needs no per-lane exponent check
    // Small ints may be dequantized in single precision (dequantize_avx512.cc
    // says why that is exact): scale is a float in [2^-24, 2^64].
    bool float_quotient = false;
    float float_scale = 0;       // scale, exactly
    float float_reciprocal = 0;  // the float nearest 1 / scale
  };
  // A kernel for a whole fragment (out.size() == kValues).
  using WholeFragmentKernel = void (*)(const uint8_t* payload, const Constants& constants,
                                       float* out, uint8_t* keep);

 private:
  double scale_;
  Constants constants_;
  WholeFragmentKernel whole_;  // null: no such kernel on this CPU
};

namespace quantize_internal {
// The AVX-512 kernel (dequantize_avx512.cc); HasAvx512() only.
void KeepAndDequantizeFragmentAvx512(const uint8_t* payload,
                                     const FragmentDequantizer::Constants& constants, float* out,
                                     uint8_t* keep);
}  // namespace quantize_internal

}  // namespace atp

#endif  // ATP_LIB_QUANTIZE_FRAGMENT_DEQUANTIZER_H_
