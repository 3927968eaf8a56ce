// transport/mlx5/mlx5_device.cc: the control path of the mlx5 backend:
// finding and opening the device, reading its limits, and making each queue's
// verbs objects (send QP, striding or plain receive queue, indirection table,
// RSS QP, flow rule) and registered memory. The datapath is mlx5_queue.cc.
#include "transport/mlx5/mlx5_device.h"

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "atp/status_macros.h"
#include "transport/mlx5/device_caps.h"
#include "transport/mlx5/flow_rule.h"
#include "transport/mlx5/geometry.h"
#include "transport/mlx5/mlx5_queue.h"
#include "transport/mlx5/region_memory.h"
#include "transport/mlx5/verbs_handles.h"

namespace atp::transport {
namespace {

using mlx5::Mlx5DeviceCaps;
using mlx5::Mlx5Queue;
using mlx5::Mlx5QueueConfig;
using mlx5::ReceiveResources;
using mlx5::SendResources;
using mlx5::VerbsPtr;

// Plain receive buffers hold a whole 1500-MTU frame (and a VLAN tag), so that
// a longer-than-ATP frame arrives and is counted bad instead of failing its
// receive entry.
constexpr uint32_t kPlainRxBufferBytes = 1536;
// Any 40-byte Toeplitz key: the RSS QP has one work queue and hashes nothing.
constexpr uint8_t kRssKey[40] = {0x2c, 0xc6, 0x81, 0xd1, 0x5b, 0xdb, 0xf4, 0xf7, 0xfc, 0xa2,
                                 0x83, 0x19, 0xdb, 0x1a, 0x3e, 0x94, 0x6b, 0x9e, 0x38, 0xd9,
                                 0x2c, 0x9c, 0x03, 0xd1, 0xad, 0x99, 0x44, 0xa7, 0xd9, 0x56,
                                 0x3d, 0x59, 0x06, 0x3c, 0x25, 0xf3, 0xfc, 0x1f, 0xdc, 0x2a};

// VerbsError: a failed verbs call (errno `error`) as a status saying what to do.
absl::Status VerbsError(int error, absl::string_view what) {
  std::string message = absl::StrCat("mlx5: ", what, ": ", std::strerror(error));
  if (error == EPERM || error == EACCES) {
    absl::StrAppend(&message,
                    " (RAW_PACKET QPs and flow rules need CAP_NET_RAW: run as root or give the "
                    "binary cap_net_raw, and check the RLIMIT_MEMLOCK limit for registrations)");
    return absl::PermissionDeniedError(message);
  }
  if (error == ENOMEM) {
    absl::StrAppend(&message,
                    " (raise RLIMIT_MEMLOCK, e.g. ulimit -l unlimited, or shrink the rings)");
    return absl::ResourceExhaustedError(message);
  }
  if (error == EOPNOTSUPP || error == ENOTSUP || error == ENOSYS) {
    return absl::UnimplementedError(message);
  }
  return absl::Status(absl::ErrnoToStatusCode(error), message);
}

// ErrnoOr: errno, or EINVAL when a failing call left it 0.
int ErrnoOr() { return errno != 0 ? errno : EINVAL; }

std::string QueueWhat(uint32_t q, absl::string_view what) {
  return absl::StrCat("queue ", q, ": ", what);
}

absl::StatusOr<VerbsPtr<ibv_mr>> Register(ibv_pd* pd, void* data, size_t bytes, uint32_t q,
                                          absl::string_view what) {
  errno = 0;
  VerbsPtr<ibv_mr> mr(ibv_reg_mr(pd, data, bytes, IBV_ACCESS_LOCAL_WRITE));
  if (mr == nullptr) {
    return VerbsError(ErrnoOr(),
                      QueueWhat(q, absl::StrCat("ibv_reg_mr(", what, ", ", bytes, " bytes)")));
  }
  return mr;
}

// OpenContext: the device named `name` (empty: the first mlx5 device).
absl::StatusOr<VerbsPtr<ibv_context>> OpenContext(const std::string& name,
                                                  std::string* opened_name) {
  int count = 0;
  errno = 0;
  mlx5::DeviceList list(ibv_get_device_list(&count));
  if (list == nullptr) {
    // With no RDMA in the kernel (no ib_uverbs / mlx5_ib), libibverbs returns
    // NULL with ENOSYS rather than an empty list.
    const int error = ErrnoOr();
    return absl::UnavailableError(absl::StrCat(
        "mlx5: no RDMA devices (ibv_get_device_list: ", std::strerror(error),
        error == ENOSYS ? "; this kernel has no RDMA support: load ib_uverbs and mlx5_ib" : "",
        ")"));
  }
  if (count == 0) {
    return absl::UnavailableError(
        "mlx5: no RDMA devices (ibv_get_device_list found none: is mlx5_ib loaded, and is "
        "/dev/infiniband visible in this container?)");
  }
  std::vector<std::string> names;
  ibv_device* chosen = nullptr;
  for (int i = 0; i < count; ++i) {
    ibv_device* device = list.get()[i];
    names.emplace_back(ibv_get_device_name(device));
    if (chosen == nullptr && (name.empty() ? mlx5dv_is_supported(device) : names.back() == name)) {
      chosen = device;
    }
  }
  if (chosen == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "mlx5: ", name.empty() ? "no mlx5 device" : absl::StrCat("no device named ", name),
        " among the RDMA devices (", absl::StrJoin(names, ", "), ")"));
  }
  *opened_name = ibv_get_device_name(chosen);
  if (!mlx5dv_is_supported(chosen)) {
    return absl::FailedPreconditionError(
        absl::StrCat("mlx5: ", *opened_name, " is not an mlx5 (ConnectX) device"));
  }
  errno = 0;
  VerbsPtr<ibv_context> context(ibv_open_device(chosen));
  if (context == nullptr) {
    return VerbsError(ErrnoOr(), absl::StrCat("ibv_open_device(", *opened_name, ")"));
  }
  return context;
}

