// python/src/transport_bindings.cc: the transports this build has, as
// factories of atp.TransportOptions: kernel UDP (sockets), loopback (an
// atp.LoopbackWire shared by endpoints in this process: no sockets) and DPDK
// memif ports (when built with DPDK). transport_available(kind) says which;
// a factory for one the build lacks raises RuntimeError naming the build
// option. TransportOptions.capture records the device's frames
// (capture_bindings.cc).
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "atp/transport/dpdk.h"
#include "atp/transport/kernel_udp.h"
#include "atp/transport/loopback.h"
#include "atp/transport_factory.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "python/src/bindings.h"
#include "python/src/status.h"

namespace atp::python {
namespace py = pybind11;

namespace {

void RequireTransport(TransportKind kind, const char* build_option) {
  if (!TransportAvailable(kind)) {
    throw std::runtime_error(std::string("this build of libatp has no ") +
                             std::string(TransportKindName(kind)) + " transport (" + build_option +
                             "); atp.transport_available() says what it has");
  }
}

TransportOptions KernelUdp(const std::string& address, const std::string& bind, uint32_t queues,
                           const std::string& gateway, bool whole_frame, uint16_t base_port,
                           const std::vector<std::pair<std::string, std::string>>& peers) {
  TransportOptions o;
  o.kind = TransportKind::kKernelUdp;
  o.kernel_udp.address = DeviceAddressOf("TransportOptions.kernel_udp.address", address);
  o.kernel_udp.bind = ParseSocketAddress("TransportOptions.kernel_udp.bind", bind);
  o.kernel_udp.device.num_queues = queues;
  o.kernel_udp.device.base_port = base_port;
  o.kernel_udp.encapsulation = whole_frame ? transport::KernelUdpEncapsulation::kWholeFrame
                                           : transport::KernelUdpEncapsulation::kAtpMessage;
  if (!gateway.empty()) {
    o.kernel_udp.gateway = ParseSocketAddress("TransportOptions.kernel_udp.gateway", gateway);
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    const auto& [peer_ip, socket] = peers[i];
    const std::string field = "TransportOptions.kernel_udp.peers[" + std::to_string(i) + "]";
    const transport::SocketAddress s = ParseSocketAddress(field, socket);
    if (uint32_t{s.port} + queues - 1 > 0xFFFF) {
      throw py::value_error(field + ": peer " + peer_ip + " at " + socket + ": its queue " +
                            std::to_string(queues - 1) + " socket (port + " +
                            std::to_string(queues - 1) + ") exceeds 65535");
    }
    o.kernel_udp.peers.push_back(transport::KernelUdpPeer::FromPortRange(
        DeviceAddressOf(field, peer_ip), s.ip, s.port, queues));
  }
  return o;
}

TransportOptions Loopback(std::shared_ptr<transport::LoopbackWire> wire, const std::string& address,
                          uint32_t queues, uint16_t base_port) {
  RequireTransport(TransportKind::kLoopback, "always built");
  if (wire == nullptr) throw py::value_error("TransportOptions.loopback: wire is None");
  TransportOptions o;
  o.kind = TransportKind::kLoopback;
  o.loopback_wire = std::move(wire);
  o.loopback.address = DeviceAddressOf("TransportOptions.loopback.address", address);
  o.loopback.device.num_queues = queues;
  o.loopback.device.base_port = base_port;
  return o;
}

// DpdkMemif: a net_memif port created at open (removed at close). socket:
// a file path, or "@name" for an abstract socket. peers: (ATP IPv4, queues).
TransportOptions DpdkMemif(const std::string& address, const std::string& socket,
                           const std::string& role, uint32_t id, uint32_t queues,
                           uint16_t base_port,
                           const std::vector<std::pair<std::string, uint32_t>>& peers,
                           uint32_t memory_mb, double link_timeout_s,
                           const std::vector<std::string>& eal_args) {
  RequireTransport(TransportKind::kDpdk, "LIBATP_WITH_DPDK");
  transport::MemifOptions memif;
  if (role == "client") {
    memif.role = transport::MemifRole::kClient;
  } else if (role == "server") {
    memif.role = transport::MemifRole::kServer;
  } else {
    throw py::value_error("TransportOptions.dpdk_memif: role '" + role +
                          "' is not 'client' or 'server'");
  }
  if (!socket.empty() && socket[0] == '@') {
    memif.socket = socket.substr(1);
    memif.socket_kind = transport::MemifSocket::kAbstract;
  } else {
    memif.socket = socket;
    memif.socket_kind = transport::MemifSocket::kFile;
  }
  if (memif.socket.empty() || memif.socket.find_first_of(", ") != std::string::npos) {
    throw py::value_error("TransportOptions.dpdk_memif: socket '" + socket +
                          "' must be a path (or @name) without ',' or ' '");
  }
  // Seconds to int64 nanoseconds: NaN, infinities and values past ~292 years
  // would be undefined behaviour in the conversion.
  if (!(link_timeout_s >= 0 && link_timeout_s <= 1e9)) {
    throw py::value_error("TransportOptions.dpdk_memif: link_timeout = " +
                          std::to_string(link_timeout_s) + ": seconds in 0..1e9");
  }
  memif.id = id;
  TransportOptions o;
  o.kind = TransportKind::kDpdk;
  o.dpdk_eal.program_name = "atp-python";
  o.dpdk_eal.memory_mb = memory_mb;
  o.dpdk_eal.extra_args = eal_args;
  transport::DpdkOptions& d = o.dpdk;
  d.device.num_queues = queues;
  d.device.base_port = base_port;
  d.address = DeviceAddressOf("TransportOptions.dpdk_memif.address", address);
  memif.ring_frames = d.device.rx_ring_frames;
  d.port = "net_memif_atp" + std::to_string(id);
  d.source = transport::DpdkPortSource::kCreateVdev;
  d.vdev_args = transport::MemifVdevArgs(memif);
  d.link_timeout = TimeDelta::FromNanoseconds(static_cast<int64_t>(link_timeout_s * 1e9));
  for (size_t i = 0; i < peers.size(); ++i) {
    const auto& [peer_ip, peer_queues] = peers[i];
    d.peers.push_back(
        {DeviceAddressOf("TransportOptions.dpdk_memif.peers[" + std::to_string(i) + "]", peer_ip),
         peer_queues});
  }
  return o;
}

py::dict WireStatsDict(const transport::LoopbackWireStats& s) {
  py::dict d;
  d["frames_in"] = s.frames_in;
  d["delivered"] = s.delivered;
  d["processor_drops"] = s.processor_drops;
  d["unroutable"] = s.unroutable;
  d["egress_drops"] = s.egress_drops;
  return d;
}

}  // namespace

void RegisterTransports(py::module_& m) {
  m.def(
      "transport_available",
      [](const std::string& kind) {
        return TransportAvailable(ValueOrThrow(ParseTransportKind(kind)));
      },
      py::arg("kind"), "Whether this build can open 'kernel_udp', 'loopback' or 'dpdk'.");

  py::class_<transport::LoopbackWire, std::shared_ptr<transport::LoopbackWire>>(
      m, "LoopbackWire",
      "An in-process wire: endpoints opened with TransportOptions.loopback(wire, ...) reach "
      "each other by IPv4 (no switch: workers address the PS directly, the PS delivers "
      "unicast). Kept alive by the devices on it.")
      .def(py::init([] { return transport::LoopbackWire::Create({}); }))
      .def("num_endpoints", &transport::LoopbackWire::num_endpoints)
      .def("stats", [](const transport::LoopbackWire& w) { return WireStatsDict(w.stats()); });

  py::class_<TransportOptions> t(
      m, "TransportOptions",
      "A device to open: TransportOptions.kernel_udp(...), .loopback(...) or .dpdk_memif(...).");
  t.def_static("kernel_udp", &KernelUdp, py::arg("address"), py::arg("bind"),
               py::arg("queues") = 1, py::arg("gateway") = "", py::arg("whole_frame") = false,
               py::arg("base_port") = wire::kDefaultBasePort,
               py::arg("peers") = std::vector<std::pair<std::string, std::string>>{},
               "address: this node's ATP IPv4; bind: 'IP:PORT' of queue 0 (queue i: PORT+i); "
               "gateway: 'IP:PORT' of the ToR switch (kWholeFrame overlay: whole_frame=True); "
               "peers: [(atp_ipv4, 'IP:PORT of its queue 0')].")
      .def_static("loopback", &Loopback, py::arg("wire"), py::arg("address"),
                  py::arg("queues") = 1, py::arg("base_port") = wire::kDefaultBasePort,
                  "An endpoint with ATP IPv4 `address` on `wire` (an atp.LoopbackWire).")
      .def_static("dpdk_memif", &DpdkMemif, py::arg("address"), py::arg("socket"),
                  py::arg("role") = "client", py::arg("id") = 0, py::arg("queues") = 1,
                  py::arg("base_port") = wire::kDefaultBasePort,
                  py::arg("peers") = std::vector<std::pair<std::string, uint32_t>>{},
                  py::arg("memory_mb") = 256, py::arg("link_timeout") = 2.0,
                  py::arg("eal_args") = std::vector<std::string>{},
                  "A DPDK net_memif port (only when transport_available('dpdk')): socket is a "
                  "file path or '@abstract_name'; role 'client' or 'server'; peers: "
                  "[(atp_ipv4, queues)]; memory_mb and eal_args: the process's EAL, which is "
                  "initialised once per process by the first DPDK device opened (a later one "
                  "must ask for the same EAL); link_timeout: seconds to wait for the peer.")
      .def_property_readonly("kind",
                             [](const TransportOptions& o) {
                               return std::string(TransportKindName(o.kind));
                             })
      .def_readwrite("capture", &TransportOptions::capture,
                     "atp.CaptureOptions: record what the device receives and sends.");
  t.def("validate", [](const TransportOptions& o) { ThrowIfError(o.Validate()); });
  t.def("__repr__", [](py::handle self) { return FieldRepr(self, {"kind", "capture"}); });
}

}  // namespace atp::python
