#include "lib/protocol/job_shape.h"

#include "gtest/gtest.h"

namespace atp::protocol {
namespace {

TEST(JobShapeTest, UniformShapeHasFullBitmaps) {
  JobShape shape = JobShape::Uniform(7, 2, 4);
  ASSERT_TRUE(shape.Validate().ok());
  EXPECT_EQ(shape.racks(), 2);
  EXPECT_EQ(shape.total_workers(), 8);
  EXPECT_EQ(shape.RackBitmap(1), 0xFu);
  EXPECT_EQ(shape.AllRacksBitmap(), 0x3u);
  EXPECT_EQ(JobShape::Uniform(7, 32, 32).AllRacksBitmap(), 0xFFFFFFFFu);
}

TEST(JobShapeTest, ValidateNamesTheField) {
  JobShape shape = JobShape::Uniform(0, 1, 1);
  EXPECT_NE(shape.Validate().message().find("JobShape.job"), std::string::npos);
  shape = JobShape::Uniform(1, 2, 33);
  EXPECT_NE(shape.Validate().message().find("workers_per_rack[0]"), std::string::npos);
  shape = JobShape::Uniform(1, 33, 1);
  EXPECT_FALSE(shape.Validate().ok());
  shape.workers_per_rack.clear();
  EXPECT_FALSE(shape.Validate().ok());
}

}  // namespace
}  // namespace atp::protocol