class Mlx5DeviceImpl final : public Mlx5Device {
 public:
  explicit Mlx5DeviceImpl(const Mlx5Options& options) : options_(options) {}

  ~Mlx5DeviceImpl() override {
    // Queues may hold each other's frames (a frame received on one, sent on
    // another): stop them all before destroying any.
    for (auto& queue : queues_) queue->Shutdown();
    queues_.clear();
  }

  std::string_view backend() const override { return "mlx5"; }
  const DeviceAddress& address() const override { return options_.address; }
  uint16_t base_port() const override { return options_.device.base_port; }
  uint32_t num_queues() const override { return static_cast<uint32_t>(queues_.size()); }
  Queue& queue(uint32_t index) override { return *queues_[index]; }
  const std::string& device_name() const override { return device_name_; }
  Mlx5RxMode rx_mode() const override { return rx_mode_; }
  Mlx5TxSegmentation tx_segmentation() const override { return tx_segmentation_; }

  absl::Status Open();

 private:
  absl::Status QueryDevice();
  absl::Status ChooseModes();
  absl::StatusOr<SendResources> MakeSendSide(uint32_t q);
  absl::StatusOr<ReceiveResources> MakeReceiveSide(uint32_t q);
  absl::Status MakeReceiveQueue(uint32_t q, ReceiveResources* receive);
  absl::Status MakeSteering(uint32_t q, ReceiveResources* receive);

  const Mlx5Options options_;
  std::string device_name_;
  Mlx5RxMode rx_mode_ = Mlx5RxMode::kPlainCq;
  Mlx5TxSegmentation tx_segmentation_ = Mlx5TxSegmentation::kSoftware;
  Mlx5DeviceCaps caps_;
  mlx5::MprqGeometry mprq_;
  mlx5::TsoPlan tso_;
  // Declared before the queues: destroyed after them.
  VerbsPtr<ibv_context> context_;
  VerbsPtr<ibv_pd> pd_;
  mlx5::LkeyTable lkeys_;
  std::vector<std::unique_ptr<Mlx5Queue>> queues_;
};

