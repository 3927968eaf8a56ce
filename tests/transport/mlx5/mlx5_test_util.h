// tests/transport/mlx5/mlx5_test_util.h: device capabilities and frames for
// the mlx5 tests.
#ifndef ATP_TESTS_TRANSPORT_MLX5_MLX5_TEST_UTIL_H_
#define ATP_TESTS_TRANSPORT_MLX5_MLX5_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "tests/transport/transport_test_util.h"
#include "transport/mlx5/geometry.h"

namespace atp::transport::mlx5::testing {

using ::atp::transport::testing::FrameBytes;
using ::atp::transport::testing::FrameSpec;

// ConnectX5Caps: what a ConnectX-5 reports (verbs and mlx5dv).
inline Mlx5DeviceCaps ConnectX5Caps() {
  Mlx5DeviceCaps caps;
  caps.max_qp_wr = 32768;
  caps.max_cqe = 4194303;
  caps.max_sge = 30;
  caps.max_tso_bytes = 262144;
  caps.raw_ip_checksum = true;
  caps.striding_rq = true;
  caps.min_log_stride_bytes = 6;
  caps.max_log_stride_bytes = 13;
  caps.min_log_strides_per_wqe = 9;
  caps.max_log_strides_per_wqe = 16;
  return caps;
}

inline DeviceAddress NodeA() {
  const wire::Ipv4Address ip = *wire::Ipv4Address::Parse("10.0.0.1");
  return DeviceAddress{ip, DefaultMacFor(ip)};
}
inline DeviceAddress NodeB() {
  const wire::Ipv4Address ip = *wire::Ipv4Address::Parse("10.0.0.2");
  return DeviceAddress{ip, DefaultMacFor(ip)};
}

// Frame: a valid ATP frame A -> B on queue `queue` (seq position `position`).
inline FrameBytes Frame(uint32_t queue, uint32_t position,
                        uint16_t base_port = wire::kDefaultBasePort) {
  return ::atp::transport::testing::MakeFrame(
      NodeA(), NodeB(), FrameSpec{wire::MakeSeq(queue, position), position}, base_port);
}

}  // namespace atp::transport::mlx5::testing

#endif  // ATP_TESTS_TRANSPORT_MLX5_MLX5_TEST_UTIL_H_
