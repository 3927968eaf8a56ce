#include "lib/quantize/fragment_quantizer.h"

#include <cfloat>

#include "atp/cpu_isa.h"

namespace atp {

FragmentQuantizer::FragmentQuantizer(double scale)
    : scale_(scale), float_scale_(0), general_(ChosenQuantizeToWire()), whole_(nullptr) {
  // A normal float, exactly: what the single-precision path needs (range
  // first: converting a double beyond the float range is undefined).
  if (scale >= 0x1p-126 && scale <= FLT_MAX && double{static_cast<float>(scale)} == scale) {
    float_scale_ = static_cast<float>(scale);
  }
#if defined(__x86_64__) || defined(__i386__)
  if (MaxCpuIsa() >= CpuIsa::kAvx512) whole_ = &quantize_internal::QuantizeFragmentToWireAvx512;
#endif
}

}  // namespace atp