absl::Status Mlx5DeviceImpl::QueryDevice() {
  ibv_device_attr_ex attr{};
  if (int rc = ibv_query_device_ex(context_.get(), nullptr, &attr); rc != 0) {
    return VerbsError(rc, "ibv_query_device_ex");
  }
  mlx5dv_context dv{};
  dv.comp_mask = MLX5DV_CONTEXT_MASK_STRIDING_RQ;
  if (int rc = mlx5dv_query_device(context_.get(), &dv); rc != 0) {
    return VerbsError(rc < 0 ? -rc : rc, "mlx5dv_query_device");
  }
  caps_ = mlx5::CapsFromVerbs(attr, dv);
  if (options_.port > attr.orig_attr.phys_port_cnt) {
    return absl::InvalidArgumentError(absl::StrCat("Mlx5Options.port = ", options_.port, ": ",
                                                   device_name_, " has ",
                                                   attr.orig_attr.phys_port_cnt, " port(s)"));
  }
  ibv_port_attr port{};
  if (int rc = ibv_query_port(context_.get(), options_.port, &port); rc != 0) {
    return VerbsError(rc, absl::StrCat("ibv_query_port(", options_.port, ")"));
  }
  if (port.link_layer != IBV_LINK_LAYER_ETHERNET) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mlx5: port ", options_.port, " of ", device_name_,
        " is not Ethernet (InfiniBand ports carry no RAW Ethernet; set the port type to ETH "
        "with mlxconfig LINK_TYPE_P1=2)"));
  }
  if (port.state != IBV_PORT_ACTIVE) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mlx5: port ", options_.port, " of ", device_name_, " is ", ibv_port_state_str(port.state),
        " (no link: check the cable and `ip link set <if> up`)"));
  }
  return absl::OkStatus();
}

absl::Status Mlx5DeviceImpl::ChooseModes() {
  if (options_.rx_mode != Mlx5RxMode::kPlainCq) {
    mlx5::MprqRequest request;
    request.log_stride_bytes = options_.log_stride_bytes;
    request.log_strides_per_wqe = options_.log_strides_per_wqe;
    request.ring_frames = options_.device.rx_ring_frames;
    request.held_frames = options_.device.rx_pool_frames;
    absl::StatusOr<mlx5::MprqGeometry> geometry = mlx5::PlanMprq(request, caps_);
    if (geometry.ok()) {
      mprq_ = *geometry;
      rx_mode_ = Mlx5RxMode::kMultiPacketRq;
    } else if (options_.rx_mode == Mlx5RxMode::kMultiPacketRq ||
               geometry.status().code() != absl::StatusCode::kUnimplemented) {
      return absl::Status(geometry.status().code(),
                          absl::StrCat("mlx5: striding RQ: ", geometry.status().message()));
    }
  }
  if (options_.tx_segmentation != Mlx5TxSegmentation::kSoftware) {
    absl::StatusOr<mlx5::TsoPlan> plan = mlx5::PlanTso(options_.max_tso_segments, caps_);
    if (plan.ok()) {
      tso_ = *plan;
      tx_segmentation_ = Mlx5TxSegmentation::kHardwareTso;
    } else if (options_.tx_segmentation == Mlx5TxSegmentation::kHardwareTso) {
      return absl::Status(plan.status().code(),
                          absl::StrCat("mlx5: TSO: ", plan.status().message()));
    }
  }
  mlx5::DepthRequest depths;
  depths.max_burst = options_.device.max_burst;
  depths.tx_ring = options_.device.tx_ring_frames;
  depths.signal_every = options_.signal_every;
  depths.rx_frames = rx_mode_ == Mlx5RxMode::kMultiPacketRq ? mprq_.wq_depth * mprq_.frames_per_wqe
                                                            : options_.device.rx_ring_frames;
  if (absl::Status s = mlx5::CheckDepths(depths, caps_); !s.ok()) return s;
  if (rx_mode_ == Mlx5RxMode::kPlainCq && options_.device.rx_ring_frames > caps_.max_qp_wr) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceOptions.rx_ring_frames = ", options_.device.rx_ring_frames,
                     ": the device's max_qp_wr is ", caps_.max_qp_wr));
  }
  return absl::OkStatus();
}

