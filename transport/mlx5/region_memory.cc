// transport/mlx5/region_memory.cc: anonymous mappings for registered regions.
#include "transport/mlx5/region_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace atp::transport::mlx5 {

absl::StatusOr<RegionMemory> RegionMemory::Allocate(size_t bytes, Mlx5Memory kind) {
  if (bytes == 0) return absl::InvalidArgumentError("RegionMemory: 0 bytes");
  const bool huge = kind == Mlx5Memory::kHugePages;
  const size_t page = huge ? kHugePageBytes : static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t size = (bytes + page - 1) / page * page;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  if (huge) flags |= MAP_HUGETLB;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) {
    const int error = errno;
    if (huge) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "no free 2 MiB hugepages for ", size, " bytes (mmap MAP_HUGETLB: ", std::strerror(error),
          "); reserve some with sysctl vm.nr_hugepages=N, or use Mlx5Memory::kHeap"));
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("mmap of ", size, " bytes: ", std::strerror(error)));
  }
  return RegionMemory(static_cast<uint8_t*>(p), size);
}

RegionMemory& RegionMemory::operator=(RegionMemory&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

RegionMemory::~RegionMemory() { Reset(); }

void RegionMemory::Reset() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace atp::transport::mlx5
