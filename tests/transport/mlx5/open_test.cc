// tests/transport/mlx5/open_test.cc: opening the mlx5 backend where there is
// no device fails cleanly, with a status that says why. Runs with the unit
// tests; on a machine with a ConnectX NIC it checks the other errors only.
#include <string>

#include "gtest/gtest.h"
#include "tests/transport/mlx5/mlx5_test_util.h"
#include "transport/mlx5/mlx5_device.h"

namespace atp::transport {
namespace {

Mlx5Options Options() {
  Mlx5Options options;
  options.address = mlx5::testing::NodeA();
  return options;
}

TEST(OpenMlx5Device, InvalidOptionsFailBeforeTouchingAnyDevice) {
  Mlx5Options options = Options();
  options.signal_every = 0;
  absl::StatusOr<std::unique_ptr<Mlx5Device>> device = OpenMlx5Device(options);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(device.status().message()).find("signal_every"), std::string::npos);
}

TEST(OpenMlx5Device, WithoutRdmaDevicesFailsSayingSo) {
  absl::StatusOr<std::unique_ptr<Mlx5Device>> device = OpenMlx5Device(Options());
  if (device.ok()) GTEST_SKIP() << "an mlx5 device is present: " << (*device)->device_name();
  const std::string message(device.status().message());
  if (message.find("no RDMA devices") == std::string::npos) {
    GTEST_SKIP() << "RDMA devices exist here; opening failed for another reason: "
                 << device.status();
  }
  EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(message.find("ibv_get_device_list"), std::string::npos) << message;
}

TEST(OpenMlx5Device, AnUnknownDeviceNameIsNotFoundOrThereAreNoDevices) {
  Mlx5Options options = Options();
  options.device_name = "mlx5_does_not_exist";
  absl::StatusOr<std::unique_ptr<Mlx5Device>> device = OpenMlx5Device(options);
  ASSERT_FALSE(device.ok());
  const std::string message(device.status().message());
  if (device.status().code() == absl::StatusCode::kNotFound) {
    EXPECT_NE(message.find("mlx5_does_not_exist"), std::string::npos) << message;
  } else {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable) << device.status();
    EXPECT_NE(message.find("no RDMA devices"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace atp::transport
