// lib/ps/incarnation_mix.h: the one bit mixer the PS hashes worker
// incarnations with (RunTracker's incarnation filters, OpLedger's run
// digest), so that incarnations that differ in a few bits (tests' small
// numbers, counters) get unrelated hashes. Private to lib/ps.
#ifndef ATP_LIB_PS_INCARNATION_MIX_H_
#define ATP_LIB_PS_INCARNATION_MIX_H_

#include <cstdint>

namespace atp::ps {

// MixIncarnation: SplitMix64's finalizer (a bijection on 64 bits).
inline uint64_t MixIncarnation(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

}  // namespace atp::ps

#endif  // ATP_LIB_PS_INCARNATION_MIX_H_
