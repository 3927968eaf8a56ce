// transport/mlx5/verbs_handles.h: owning handles for verbs objects, so that
// every path out of the control path (errors included) destroys what it made,
// in reverse order of creation. Private to transport/mlx5.
//
//   VerbsPtr<ibv_pd> pd(ibv_alloc_pd(context.get()));
//   if (!pd) return VerbsError(errno, "ibv_alloc_pd");
#ifndef ATP_TRANSPORT_MLX5_VERBS_HANDLES_H_
#define ATP_TRANSPORT_MLX5_VERBS_HANDLES_H_

#include <infiniband/verbs.h>

#include <memory>

namespace atp::transport::mlx5 {

// VerbsDeleter: the destroy call of each verbs object type.
struct VerbsDeleter {
  void operator()(ibv_context* p) const { ibv_close_device(p); }
  void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
  void operator()(ibv_cq* p) const { ibv_destroy_cq(p); }
  void operator()(ibv_qp* p) const { ibv_destroy_qp(p); }
  void operator()(ibv_wq* p) const { ibv_destroy_wq(p); }
  void operator()(ibv_rwq_ind_table* p) const { ibv_destroy_rwq_ind_table(p); }
  void operator()(ibv_flow* p) const { ibv_destroy_flow(p); }
  void operator()(ibv_mr* p) const { ibv_dereg_mr(p); }
};

template <typename T>
using VerbsPtr = std::unique_ptr<T, VerbsDeleter>;

// DeviceList: ibv_get_device_list's array, freed with ibv_free_device_list.
struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*, DeviceListDeleter>;

}  // namespace atp::transport::mlx5

#endif  // ATP_TRANSPORT_MLX5_VERBS_HANDLES_H_
