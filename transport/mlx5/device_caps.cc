// transport/mlx5/device_caps.cc: reading the device's limits.
#include "transport/mlx5/device_caps.h"

#include <algorithm>
#include <cstdint>

namespace atp::transport::mlx5 {
namespace {

constexpr uint32_t kRawPacketQpBit = 1u << IBV_QPT_RAW_PACKET;

uint32_t NonNegative(int value) { return static_cast<uint32_t>(std::max(value, 0)); }

}  // namespace

Mlx5DeviceCaps CapsFromVerbs(const ibv_device_attr_ex& attr, const mlx5dv_context& dv) {
  Mlx5DeviceCaps caps;
  caps.max_qp_wr = NonNegative(attr.orig_attr.max_qp_wr);
  caps.max_cqe = NonNegative(attr.orig_attr.max_cqe);
  caps.max_sge = NonNegative(attr.orig_attr.max_sge);
  if ((attr.tso_caps.supported_qpts & kRawPacketQpBit) != 0) {
    caps.max_tso_bytes = attr.tso_caps.max_tso;
  }
  caps.raw_ip_checksum = (attr.raw_packet_caps & IBV_RAW_PACKET_CAP_IP_CSUM) != 0 ||
                         (attr.orig_attr.device_cap_flags & IBV_DEVICE_RAW_IP_CSUM) != 0;
  if ((dv.comp_mask & MLX5DV_CONTEXT_MASK_STRIDING_RQ) != 0 &&
      (dv.striding_rq_caps.supported_qpts & kRawPacketQpBit) != 0) {
    caps.striding_rq = true;
    caps.min_log_stride_bytes = dv.striding_rq_caps.min_single_stride_log_num_of_bytes;
    caps.max_log_stride_bytes = dv.striding_rq_caps.max_single_stride_log_num_of_bytes;
    caps.min_log_strides_per_wqe = dv.striding_rq_caps.min_single_wqe_log_num_of_strides;
    caps.max_log_strides_per_wqe = dv.striding_rq_caps.max_single_wqe_log_num_of_strides;
  }
  return caps;
}

}  // namespace atp::transport::mlx5
