// atp/transport_factory.h: opens a transport device by choice, for
// applications that pick the backend from configuration.
//
//   atp::TransportOptions t;
//   t.kind = atp::TransportKind::kKernelUdp;
//   t.kernel_udp.address = {ip, atp::transport::DefaultMacFor(ip)};
//   t.kernel_udp.bind = {loopback_ip, 41000};
//   t.kernel_udp.device.num_queues = 2;
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<atp::transport::Device> device, atp::OpenTransport(t));
//   ATP_ASSIGN_OR_RETURN(auto worker, atp::Worker::Create(options, std::move(device)));
//
// DPDK (kDpdk) is available when libatp was built with it (ATP_HAVE_DPDK in
// atp/config.h; TransportAvailable says so at run time): OpenTransport then
// initialises the process's EAL from `dpdk_eal` (once; a later call must ask
// for the same EAL) and opens the port described by `dpdk`:
//
//   atp::TransportOptions t;
//   t.kind = atp::TransportKind::kDpdk;
//   t.dpdk_eal.memory_mb = 256;
//   t.dpdk.address = {ip, atp::transport::DefaultMacFor(ip)};
//   t.dpdk.port = "net_memif0";
//   t.dpdk.source = atp::transport::DpdkPortSource::kCreateVdev;
//   t.dpdk.vdev_args = atp::transport::MemifVdevArgs({.role = atp::transport::MemifRole::kClient,
//                                                     .socket = "/run/tor0-w0.sock"});
//   t.dpdk.peers.push_back({ps_address, 2});
//
// mlx5 devices are opened through their own header; they are not listed here yet.
#ifndef ATP_TRANSPORT_FACTORY_H_
#define ATP_TRANSPORT_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "atp/capture.h"
#include "atp/transport.h"
#include "atp/transport/dpdk.h"
#include "atp/transport/kernel_udp.h"
#include "atp/transport/loopback.h"

namespace atp {

enum class TransportKind : uint8_t {
  kLoopback,   // an endpoint on an in-process LoopbackWire (tests, single-process demos)
  kKernelUdp,  // kernel UDP sockets (atp/transport/kernel_udp.h)
  kDpdk,       // a DPDK port (atp/transport/dpdk.h); only when built with DPDK
};

// TransportKindName: "loopback", "kernel_udp", "dpdk". ParseTransportKind:
// the inverse (also "kernel-udp", "udp"); it knows "dpdk" even in a build
// without DPDK, where Validate and OpenTransport refuse it.
std::string_view TransportKindName(TransportKind kind);
absl::StatusOr<TransportKind> ParseTransportKind(std::string_view name);

// TransportAvailable: whether this build of libatp can open `kind`
// (kDpdk: ATP_HAVE_DPDK).
bool TransportAvailable(TransportKind kind);

struct TransportOptions {
  TransportKind kind = TransportKind::kKernelUdp;
  // kKernelUdp: the device's options.
  transport::KernelUdpOptions kernel_udp;
  // kLoopback: the wire to join (required) and the endpoint's options.
  std::shared_ptr<transport::LoopbackWire> loopback_wire;
  transport::LoopbackEndpointOptions loopback;
  // kDpdk: the process's EAL (initialised by the first OpenTransport that
  // needs it) and the port's options.
  transport::DpdkEalOptions dpdk_eal;
  transport::DpdkOptions dpdk;
  // capture: record what the device receives and sends (atp/capture.h); off
  // unless capture.directory is set. Any backend.
  CaptureOptions capture;

  // Validate: the chosen backend's options; the message names the field.
  absl::Status Validate(std::string_view field = "TransportOptions") const;
};

// OpenTransport: validates `options` and opens the chosen device. kDpdk:
// runs InitDpdkEal(dpdk_eal) first (FailedPrecondition when this process's
// EAL was initialised with other arguments), then OpenDpdkDevice(dpdk); the
// device returned is a transport::DpdkDevice (link state, port counters).
absl::StatusOr<std::unique_ptr<transport::Device>> OpenTransport(const TransportOptions& options);

}  // namespace atp

#endif  // ATP_TRANSPORT_FACTORY_H_
