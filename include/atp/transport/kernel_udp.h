// atp/transport/kernel_udp.h: ATP over the kernel's UDP sockets. Runs without
// root: on 127.0.0.1 (several nodes = several port ranges or 127.0.0.x
// addresses), across network namespaces over veth, and between hosts.
//
// The kernel builds Ethernet, IPv4 and UDP; a socket carries only the 264-byte
// ATP message. Each queue has its own socket; a frame goes to the peer node
// owning its IPv4 destination (a table: node address -> one socket address per
// queue), to the socket of the queue its UDP destination port names. Received
// messages are rebuilt into whole frames: source = the sending node (looked up
// by the sender's socket address), destination = this node, ports = base_port
// + this queue, TOS as received (ECN kept). Segmentation jobs go out with UDP
// GSO (UDP_SEGMENT, 264-byte segments) and runs of frames to one destination
// too; receive uses UDP_GRO and cuts what the kernel coalesced into frames.
//
//   KernelUdpOptions options;
//   options.address = {ipv4, DefaultMacFor(ipv4)};
//   options.bind = {*wire::Ipv4Address::Parse("127.0.0.1"), 41000};   // queue i: 41000 + i
//   options.peers.push_back(KernelUdpPeer::FromPortRange(ps_address, ps_ip, 42000, 4));
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<KernelUdpDevice> device, OpenKernelUdpDevice(options));
//
// Limits: the medium keeps no L2 information; rebuilt frames carry the MACs of
// the node table. A node in the middle (a switch process) sees frames rebuilt
// with itself as the destination, so it routes by its job table, not by the
// original destination address.
#ifndef ATP_TRANSPORT_KERNEL_UDP_H_
#define ATP_TRANSPORT_KERNEL_UDP_H_

#include <cstdint>
#include <memory>
#include <string>
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

struct KernelUdpOptions {
  DeviceOptions device;   // rx/tx_ring_frames are not used: the socket buffers are the rings
  DeviceAddress address;  // this node
  // bind: queue i binds bind.ip:(bind.port + i); port 0: the kernel picks a
  // free port per queue (KernelUdpDevice::self() tells which).
  SocketAddress bind;
  std::vector<KernelUdpPeer> peers;  // this node is added automatically
  Offload gso = Offload::kAuto;
  Offload gro = Offload::kAuto;
  TxCoalescing tx_coalescing = TxCoalescing::kGsoRuns;
  // socket_buffer_bytes: SO_RCVBUF and SO_SNDBUF asked for (the kernel caps
  // them at net.core.rmem_max / wmem_max).
  int socket_buffer_bytes = 4 << 20;
  uint32_t max_gso_segments = 64;  // segments per GSO send (kernel limit 64)
  uint32_t gro_buffers = 8;  // with GRO: 64 KiB receive buffers per queue (datagrams per recvmmsg)

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

  // gso_enabled / gro_enabled: what the kernel accepted at open.
  virtual bool gso_enabled() const = 0;
  virtual bool gro_enabled() const = 0;
};

// OpenKernelUdpDevice: binds one socket per queue. Fails, saying why, when
// the options are invalid, an address cannot be bound (in use, not local), or
// an offload asked for with kOn is missing.
absl::StatusOr<std::unique_ptr<KernelUdpDevice>> OpenKernelUdpDevice(
    const KernelUdpOptions& options);

}  // namespace atp::transport

#endif  // ATP_TRANSPORT_KERNEL_UDP_H_
