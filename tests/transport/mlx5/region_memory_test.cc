// tests/transport/mlx5/region_memory_test.cc: memory for registered regions.
#include "transport/mlx5/region_memory.h"

#include <string>

#include "gtest/gtest.h"

namespace atp::transport::mlx5 {
namespace {

TEST(RegionMemory, HeapMemoryIsPageAlignedZeroedAndRoundedUp) {
  absl::StatusOr<RegionMemory> memory = RegionMemory::Allocate(5000, Mlx5Memory::kHeap);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(memory->data()) % 4096, 0u);
  EXPECT_EQ(memory->size(), 8192u);
  for (size_t i = 0; i < memory->size(); ++i) ASSERT_EQ(memory->data()[i], 0) << i;
  RegionMemory moved = std::move(*memory);
  EXPECT_EQ(memory->data(), nullptr);
  EXPECT_EQ(moved.size(), 8192u);
}

TEST(RegionMemory, HugePagesEitherWorkOrSayHowToGetThem) {
  absl::StatusOr<RegionMemory> memory = RegionMemory::Allocate(4096, Mlx5Memory::kHugePages);
  if (memory.ok()) {
    EXPECT_EQ(memory->size(), kHugePageBytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(memory->data()) % kHugePageBytes, 0u);
    return;
  }
  EXPECT_EQ(memory.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(memory.status().message()).find("vm.nr_hugepages"), std::string::npos)
      << memory.status();
}

TEST(RegionMemory, ZeroBytesIsAnError) {
  EXPECT_FALSE(RegionMemory::Allocate(0, Mlx5Memory::kHeap).ok());
}

}  // namespace
}  // namespace atp::transport::mlx5
