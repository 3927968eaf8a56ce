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
// DPDK and mlx5 devices are opened through their own headers
// (atp/transport/dpdk.h); they are not listed here yet.
#ifndef ATP_TRANSPORT_FACTORY_H_
#define ATP_TRANSPORT_FACTORY_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "atp/transport.h"
#include "atp/transport/kernel_udp.h"
#include "atp/transport/loopback.h"

namespace atp {

enum class TransportKind : uint8_t {
  kLoopback,   // an endpoint on an in-process LoopbackWire (tests, single-process demos)
  kKernelUdp,  // kernel UDP sockets (atp/transport/kernel_udp.h)
};

// TransportKindName: "loopback", "kernel_udp". ParseTransportKind: the inverse.
std::string_view TransportKindName(TransportKind kind);
absl::StatusOr<TransportKind> ParseTransportKind(std::string_view name);

struct TransportOptions {
  TransportKind kind = TransportKind::kKernelUdp;
  // kKernelUdp: the device's options.
  transport::KernelUdpOptions kernel_udp;
  // kLoopback: the wire to join (required) and the endpoint's options.
  std::shared_ptr<transport::LoopbackWire> loopback_wire;
  transport::LoopbackEndpointOptions loopback;

  // Validate: the chosen backend's options; the message names the field.
  absl::Status Validate(std::string_view field = "TransportOptions") const;
};

// OpenTransport: validates `options` and opens the chosen device.
absl::StatusOr<std::unique_ptr<transport::Device>> OpenTransport(const TransportOptions& options);

}  // namespace atp

#endif  // ATP_TRANSPORT_FACTORY_H_