absl::StatusOr<SendResources> Mlx5DeviceImpl::MakeSendSide(uint32_t q) {
  SendResources send;
  const bool tso = tx_segmentation_ == Mlx5TxSegmentation::kHardwareTso;
  FramePoolOptions pool;
  pool.frames = options_.device.tx_pool_frames;
  pool.headroom = options_.device.headroom;
  ATP_ASSIGN_OR_RETURN(send.tx_pool, HeapFramePool::Create(pool));
  const std::span<uint8_t> region = send.tx_pool->region();
  ATP_ASSIGN_OR_RETURN(send.tx_pool_mr,
                       Register(pd_.get(), region.data(), region.size(), q, "tx pool"));
  if (tso) {
    ATP_ASSIGN_OR_RETURN(
        send.staging, mlx5::RegionMemory::Allocate(
                          size_t{tso_.slot_bytes} * options_.tso_staging_slots, options_.memory));
    ATP_ASSIGN_OR_RETURN(send.staging_mr, Register(pd_.get(), send.staging.data(),
                                                   send.staging.size(), q, "TSO staging"));
  }
  const uint32_t cq_entries = mlx5::CqEntriesFor(options_.device.tx_ring_frames, caps_);
  if (cq_entries == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceOptions.tx_ring_frames = ", options_.device.tx_ring_frames,
                     ": more than the device's max_cqe"));
  }
  errno = 0;
  send.cq.reset(ibv_create_cq(context_.get(), static_cast<int>(cq_entries), nullptr, nullptr, 0));
  if (send.cq == nullptr) return VerbsError(ErrnoOr(), QueueWhat(q, "ibv_create_cq (send)"));

  ibv_qp_init_attr_ex attr{};
  attr.qp_type = IBV_QPT_RAW_PACKET;
  attr.send_cq = send.cq.get();
  attr.recv_cq = send.cq.get();
  attr.cap.max_send_wr = options_.device.tx_ring_frames;
  attr.cap.max_send_sge = 1;
  attr.cap.max_inline_data = options_.max_inline_frame;
  attr.pd = pd_.get();
  attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  attr.send_ops_flags = IBV_QP_EX_WITH_SEND;
  if (tso) {
    attr.comp_mask |= IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
    attr.max_tso_header = options_.max_tso_header;
    attr.send_ops_flags |= IBV_QP_EX_WITH_TSO;
  }
  errno = 0;
  send.qp.reset(ibv_create_qp_ex(context_.get(), &attr));
  if (send.qp == nullptr) {
    return VerbsError(ErrnoOr(), QueueWhat(q, "ibv_create_qp_ex (RAW_PACKET send QP)"));
  }
  send.depth = std::min<uint32_t>(options_.device.tx_ring_frames, attr.cap.max_send_wr);
  send.max_inline_data = attr.cap.max_inline_data;

  ibv_qp_attr state{};
  state.qp_state = IBV_QPS_INIT;
  state.port_num = options_.port;
  if (int rc = ibv_modify_qp(send.qp.get(), &state, IBV_QP_STATE | IBV_QP_PORT); rc != 0) {
    return VerbsError(rc, QueueWhat(q, "send QP to INIT"));
  }
  state = ibv_qp_attr{};
  state.qp_state = IBV_QPS_RTR;
  if (int rc = ibv_modify_qp(send.qp.get(), &state, IBV_QP_STATE); rc != 0) {
    return VerbsError(rc, QueueWhat(q, "send QP to RTR"));
  }
  state = ibv_qp_attr{};
  state.qp_state = IBV_QPS_RTS;
  if (int rc = ibv_modify_qp(send.qp.get(), &state, IBV_QP_STATE); rc != 0) {
    return VerbsError(rc, QueueWhat(q, "send QP to RTS"));
  }
  send.qpx = ibv_qp_to_qp_ex(send.qp.get());
  if (send.qpx == nullptr) {
    return absl::UnimplementedError(
        QueueWhat(q, "mlx5: the send QP has no extended post API (rdma-core >= 28 needed)"));
  }
  return send;
}

