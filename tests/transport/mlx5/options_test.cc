// tests/transport/mlx5/options_test.cc: Mlx5Options::Validate names the field
// that is wrong.
#include <string>

#include "gtest/gtest.h"
#include "tests/transport/mlx5/mlx5_test_util.h"
#include "transport/mlx5/mlx5_device.h"

namespace atp::transport {
namespace {

Mlx5Options Valid() {
  Mlx5Options options;
  options.address = mlx5::testing::NodeA();
  return options;
}

// Names: the status is InvalidArgument and mentions `field`.
::testing::AssertionResult Names(const absl::Status& status, const std::string& field) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "not InvalidArgument: " << status;
  }
  if (std::string(status.message()).find(field) == std::string::npos) {
    return ::testing::AssertionFailure() << "does not name " << field << ": " << status;
  }
  return ::testing::AssertionSuccess();
}

TEST(Mlx5Options, DefaultsWithAnAddressAreValid) {
  EXPECT_TRUE(Valid().Validate().ok()) << Valid().Validate();
  Mlx5Options port_only;
  port_only.flow_match = FlowMatch::kPortOnly;
  EXPECT_TRUE(port_only.Validate().ok()) << "a port-only rule needs no address";
}

TEST(Mlx5Options, DeviceOptionsAreCheckedFirst) {
  Mlx5Options options = Valid();
  options.device.num_queues = 17;
  EXPECT_TRUE(Names(options.Validate(), "num_queues"));
}

TEST(Mlx5Options, EachFieldIsNamedWhenWrong) {
  Mlx5Options o = Valid();
  o.port = 0;
  EXPECT_TRUE(Names(o.Validate(), "port"));

  o = Valid();
  o.address.ipv4 = {};
  EXPECT_TRUE(Names(o.Validate(), "address.ipv4"));

  o = Valid();
  o.address.mac = *wire::MacAddress::Parse("01:00:5e:00:00:01");
  EXPECT_TRUE(Names(o.Validate(), "address.mac"));

  o = Valid();
  o.log_stride_bytes = 5;
  EXPECT_TRUE(Names(o.Validate(), "log_stride_bytes"));

  o = Valid();
  o.log_strides_per_wqe = 17;
  EXPECT_TRUE(Names(o.Validate(), "log_strides_per_wqe"));

  o = Valid();
  o.log_stride_bytes = 6;
  o.log_strides_per_wqe = 3;  // 8 x 64 = 512 holds a frame
  EXPECT_TRUE(o.Validate().ok());
  o.log_strides_per_wqe = 2;
  EXPECT_TRUE(Names(o.Validate(), "log_strides_per_wqe"));

  o = Valid();
  o.max_tso_segments = 0;
  EXPECT_TRUE(Names(o.Validate(), "max_tso_segments"));

  o = Valid();
  o.tso_staging_slots = o.device.tx_ring_frames + 1;
  EXPECT_TRUE(Names(o.Validate(), "tso_staging_slots"));

  o = Valid();
  o.max_tso_header = 41;
  EXPECT_TRUE(Names(o.Validate(), "max_tso_header = 41"));

  o = Valid();
  o.max_inline_frame = 600;
  EXPECT_TRUE(Names(o.Validate(), "max_inline_frame"));

  o = Valid();
  o.signal_every = o.device.tx_ring_frames / 2 + 1;
  EXPECT_TRUE(Names(o.Validate(), "signal_every"));
  o.signal_every = 0;
  EXPECT_TRUE(Names(o.Validate(), "signal_every"));

  o = Valid();
  o.device.tx_ring_frames = 16;
  o.device.max_burst = 32;
  o.device.rx_pool_frames = 64;
  o.device.tx_pool_frames = 64;
  o.signal_every = 8;
  o.tso_staging_slots = 16;
  EXPECT_TRUE(Names(o.Validate(), "max_burst"));
}

TEST(Mlx5Options, InlineFramesUpToAWholeAtpFrameAreAccepted) {
  Mlx5Options o = Valid();
  o.max_inline_frame = static_cast<uint32_t>(kFrameBytes);
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

TEST(Mlx5Options, EnumNamesAreStable) {
  EXPECT_EQ(Mlx5RxModeName(Mlx5RxMode::kMultiPacketRq), "multi_packet_rq");
  EXPECT_EQ(Mlx5RxModeName(Mlx5RxMode::kPlainCq), "plain_cq");
  EXPECT_EQ(Mlx5TxSegmentationName(Mlx5TxSegmentation::kHardwareTso), "hardware_tso");
  EXPECT_EQ(Mlx5TxSegmentationName(Mlx5TxSegmentation::kAuto), "auto");
}

}  // namespace
}  // namespace atp::transport
