// atp/transport/kernel_udp.h: ATP over the kernel's UDP sockets. Runs without
// root: on 127.0.0.1 (several nodes = several port ranges or 127.0.0.x
// addresses), across network namespaces over veth, and between hosts.
//
// Each queue has its own socket; a frame goes to the peer node owning its
// IPv4 destination (a table: node address -> one socket address per queue),
// to the socket of the queue its UDP destination port names. What a datagram
// carries is the encapsulation (KernelUdpEncapsulation):
//
//   - kAtpMessage (default): the 264-byte ATP message; the kernel's own
//     Ethernet/IPv4/UDP headers carry it. Received messages are rebuilt into
//     whole frames: source = the sending node (looked up by the sender's
//     socket address), destination = this node, ports = base_port + this
//     queue, TOS as received (ECN kept).
//   - kWholeFrame: the whole 306-byte frame, its Ethernet/IPv4/UDP headers
//     included, as the payload of an outer UDP datagram: an overlay, like
//     VXLAN. A switch process in the middle sees the real source and
//     destination addresses and routes by them; frames to a node that is not
//     a peer (another rack, a multicast group) go to the `gateway` (the ToR).
//     Received frames are kept as they arrived (after checking that each is a
//     whole ATP frame for this queue), only from a configured peer: a queue
//     socket of the gateway or of a node of the table; others' datagrams are
//     dropped and counted in rx_bad_frames (docs/security.md).
//
// Segmentation jobs go out with UDP GSO (UDP_SEGMENT; 264- or 306-byte
// segments) and runs of frames to one destination too; receive uses UDP_GRO
// and cuts what the kernel coalesced into frames.
//
//   KernelUdpOptions options;
//   options.address = {ipv4, DefaultMacFor(ipv4)};
//   options.bind = {*wire::Ipv4Address::Parse("127.0.0.1"), 41000};   // queue i: 41000 + i
//   options.peers.push_back(KernelUdpPeer::FromPortRange(ps_address, ps_ip, 42000, 4));
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<KernelUdpDevice> device, OpenKernelUdpDevice(options));
//
//   // An overlay node behind a switch process listening on 127.0.0.1:47000..47015:
//   options.encapsulation = KernelUdpEncapsulation::kWholeFrame;
//   options.gateway = SocketAddress{*wire::Ipv4Address::Parse("127.0.0.1"), 47000};
//
// Limits: kAtpMessage keeps no L2 information; rebuilt frames carry the MACs
// of the node table, and a node in the middle sees frames rebuilt with itself
// as the destination (it routes by its job table, not by the original
// destination). kWholeFrame costs 42 more bytes per datagram.
#ifndef ATP_TRANSPORT_KERNEL_UDP_H_
#define ATP_TRANSPORT_KERNEL_UDP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/transport.h"

namespace atp::transport {

// SocketAddress: an IPv4 socket address (both in host order).
struct SocketAddress {
  wire::Ipv4Address ip;
  uint16_t port = 0;
  std::string ToString() const;  // "127.0.0.1:41000"
  friend bool operator==(const SocketAddress&, const SocketAddress&) = default;
};

// KernelUdpPeer: another node: its ATP address and the socket of each of its
// queues (queue i = queue_sockets[i]).
struct KernelUdpPeer {
  DeviceAddress address;
  std::vector<SocketAddress> queue_sockets;

  // FromPortRange: queue i at socket_ip:(base_port + i).
  static KernelUdpPeer FromPortRange(DeviceAddress address, wire::Ipv4Address socket_ip,
                                     uint16_t base_port, uint32_t num_queues);
};

// Offload: whether to use a kernel offload (GSO, GRO).
enum class Offload : uint8_t {
  kAuto,  // use it when the kernel accepts the socket option
  kOn,    // fail to open without it
  kOff,
};

// TxCoalescing: whether TxBurst sends a run of frames to one destination
// queue (same TOS) as one GSO send. Each frame is still its own datagram.
enum class TxCoalescing : uint8_t { kGsoRuns, kNone };

// KernelUdpEncapsulation: what one UDP datagram carries.
enum class KernelUdpEncapsulation : uint8_t {
  kAtpMessage,  // the 264-byte ATP message; the receiver rebuilds the 42 header bytes
  kWholeFrame,  // the whole 306-byte frame, headers kept (an overlay, like VXLAN)
};

std::string_view KernelUdpEncapsulationName(KernelUdpEncapsulation value);

struct KernelUdpOptions {
  DeviceOptions device;   // rx/tx_ring_frames are not used: the socket buffers are the rings
  DeviceAddress address;  // this node
  // bind: queue i binds bind.ip:(bind.port + i); port 0: the kernel picks a
  // free port per queue (KernelUdpDevice::self() tells which).
  SocketAddress bind;
  std::vector<KernelUdpPeer> peers;  // this node is added automatically
  KernelUdpEncapsulation encapsulation = KernelUdpEncapsulation::kAtpMessage;
  // gateway: kWholeFrame only. Frames whose IPv4 destination is not a node of
  // the table (another rack, a multicast group) go to the gateway: its queue
  // i socket is gateway.ip:(gateway.port + i), like KernelUdpPeer::
  // FromPortRange, so the gateway binds as many queues as the nodes behind
  // it use. Unset: such frames are tx_unroutable. A node's gateway is its ToR
  // switch process.
  std::optional<SocketAddress> gateway;
  Offload gso = Offload::kAuto;
  Offload gro = Offload::kAuto;
  TxCoalescing tx_coalescing = TxCoalescing::kGsoRuns;
  // socket_buffer_bytes: SO_RCVBUF and SO_SNDBUF asked for (the kernel caps
  // them at net.core.rmem_max / wmem_max).
  int socket_buffer_bytes = 4 << 20;
  uint32_t max_gso_segments = 64;  // segments per GSO send (kernel limit 64)
  uint32_t gro_buffers = 8;  // with GRO: 64 KiB receive buffers per queue (datagrams per recvmmsg)

  // Validate: the message names the offending field (a gateway is refused
  // with kAtpMessage, and unless gateway.port + 15 is a port).
  absl::Status Validate() const;
};

// KernelUdpDevice: a Device with its socket table.
class KernelUdpDevice : public Device {
 public:
  // self: this node as a peer of others (its address and bound sockets).
  virtual const KernelUdpPeer& self() const = 0;

  // AddPeer: control path, no queue may be running. Fails if the node address
  // or one of its sockets is already known.
  virtual absl::Status AddPeer(const KernelUdpPeer& peer) = 0;

  // encapsulation: what a datagram carries (the options' choice).
  virtual KernelUdpEncapsulation encapsulation() const = 0;

  // gso_enabled / gro_enabled: what the kernel accepted at open.
  virtual bool gso_enabled() const = 0;
  virtual bool gro_enabled() const = 0;
};

// OpenKernelUdpDevice: binds one socket per queue. Fails, saying why, when
// the options are invalid (a gateway with kAtpMessage, a gateway port range
// past 65535), an address cannot be bound (in use, not local), or
// an offload asked for with kOn is missing.
absl::StatusOr<std::unique_ptr<KernelUdpDevice>> OpenKernelUdpDevice(
    const KernelUdpOptions& options);

}  // namespace atp::transport

#endif  // ATP_TRANSPORT_KERNEL_UDP_H_
