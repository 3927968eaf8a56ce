#include "lib/worker/worker_queue_config.h"

#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "lib/worker/worker_queue_engine.h"
#include "tests/unit/worker/worker_test_util.h"

namespace atp::worker {
namespace {

using testing::SmallConfig;

// ExpectRejected: Validate and Create both fail, naming `field`.
void ExpectRejected(const WorkerQueueConfig& config, const std::string& field) {
  absl::Status status = config.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_NE(std::string(status.message()).find(field), std::string::npos)
      << "message '" << status.message() << "' does not name " << field;
  EXPECT_FALSE(WorkerQueueEngine::Create(config).ok());
}

TEST(WorkerQueueConfigTest, DefaultsWithAShapeAreValid) {
  WorkerQueueConfig config;
  config.shape = protocol::JobShape::Uniform(1, 2, 4);
  EXPECT_TRUE(config.Validate().ok()) << config.Validate();
  EXPECT_TRUE(SmallConfig().Validate().ok());
}

TEST(WorkerQueueConfigTest, RejectsAnInvalidShape) {
  WorkerQueueConfig config = SmallConfig();
  config.shape.job = 0;
  ExpectRejected(config, "WorkerQueueConfig.shape");
}

TEST(WorkerQueueConfigTest, RejectsAPlaceOutsideTheShape) {
  WorkerQueueConfig config = SmallConfig();
  config.shape = protocol::JobShape::Uniform(1, 2, 4);
  config.rack = 2;
  ExpectRejected(config, "WorkerQueueConfig.rack");
  config.rack = -1;
  ExpectRejected(config, "WorkerQueueConfig.rack");
  config.rack = 1;
  config.worker_in_rack = 4;
  ExpectRejected(config, "WorkerQueueConfig.worker_in_rack");
  config.worker_in_rack = 3;
  EXPECT_TRUE(config.Validate().ok());
}

TEST(WorkerQueueConfigTest, RejectsQueueBeyond15) {
  WorkerQueueConfig config = SmallConfig();
  config.queue = 16;
  ExpectRejected(config, "WorkerQueueConfig.queue");
  config.queue = 15;
  EXPECT_TRUE(config.Validate().ok());
}

TEST(WorkerQueueConfigTest, SlotsMustBeAPowerOfTwoInRange) {
  WorkerQueueConfig config = SmallConfig(16, 8);
  config.slots = 0;
  ExpectRejected(config, "WorkerQueueConfig.slots");
  config.slots = 24;
  ExpectRejected(config, "WorkerQueueConfig.slots");
  config.slots = kMaxSlots * 2;
  ExpectRejected(config, "WorkerQueueConfig.slots");
  config.slots = kMaxSlots;
  EXPECT_TRUE(config.Validate().ok());
}

TEST(WorkerQueueConfigTest, InitialWindowMustFitTheSlots) {
  WorkerQueueConfig config = SmallConfig(16, 8);
  config.initial_window = 17;
  ExpectRejected(config, "WorkerQueueConfig.initial_window");
  config.initial_window = 0;
  ExpectRejected(config, "WorkerQueueConfig.initial_window");
  config.initial_window = 16;
  EXPECT_TRUE(config.Validate().ok());
}

TEST(WorkerQueueConfigTest, ScaleMustBePositiveAndFinite) {
  WorkerQueueConfig config = SmallConfig();
  config.scale = 0;
  ExpectRejected(config, "WorkerQueueConfig.scale");
  config.scale = std::numeric_limits<double>::infinity();
  ExpectRejected(config, "WorkerQueueConfig.scale");
}

TEST(WorkerQueueConfigTest, RtoFieldsAreChecked) {
  WorkerQueueConfig config = SmallConfig();
  config.rto_floor = TimeDelta::Zero();
  ExpectRejected(config, "WorkerQueueConfig.rto_floor");
  config = SmallConfig();
  config.initial_rto = testing::Us(10);
  ExpectRejected(config, "WorkerQueueConfig.initial_rto");
  config = SmallConfig();
  config.max_rto = testing::Ms(2);
  ExpectRejected(config, "WorkerQueueConfig.max_rto");
  config = SmallConfig();
  config.rto_backoff = 0.9;
  ExpectRejected(config, "WorkerQueueConfig.rto_backoff");
  config = SmallConfig();
  config.rto_jitter_percent = 101;
  ExpectRejected(config, "WorkerQueueConfig.rto_jitter_percent");
}

TEST(WorkerQueueConfigTest, DefaultRtoIs200UsFloor100MsCeilingAndLossesHalveTheWindow) {
  WorkerQueueConfig config;
  EXPECT_EQ(config.rto_floor, testing::Us(200));
  EXPECT_EQ(config.max_rto, testing::Ms(100));
  EXPECT_EQ(config.loss_response, CongestionController::LossResponse::kHalve);
  EXPECT_EQ(config.cc_config().loss_response, config.loss_response);
}

TEST(WorkerQueueConfigTest, LossResponseMustBeKnown) {
  WorkerQueueConfig config = SmallConfig();
  config.loss_response = static_cast<CongestionController::LossResponse>(9);
  ExpectRejected(config, "WorkerQueueConfig.loss_response");
}

}  // namespace
}  // namespace atp::worker