absl::Status Mlx5DeviceImpl::MakeReceiveQueue(uint32_t q, ReceiveResources* receive) {
  const bool striding = rx_mode_ == Mlx5RxMode::kMultiPacketRq;
  const uint32_t entries = striding ? mprq_.wq_depth : options_.device.rx_ring_frames;
  const uint32_t cq_entries =
      striding ? mprq_.cq_entries : mlx5::CqEntriesFor(options_.device.rx_ring_frames, caps_);
  if (cq_entries == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceOptions.rx_ring_frames = ", options_.device.rx_ring_frames,
                     ": more than the device's max_cqe"));
  }
  errno = 0;
  receive->cq.reset(
      ibv_create_cq(context_.get(), static_cast<int>(cq_entries), nullptr, nullptr, 0));
  if (receive->cq == nullptr) {
    return VerbsError(ErrnoOr(), QueueWhat(q, "ibv_create_cq (receive)"));
  }
  ibv_wq_init_attr wq{};
  wq.wq_type = IBV_WQT_RQ;
  wq.max_wr = entries;
  wq.max_sge = 1;
  wq.pd = pd_.get();
  wq.cq = receive->cq.get();
  errno = 0;
  if (striding) {
    mlx5dv_wq_init_attr dv{};
    dv.comp_mask = MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ;
    dv.striding_rq_attrs.single_stride_log_num_of_bytes = mprq_.log_stride_bytes;
    dv.striding_rq_attrs.single_wqe_log_num_of_strides = mprq_.log_strides_per_wqe;
    dv.striding_rq_attrs.two_byte_shift_en = 0;
    receive->wq.reset(mlx5dv_create_wq(context_.get(), &wq, &dv));
  } else {
    receive->wq.reset(ibv_create_wq(context_.get(), &wq));
  }
  if (receive->wq == nullptr) {
    return VerbsError(ErrnoOr(),
                      QueueWhat(q, striding ? "mlx5dv_create_wq (striding RQ)" : "ibv_create_wq"));
  }
  ibv_wq_attr ready{};
  ready.attr_mask = IBV_WQ_ATTR_STATE;
  ready.wq_state = IBV_WQS_RDY;
  if (int rc = ibv_modify_wq(receive->wq.get(), &ready); rc != 0) {
    return VerbsError(rc, QueueWhat(q, "work queue to RDY"));
  }

  if (striding) {
    mlx5dv_obj objects{};
    objects.rwq.in = receive->wq.get();
    objects.rwq.out = &receive->dv_wq;
    objects.cq.in = receive->cq.get();
    objects.cq.out = &receive->dv_cq;
    if (int rc = mlx5dv_init_obj(&objects, MLX5DV_OBJ_RWQ | MLX5DV_OBJ_CQ); rc != 0) {
      return VerbsError(rc < 0 ? -rc : rc, QueueWhat(q, "mlx5dv_init_obj (RWQ, CQ)"));
    }
    const uint32_t granted = receive->dv_wq.wqe_cnt;
    if (!std::has_single_bit(granted) || granted < mprq_.wq_depth ||
        receive->dv_wq.stride < mlx5::kMprqWqeBytes ||
        (receive->dv_cq.cqe_size != 64 && receive->dv_cq.cqe_size != 128) ||
        !std::has_single_bit(receive->dv_cq.cqe_cnt)) {
      return absl::InternalError(
          absl::StrCat(QueueWhat(q, "mlx5: unexpected striding ring shape: "), granted,
                       " entries of ", receive->dv_wq.stride, " bytes, ", receive->dv_cq.cqe_cnt,
                       " CQEs of ", receive->dv_cq.cqe_size, " bytes"));
    }
    receive->geometry = mprq_;
    receive->geometry.chunks += granted - mprq_.wq_depth;
    receive->geometry.wq_depth = granted;
    ATP_ASSIGN_OR_RETURN(receive->memory, mlx5::RegionMemory::Allocate(
                                              receive->geometry.memory_bytes(), options_.memory));
    ATP_ASSIGN_OR_RETURN(receive->mr, Register(pd_.get(), receive->memory.data(),
                                               receive->memory.size(), q, "striding buffers"));
  } else {
    FramePoolOptions pool;
    pool.frames = options_.device.rx_pool_frames;
    pool.headroom = options_.device.headroom;
    pool.frame_capacity = kPlainRxBufferBytes;
    ATP_ASSIGN_OR_RETURN(std::unique_ptr<HeapFramePool> heap, HeapFramePool::Create(pool));
    receive->pool = std::make_unique<mlx5::PostedFramePool>(std::move(heap));
    receive->ring = entries;
    const std::span<uint8_t> region = receive->pool->region();
    ATP_ASSIGN_OR_RETURN(receive->mr,
                         Register(pd_.get(), region.data(), region.size(), q, "rx pool"));
  }
  return absl::OkStatus();
}

