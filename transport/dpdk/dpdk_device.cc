// transport/dpdk/dpdk_device.cc: opening and closing a DPDK port: the port
// itself (found or hot-plugged), its queues and pools, steering, the link.
#include <rte_version.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "atp/transport/dpdk.h"
#include "transport/dpdk/dpdk_headers.h"
#include "transport/dpdk/dpdk_queue.h"
#include "transport/dpdk/flow_steering.h"
#include "transport/dpdk/interrupt_barrier.h"
#include "transport/dpdk/interrupt_gate.h"
#include "transport/dpdk/mbuf_pool.h"
#include "transport/dpdk/netns.h"
#include "transport/dpdk/peer_table.h"
#include "transport/dpdk/port_config.h"
#include "transport/dpdk/rx_wait.h"
#include "transport/dpdk/status.h"
#include "transport/dpdk/steering_rings.h"

namespace atp::transport {
namespace {

using internal::DpdkQueue;
using internal::DpdkQueueConfig;
using internal::MbufPool;
using internal::MbufPoolOptions;
using internal::NetnsGuard;
using internal::RteErrorStatus;

std::string PortNames() {
  std::vector<std::string> names;
  uint16_t port_id;
  RTE_ETH_FOREACH_DEV(port_id) {
    char name[RTE_ETH_NAME_MAX_LEN];
    if (rte_eth_dev_get_name_by_port(port_id, name) == 0) names.emplace_back(name);
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

bool IsZero(const wire::MacAddress& mac) {
  return std::all_of(mac.bytes.begin(), mac.bytes.end(), [](uint8_t b) { return b == 0; });
}

class DpdkPortDevice final : public DpdkDevice, private internal::PortRestarter {
 public:
  explicit DpdkPortDevice(const DpdkOptions& options) : options_(options), address_(options.address) {}
  ~DpdkPortDevice() override;

  // Open: everything OpenDpdkDevice does; on error the destructor undoes
  // whatever was done.
  absl::Status Open();

  std::string_view backend() const override { return "dpdk"; }
  const DeviceAddress& address() const override { return address_; }
  uint16_t base_port() const override { return options_.device.base_port; }
  uint32_t num_queues() const override { return static_cast<uint32_t>(queues_.size()); }
  Queue& queue(uint32_t index) override { return *queues_[index]; }

  uint16_t port_id() const override { return port_id_; }
  Steering steering() const override { return steering_; }
  uint64_t tx_offloads() const override { return tx_offloads_; }
  bool link_up() const override;
  absl::Status WaitForLink(TimeDelta timeout) override;
  DpdkPortStats port_stats() const override;
  absl::Status AddPeer(const DpdkPeer& peer) override { return peers_.Add(peer); }
  absl::Status Reconnect() override;

 private:
  // RestartIfDown (PortRestarter): from queue 0's thread, holding the gate.
  void RestartIfDown() override;
  // RestartPort: stops and starts the port (a memif client connects when it
  // starts); the caller holds the gate. False: the start failed (no server).
  bool RestartPort();
  // Gated: runs `body` holding the interrupt gate (memif), or just runs it.
  template <typename Body>
  auto Gated(Body body) {
    if (gate_ == nullptr) return body();
    gate_->Enter(control_slot_);
    auto result = body();
    gate_->Leave(control_slot_);
    return result;
  }
  absl::Status FindPort();
  absl::Status ConfigurePort();
  // SetUpHardwareQueues: rte_eth_rx/tx_queue_setup of every queue, with the
  // pools ConfigurePort made (after each rte_eth_dev_configure).
  absl::Status SetUpHardwareQueues(const rte_eth_dev_info& info, uint16_t rx_descriptors,
                                   uint16_t tx_descriptors);
  absl::Status SetUpSteering();
  // SetUpRxWaits: each queue's wait_fd from the port's Rx interrupts
  // (rx_wait.h), after the steering is known.
  absl::Status SetUpRxWaits();
  void ClosePort();

  const DpdkOptions options_;
  DeviceAddress address_;
  uint16_t port_id_ = RTE_MAX_ETHPORTS;
  bool vdev_created_ = false;
  bool port_found_ = false;
  bool port_started_ = false;
  Steering steering_ = Steering::kSoftware;
  uint64_t tx_offloads_ = 0;
  std::string driver_name_;
  bool memif_client_ = false;
  // memif ports: the process's interrupt gate and this device's control-path
  // slot in it (interrupt_gate.h).
  std::shared_ptr<internal::InterruptGate> gate_;
  internal::GateSlot control_slot_;
  std::vector<rte_flow*> flows_;
  internal::PeerTable peers_;
  std::unique_ptr<internal::SteeringRings> steering_rings_;
  std::vector<std::unique_ptr<DpdkQueue>> queues_;
  std::vector<rte_mempool*> rx_mempools_;  // queues_[q]'s RX pool's mempool
  // rx_interrupts_: the port was started with intr_conf.rxq (rx_waits_ may
  // still be empty: the driver gave a queue none).
  bool rx_interrupts_ = false;
  std::vector<std::unique_ptr<internal::RxWait>> rx_waits_;  // one per queue, or none
};

absl::Status DpdkPortDevice::Open() {
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<NetnsGuard> netns, NetnsGuard::Enter(options_.netns));
  ATP_RETURN_IF_ERROR(FindPort());
  ATP_RETURN_IF_ERROR(ConfigurePort());
  ATP_RETURN_IF_ERROR(SetUpSteering());
  ATP_RETURN_IF_ERROR(SetUpRxWaits());
  if (options_.link_timeout > TimeDelta::Zero()) {
    ATP_RETURN_IF_ERROR(WaitForLink(options_.link_timeout));
  }
  return absl::OkStatus();
}

absl::Status DpdkPortDevice::FindPort() {
  if (options_.source == DpdkPortSource::kCreateVdev) {
    const int ret = rte_vdev_init(options_.port.c_str(), options_.vdev_args.c_str());
    if (ret != 0) {
      return RteErrorStatus(ret == -1 ? rte_errno : ret,
                            absl::StrCat("rte_vdev_init(", options_.port, ", \"", options_.vdev_args,
                                         "\") (name in use, bad arguments, no such interface, or "
                                         "no permission: af_packet and af_xdp need root)"));
    }
    vdev_created_ = true;
  }
  if (rte_eth_dev_get_port_by_name(options_.port.c_str(), &port_id_) != 0) {
    return absl::NotFoundError(absl::StrCat("no DPDK port named '", options_.port,
                                            "' (ports: ", PortNames(), ")"));
  }
  port_found_ = true;
  return absl::OkStatus();
}

absl::Status DpdkPortDevice::ConfigurePort() {
  const uint32_t n = options_.device.num_queues;
  rte_eth_dev_info info{};
  if (int ret = rte_eth_dev_info_get(port_id_, &info); ret != 0) {
    return RteErrorStatus(ret, absl::StrCat("rte_eth_dev_info_get(", options_.port, ")"));
  }
  driver_name_ = info.driver_name;
  if (driver_name_ == "net_memif") {
    memif_client_ = options_.vdev_args.find("role=client") != std::string::npos;
    ATP_ASSIGN_OR_RETURN(gate_, internal::InterruptGate::Acquire());
    control_slot_.port_id = port_id_;
    gate_->Register(&control_slot_);
  }
  // A memif client reconnects by itself from queue 0's thread when that
  // thread is the only one polling the port (stop/start is not safe while
  // another thread is inside a burst on it).
  const bool auto_reconnect =
      memif_client_ && options_.reconnect == DpdkReconnect::kAuto &&
      (n == 1 || options_.polling == DpdkPolling::kOneThread);
  if (info.max_rx_queues < n || info.max_tx_queues < n) {
    return absl::FailedPreconditionError(absl::StrCat(
        "port ", options_.port, " (", info.driver_name, ") has ", info.max_rx_queues, " RX and ",
        info.max_tx_queues, " TX queues; ", n,
        " of each are needed (af_packet / af_xdp: create it with qpairs / queue_count = ", n, ")"));
  }
  rx_interrupts_ = options_.rx_interrupts != DpdkRxInterrupts::kOff &&
                   !internal::DriverLacksRxInterrupts(driver_name_);
  if (options_.rx_interrupts == DpdkRxInterrupts::kRequired && !rx_interrupts_) {
    return absl::FailedPreconditionError(
        absl::StrCat("DpdkRxInterrupts::kRequired: port ", options_.port, " (", driver_name_,
                     ") has no Rx interrupts in DPDK ", rte_version(),
                     "; open it with kIfAvailable (its queues are then polled) or kOff"));
  }
  rte_eth_conf conf{};
  conf.rxmode.mq_mode = RTE_ETH_MQ_RX_NONE;
  conf.intr_conf.rxq = rx_interrupts_ ? 1 : 0;
  tx_offloads_ = internal::SelectTxOffloads(info.tx_offload_capa);
  conf.txmode.offloads = tx_offloads_;
  if (int ret = rte_eth_dev_configure(port_id_, static_cast<uint16_t>(n), static_cast<uint16_t>(n),
                                      &conf);
      ret != 0) {
    return RteErrorStatus(ret, absl::StrCat("rte_eth_dev_configure(", options_.port, ")"));
  }
  uint16_t rx_descriptors = static_cast<uint16_t>(options_.device.rx_ring_frames);
  uint16_t tx_descriptors = static_cast<uint16_t>(options_.device.tx_ring_frames);
  if (int ret = rte_eth_dev_adjust_nb_rx_tx_desc(port_id_, &rx_descriptors, &tx_descriptors);
      ret != 0) {
    return RteErrorStatus(ret, absl::StrCat("rte_eth_dev_adjust_nb_rx_tx_desc(", options_.port, ")"));
  }
  if (IsZero(address_.mac)) {
    rte_ether_addr mac{};
    if (rte_eth_macaddr_get(port_id_, &mac) == 0) {
      std::copy(std::begin(mac.addr_bytes), std::end(mac.addr_bytes), address_.mac.bytes.begin());
    }
  }
  ATP_RETURN_IF_ERROR(peers_.Add(DpdkPeer{address_, n}));
  for (const DpdkPeer& peer : options_.peers) ATP_RETURN_IF_ERROR(peers_.Add(peer));

  ATP_ASSIGN_OR_RETURN(steering_rings_,
                       internal::SteeringRings::Create(n, options_.device.rx_ring_frames));
  const int socket = rte_eth_dev_socket_id(port_id_);
  const internal::TxFreePolicy tx_free = (tx_offloads_ & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE) != 0
                                             ? internal::TxFreePolicy::kOwnPoolOnly
                                             : internal::TxFreePolicy::kAnyMbuf;
  for (uint32_t q = 0; q < n; ++q) {
    MbufPoolOptions rx;
    rx.frames = options_.device.rx_pool_frames;
    rx.driver_reserve = internal::RxDriverReserve(info.driver_name, rx_descriptors, tx_descriptors);
    rx.counting = internal::FreeCounting::kHandedOut;
    rx.headroom = RTE_PKTMBUF_HEADROOM;
    rx.frame_room = internal::RxFrameRoom(info.driver_name);
    rx.cache = options_.mempool_cache;
    rx.socket = socket;
    ATP_ASSIGN_OR_RETURN(std::unique_ptr<MbufPool> rx_pool, MbufPool::Create(rx));
    MbufPoolOptions tx = rx;
    tx.frames = options_.device.tx_pool_frames;
    tx.driver_reserve = 0;
    tx.counting = internal::FreeCounting::kMempool;
    tx.headroom = options_.device.headroom;
    tx.frame_room = kFrameBytes;
    ATP_ASSIGN_OR_RETURN(std::unique_ptr<MbufPool> tx_pool, MbufPool::Create(tx));
    rx_mempools_.push_back(rx_pool->mempool());
    DpdkQueueConfig config;
    config.port_id = port_id_;
    config.index = q;
    config.num_queues = n;
    config.base_port = options_.device.base_port;
    config.max_burst = options_.device.max_burst;
    config.tx_ring_frames = options_.device.tx_ring_frames;
    config.tx_free = tx_free;
    config.destinations = options_.destinations;
    config.gate = gate_.get();
    config.restarter = auto_reconnect && q == 0 ? this : nullptr;
    MbufPool* rx_mempool = rx_pool.get();
    queues_.push_back(std::make_unique<DpdkQueue>(config, &peers_, steering_rings_.get(),
                                                  std::move(rx_pool), std::move(tx_pool)));
    if (internal::DriverAbandonsRxBuffers(info.driver_name)) {
      // Freed with the queue, which goes after the port is closed.
      rx_mempool->set_release(internal::MempoolRelease::kAtOnce);
    }
  }
  ATP_RETURN_IF_ERROR(SetUpHardwareQueues(info, rx_descriptors, tx_descriptors));
  if (options_.promiscuous == DpdkPromiscuous::kOn) {
    if (int ret = rte_eth_promiscuous_enable(port_id_); ret != 0 && ret != -ENOTSUP) {
      return RteErrorStatus(ret, absl::StrCat("rte_eth_promiscuous_enable(", options_.port, ")"));
    }
  }
  int ret = Gated([&] { return rte_eth_dev_start(port_id_); });
  if (ret != 0 && rx_interrupts_ && options_.rx_interrupts == DpdkRxInterrupts::kIfAvailable) {
    // Some drivers refuse to start with Rx interrupts they cannot give (a
    // NIC without VFIO's interrupt vectors): again without.
    rx_interrupts_ = false;
    conf.intr_conf.rxq = 0;
    if (int again = rte_eth_dev_configure(port_id_, static_cast<uint16_t>(n),
                                          static_cast<uint16_t>(n), &conf);
        again != 0) {
      return RteErrorStatus(
          again, absl::StrCat("rte_eth_dev_configure(", options_.port, ") without Rx interrupts"));
    }
    ATP_RETURN_IF_ERROR(SetUpHardwareQueues(info, rx_descriptors, tx_descriptors));
    ret = Gated([&] { return rte_eth_dev_start(port_id_); });
  }
  if (ret != 0) {
    // A memif client fails to start when no server listens yet: its link
    // stays down until a restart finds one (WaitForLink, Reconnect, kAuto).
    if (memif_client_) return absl::OkStatus();
    return RteErrorStatus(ret, absl::StrCat("rte_eth_dev_start(", options_.port,
                                            ") (too few RX mbufs for the descriptors?)"));
  }
  port_started_ = true;
  return absl::OkStatus();
}

absl::Status DpdkPortDevice::SetUpHardwareQueues(const rte_eth_dev_info& info,
                                                 uint16_t rx_descriptors, uint16_t tx_descriptors) {
  const int socket = rte_eth_dev_socket_id(port_id_);
  for (uint32_t q = 0; q < num_queues(); ++q) {
    if (int ret = rte_eth_rx_queue_setup(port_id_, static_cast<uint16_t>(q), rx_descriptors,
                                         static_cast<unsigned>(socket), nullptr, rx_mempools_[q]);
        ret != 0) {
      return RteErrorStatus(ret, absl::StrCat("rte_eth_rx_queue_setup(", options_.port, ", ", q,
                                              ", ", rx_descriptors, " descriptors)"));
    }
    rte_eth_txconf txconf = info.default_txconf;
    txconf.offloads = tx_offloads_;
    if (int ret = rte_eth_tx_queue_setup(port_id_, static_cast<uint16_t>(q), tx_descriptors,
                                         static_cast<unsigned>(socket), &txconf);
        ret != 0) {
      return RteErrorStatus(ret, absl::StrCat("rte_eth_tx_queue_setup(", options_.port, ", ", q,
                                              ", ", tx_descriptors, " descriptors)"));
    }
  }
  return absl::OkStatus();
}

absl::Status DpdkPortDevice::SetUpRxWaits() {
  if (!rx_interrupts_ || !port_started_) {
    if (options_.rx_interrupts == DpdkRxInterrupts::kRequired) {
      return absl::FailedPreconditionError(absl::StrCat("DpdkRxInterrupts::kRequired: port ",
                                                        options_.port, " (", driver_name_,
                                                        ") did not start with Rx interrupts"));
    }
    return absl::OkStatus();
  }
  const bool steered_in_software = steering_ == Steering::kSoftware && num_queues() > 1;
  for (uint32_t q = 0; q < num_queues(); ++q) {
    const int steering_fd = steered_in_software ? steering_rings_->AddSignal(q) : -1;
    absl::StatusOr<std::unique_ptr<internal::RxWait>> wait =
        internal::RxWait::Create(port_id_, static_cast<uint16_t>(q), steering_fd);
    if (!wait.ok() || (steered_in_software && steering_fd < 0)) {
      rx_waits_.clear();  // all queues sleep on interrupts, or none
      if (options_.rx_interrupts == DpdkRxInterrupts::kRequired) {
        return absl::FailedPreconditionError(absl::StrCat(
            "DpdkRxInterrupts::kRequired: port ", options_.port, " (", driver_name_,
            "): ", wait.ok() ? "no eventfd for a steering ring" : wait.status().message()));
      }
      return absl::OkStatus();
    }
    rx_waits_.push_back(*std::move(wait));
  }
  for (uint32_t q = 0; q < num_queues(); ++q) queues_[q]->set_rx_wait(rx_waits_[q].get());
  return absl::OkStatus();
}

bool DpdkPortDevice::RestartPort() {
  (void)rte_eth_dev_stop(port_id_);
  port_started_ = rte_eth_dev_start(port_id_) == 0;
  // The handshake runs on the interrupt thread: let it start now.
  if (port_started_ && gate_ != nullptr) gate_->Hurry();
  return port_started_;
}

void DpdkPortDevice::RestartIfDown() {
  if (!link_up()) (void)RestartPort();
}

absl::Status DpdkPortDevice::Reconnect() {
  if (!memif_client_) return absl::OkStatus();
  const bool started = Gated([&] { return link_up() || RestartPort(); });
  if (!started) {
    return absl::UnavailableError(absl::StrCat("memif client ", options_.port,
                                               ": no server accepted the connection"));
  }
  return absl::OkStatus();
}

absl::Status DpdkPortDevice::SetUpSteering() {
  const uint32_t n = num_queues();
  steering_ = Steering::kSoftware;
  if (options_.steering != DpdkSteering::kSoftware && n > 1) {
    absl::Status probe = internal::ProbeFlowSteering(port_id_, base_port(), 0);
    if (probe.ok()) {
      absl::StatusOr<std::vector<rte_flow*>> flows =
          internal::InstallFlowSteering(port_id_, base_port(), n);
      if (flows.ok()) {
        flows_ = *std::move(flows);
        steering_ = Steering::kHardwareFlow;
      } else {
        probe = flows.status();
      }
    }
    if (!probe.ok() && options_.steering == DpdkSteering::kHardwareFlow) {
      return absl::FailedPreconditionError(absl::StrCat(
          "DpdkSteering::kHardwareFlow: port ", options_.port, " cannot steer by UDP port: ",
          probe.message()));
    }
  }
  // The queues were made before the choice; tell them.
  for (auto& queue : queues_) queue->set_steering(steering_);
  return absl::OkStatus();
}

bool DpdkPortDevice::link_up() const {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port_id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

absl::Status DpdkPortDevice::WaitForLink(TimeDelta timeout) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::nanoseconds(timeout.ToNanoseconds());
  auto pause = std::chrono::microseconds(100);
  // A memif client connects once, when the port starts: if the server was not
  // listening yet, restarting the port is what tries again (holding the
  // interrupt gate, so that the interrupt thread's memif work cannot overlap).
  constexpr auto kReconnectEvery = std::chrono::milliseconds(200);
  auto next_reconnect = std::chrono::steady_clock::now() + kReconnectEvery;
  if (memif_client_ && !port_started_) next_reconnect = std::chrono::steady_clock::now();
  while (!link_up()) {
    if (memif_client_ && std::chrono::steady_clock::now() >= next_reconnect) {
      (void)Gated([&] { return RestartPort(); });
      next_reconnect = std::chrono::steady_clock::now() + kReconnectEvery;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the link of DPDK port ", options_.port, " did not come up within ", timeout.ToSeconds(),
          " s (memif: is the peer running, on the same socket, with the other role?)"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(10000));
  }
  if (driver_name_ == "net_memif") {
    // memif's server sends into buffers its client supplies, and the client
    // supplies them when it receives: a receive of 0 frames primes the rings.
    Gated([&] {
      for (uint16_t q = 0; q < num_queues(); ++q) {
        rte_mbuf* none[1];
        (void)rte_eth_rx_burst(port_id_, q, none, 0);
      }
      return 0;
    });
  }
  return absl::OkStatus();
}

DpdkPortStats DpdkPortDevice::port_stats() const {
  rte_eth_stats stats{};
  DpdkPortStats out;
  if (rte_eth_stats_get(port_id_, &stats) != 0) return out;
  out.ipackets = stats.ipackets;
  out.opackets = stats.opackets;
  out.imissed = stats.imissed;
  out.ierrors = stats.ierrors;
  out.oerrors = stats.oerrors;
  out.rx_nombuf = stats.rx_nombuf;
  return out;
}

void DpdkPortDevice::ClosePort() {
  absl::StatusOr<std::unique_ptr<NetnsGuard>> netns = NetnsGuard::Enter(options_.netns);
  // (If the namespace is gone, so is the interface: close where we are.)
  // memif tears connections down on the EAL interrupt thread too: let it
  // finish a disconnect the peer started before this thread stops the port,
  // and let it handle the one stopping sends (to an in-process peer) before
  // the caller closes that peer (interrupt_barrier.h).
  const bool memif = driver_name_ == "net_memif";
  constexpr TimeDelta kBarrierTimeout = TimeDelta::FromSeconds(1);
  if (port_found_) {
    // The interrupts leave their epoll sets while the port still has them.
    for (auto& queue : queues_) queue->set_rx_wait(nullptr);
    rx_waits_.clear();
    internal::RemoveFlowSteering(port_id_, flows_);
    if (memif) (void)internal::InterruptThreadBarrier(kBarrierTimeout);
    // Holding the gate: the interrupt thread does no memif work meanwhile.
    if (port_started_) (void)Gated([&] { return rte_eth_dev_stop(port_id_); });
    if (memif) (void)internal::InterruptThreadBarrier(kBarrierTimeout);
    (void)Gated([&] { return rte_eth_dev_close(port_id_); });
  }
  if (vdev_created_) (void)Gated([&] { return rte_vdev_uninit(options_.port.c_str()); });
}

DpdkPortDevice::~DpdkPortDevice() {
  ClosePort();
  // The port is closed: nothing touches the queues' rings or pools any more.
  queues_.clear();
  if (gate_ != nullptr) gate_->Unregister(&control_slot_);
  gate_.reset();
  steering_rings_.reset();
  internal::SweepMempools();
}

}  // namespace

absl::StatusOr<std::unique_ptr<DpdkDevice>> OpenDpdkDevice(const DpdkOptions& options) {
  if (!internal::EalInitialized()) {
    return absl::FailedPreconditionError("OpenDpdkDevice: call InitDpdkEal first");
  }
  ATP_RETURN_IF_ERROR(options.Validate());
  internal::SweepMempools();
  auto device = std::make_unique<DpdkPortDevice>(options);
  ATP_RETURN_IF_ERROR(device->Open());
  return device;
}

}  // namespace atp::transport
