// tests/fuzz/fuzz_check.h: what the libFuzzer targets share: FuzzCheck aborts
// (which libFuzzer reports as a crash, with the input saved) when an
// invariant does not hold, naming the target and the invariant.
#ifndef ATP_TESTS_FUZZ_FUZZ_CHECK_H_
#define ATP_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

namespace atp::fuzz {

inline void FuzzCheck(bool ok, const char* target, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "%s: invariant broken: %s\n", target, what);
    std::abort();
  }
}

}  // namespace atp::fuzz

#endif  // ATP_TESTS_FUZZ_FUZZ_CHECK_H_