absl::Status Mlx5DeviceImpl::MakeSteering(uint32_t q, ReceiveResources* receive) {
  ibv_wq* wqs[1] = {receive->wq.get()};
  ibv_rwq_ind_table_init_attr table{};
  table.log_ind_tbl_size = 0;
  table.ind_tbl = wqs;
  errno = 0;
  receive->table.reset(ibv_create_rwq_ind_table(context_.get(), &table));
  if (receive->table == nullptr) {
    return VerbsError(ErrnoOr(), QueueWhat(q, "ibv_create_rwq_ind_table"));
  }
  uint8_t key[sizeof(kRssKey)];
  std::memcpy(key, kRssKey, sizeof(key));
  ibv_qp_init_attr_ex attr{};
  attr.qp_type = IBV_QPT_RAW_PACKET;
  attr.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
  attr.pd = pd_.get();
  attr.rwq_ind_tbl = receive->table.get();
  attr.rx_hash_conf.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
  attr.rx_hash_conf.rx_hash_key_len = sizeof(key);
  attr.rx_hash_conf.rx_hash_key = key;
  attr.rx_hash_conf.rx_hash_fields_mask = 0;  // one work queue: no hashing
  errno = 0;
  receive->qp.reset(ibv_create_qp_ex(context_.get(), &attr));
  if (receive->qp == nullptr) {
    return VerbsError(ErrnoOr(), QueueWhat(q, "ibv_create_qp_ex (RAW_PACKET receive QP)"));
  }
  mlx5::FlowRuleRequest request;
  request.port = options_.port;
  request.priority = options_.flow_priority;
  request.udp_port = static_cast<uint16_t>(options_.device.base_port + q);
  request.match = options_.flow_match;
  request.dst_mac = options_.address.mac;
  request.dst_ip = options_.address.ipv4;
  mlx5::UdpFlowRule rule = mlx5::BuildUdpFlowRule(request);
  errno = 0;
  receive->flow.reset(ibv_create_flow(receive->qp.get(), &rule.attr));
  if (receive->flow == nullptr) {
    const int error = ErrnoOr();
    absl::Status status = VerbsError(
        error, QueueWhat(q, absl::StrCat("ibv_create_flow (UDP port ", request.udp_port, ")")));
    if (error == EINVAL || error == EEXIST) {
      return absl::Status(status.code(),
                          absl::StrCat(status.message(),
                                       " (another rule may already own this port, or the "
                                       "device refuses the match; try FlowMatch::kPortOnly)"));
    }
    return status;
  }
  receive->mode = rx_mode_;
  return absl::OkStatus();
}

absl::StatusOr<ReceiveResources> Mlx5DeviceImpl::MakeReceiveSide(uint32_t q) {
  ReceiveResources receive;
  ATP_RETURN_IF_ERROR(MakeReceiveQueue(q, &receive));
  ATP_RETURN_IF_ERROR(MakeSteering(q, &receive));
  return receive;
}

absl::Status Mlx5DeviceImpl::Open() {
  ATP_ASSIGN_OR_RETURN(context_, OpenContext(options_.device_name, &device_name_));
  ATP_RETURN_IF_ERROR(QueryDevice());
  ATP_RETURN_IF_ERROR(ChooseModes());
  errno = 0;
  pd_.reset(ibv_alloc_pd(context_.get()));
  if (pd_ == nullptr) return VerbsError(ErrnoOr(), "ibv_alloc_pd");

  for (uint32_t q = 0; q < options_.device.num_queues; ++q) {
    ATP_ASSIGN_OR_RETURN(SendResources send, MakeSendSide(q));
    ATP_ASSIGN_OR_RETURN(ReceiveResources receive, MakeReceiveSide(q));
    Mlx5QueueConfig config;
    config.index = q;
    config.device = options_.device;
    config.max_inline_frame = std::min(options_.max_inline_frame, send.max_inline_data);
    config.signal_every = options_.signal_every;
    config.tso = tso_;
    config.tso_staging_slots = options_.tso_staging_slots;
    // Every region of the device, for frames sent from another queue's pool.
    lkeys_.Add(send.tx_pool->region().data(), send.tx_pool->region().size(), send.tx_pool_mr->lkey);
    if (receive.mode == Mlx5RxMode::kMultiPacketRq) {
      lkeys_.Add(receive.memory.data(), receive.memory.size(), receive.mr->lkey);
    } else {
      lkeys_.Add(receive.pool->region().data(), receive.pool->region().size(), receive.mr->lkey);
    }
    ATP_ASSIGN_OR_RETURN(std::unique_ptr<Mlx5Queue> queue,
                         Mlx5Queue::Create(config, std::move(send), std::move(receive)));
    queues_.push_back(std::move(queue));
  }
  for (auto& queue : queues_) queue->SetLkeyTable(&lkeys_);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Mlx5Device>> OpenMlx5Device(const Mlx5Options& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  auto device = std::make_unique<Mlx5DeviceImpl>(options);
  if (absl::Status s = device->Open(); !s.ok()) return s;
  return device;
}

}  // namespace atp::transport
