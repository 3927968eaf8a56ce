// transport/mlx5/region_memory.h: memory for regions a queue registers with
// the NIC (receive buffers, TSO staging): page-aligned, zeroed, from the heap
// or from 2 MiB hugepages. Needs no device. Private to transport/mlx5.
//
//   ATP_ASSIGN_OR_RETURN(RegionMemory memory, RegionMemory::Allocate(bytes,
//   Mlx5Memory::kHugePages)); ibv_reg_mr(pd, memory.data(), memory.size(), IBV_ACCESS_LOCAL_WRITE);
#ifndef ATP_TRANSPORT_MLX5_REGION_MEMORY_H_
#define ATP_TRANSPORT_MLX5_REGION_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "absl/status/statusor.h"
#include "transport/mlx5/mlx5_device.h"

namespace atp::transport::mlx5 {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

class RegionMemory {
 public:
  // Allocate: at least `bytes` (rounded up to the page size; 2 MiB with
  // hugepages). Fails with kResourceExhausted, saying so, when no hugepages
  // are free (vm.nr_hugepages) or memory runs out.
  static absl::StatusOr<RegionMemory> Allocate(size_t bytes, Mlx5Memory kind);

  RegionMemory() = default;
  RegionMemory(RegionMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  RegionMemory& operator=(RegionMemory&& other) noexcept;
  RegionMemory(const RegionMemory&) = delete;
  RegionMemory& operator=(const RegionMemory&) = delete;
  ~RegionMemory();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<uint8_t> bytes() const { return {data_, size_}; }

 private:
  RegionMemory(uint8_t* data, size_t size) : data_(data), size_(size) {}
  void Reset();

  uint8_t* data_ = nullptr;  // owned: an anonymous mapping
  size_t size_ = 0;
};

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_REGION_MEMORY_H_
