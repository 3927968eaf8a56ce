// transport/mlx5/device_caps.h: Mlx5DeviceCaps from what verbs and mlx5dv
// report. Pure (no device: takes the query results). Private to transport/mlx5.
//
//   ibv_query_device_ex(context, nullptr, &attr);
//   mlx5dv_query_device(context, &dv);   // dv.comp_mask = MLX5DV_CONTEXT_MASK_STRIDING_RQ
//   Mlx5DeviceCaps caps = CapsFromVerbs(attr, dv);
#ifndef ATP_TRANSPORT_MLX5_DEVICE_CAPS_H_
#define ATP_TRANSPORT_MLX5_DEVICE_CAPS_H_

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include "transport/mlx5/geometry.h"

namespace atp::transport::mlx5 {

// CapsFromVerbs: TSO and the striding RQ count only when their supported_qpts
// include RAW_PACKET; the IP checksum from raw_packet_caps or the older
// IBV_DEVICE_RAW_IP_CSUM flag.
Mlx5DeviceCaps CapsFromVerbs(const ibv_device_attr_ex& attr, const mlx5dv_context& dv);

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_DEVICE_CAPS_H_
