#include "switch_emulator/pipeline/aggregator.h"

#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace atp::switch_emulator {
namespace {

constexpr size_t kLineBytes = 64;
constexpr size_t kHugePageBytes = size_t{2} << 20;
// From this size on, an array is rounded up to whole huge pages (wasting
// less than half of what it uses).
constexpr size_t kHugePagesFrom = size_t{1} << 20;

// Allocate: `bytes` of uninitialised memory as AggregatorArray's comment says.
// Throws std::bad_alloc, as std::vector would.
void* Allocate(size_t bytes) {
  const size_t alignment = bytes >= kHugePagesFrom ? kHugePageBytes : kLineBytes;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__)
  // A hint: if the kernel declines, the array works the same with small pages.
  if (alignment == kHugePageBytes) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

template <class T>
T* AllocateArray(size_t size) {
  static_assert(alignof(T) <= kLineBytes);
  T* array = static_cast<T*>(Allocate(size * sizeof(T)));
  std::uninitialized_default_construct_n(array, size);
  return array;
}

}  // namespace

void AggregatorArray::Free::operator()(void* p) const { std::free(p); }

AggregatorArray::AggregatorArray(size_t size)
    : size_(size),
      states_(AllocateArray<AggregatorState>(size)),
      values_(AllocateArray<AggregatorValues>(size)) {}

void AggregatorArray::FreeAll() {
  for (size_t i = 0; i < size_; ++i) state(i) = AggregatorState{};
}

}  // namespace atp::switch_emulator
