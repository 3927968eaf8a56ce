// atp/transport/dpdk.h: ATP over DPDK ports: a NIC bound to a DPDK driver, or
// a virtual device (net_ring in one process, net_memif between processes,
// net_af_packet / net_af_xdp on a kernel interface, net_tap making one).
//
// The EAL (DPDK's environment: memory, cores, devices) is set up once per
// process, before any port is opened:
//
//   DpdkEalOptions eal;                                    // --no-huge -m 256 --no-pci ...
//   ATP_RETURN_IF_ERROR(InitDpdkEal(eal));
//   DpdkOptions options;
//   options.address = {ipv4, mac};
//   options.port = "net_memif0";
//   options.vdev_args = MemifVdevArgs({.role = MemifRole::kServer, .socket = "/run/atp.sock"});
//   options.source = DpdkPortSource::kCreateVdev;          // hot-plugged now, removed at close
//   options.peers.push_back({switch_address, 4});
//   ATP_ASSIGN_OR_RETURN(std::unique_ptr<DpdkDevice> device, OpenDpdkDevice(options));
//
// memif: a peer process may die or restart at any time. The EAL interrupt
// thread tears the connection down (DPDK's memif unmaps the shared memory
// there); libatp's queues and that thread take turns through an interrupt
// gate (transport/dpdk/interrupt_gate.h), so a queue is never inside the
// driver meanwhile (RxBurst returns nothing, TxBurst keeps frames for a few
// microseconds every 10 ms). A memif client reconnects to a server that came
// back (DpdkReconnect), and a server accepts a new client by itself.
//
// Frames are mbufs, never copied on receive: FrameRef::handle is the
// rte_mbuf*, FrameRef::data its data, and every pool is an rte_mempool (see
// "Pools" below). A port has one hardware RX and one hardware TX queue per
// ATP queue. Steering by UDP destination port uses an rte_flow rule per queue
// when the port validates one (Steering::kHardwareFlow); otherwise
// (Steering::kSoftware) each queue's thread polls its own hardware RX queue
// and hands the frames meant for other queues to them through a per-queue
// multi-producer ring:
//
//   hardware RX queue h --(polled only by queue h's thread)--> frames for h: returned at once
//                                                          \-> frames for q: ring q (lock-free,
//                                                              many producers, consumer q)
//
// Threads (software steering): every queue must be polled, because queue h's
// thread is the only one that reads hardware queue h, whatever the frames'
// destinations; a queue nobody polls starves the others of what its hardware
// queue received. Frames of one flow (one sender queue to one destination
// port) always take one path, so they stay in order.
//
// Pools: every DPDK pool object frees an mbuf into the rte_mempool it came
// from, so a received frame may be released from any thread and may come from
// another queue's pool (software steering) or, over net_ring, from the
// sender's TX pool (the ring passes mbufs, zero-copy). rx_pool() is the
// mempool this queue's hardware RX queue fills: rx_pool_frames for the
// application plus what the driver keeps posted (a NIC's descriptors, af_xdp's
// fill ring); its free_count() counts frames handed out by RxBurst and not
// returned, not the mempool, whose count drifts while the driver refills. Its
// headroom is DPDK's RTE_PKTMBUF_HEADROOM (128), which the drivers set.
// tx_pool() honours DeviceOptions::headroom. A TX frame from any DPDK pool is
// sent as it is (zero-copy forwarding), unless the port uses MBUF_FAST_FREE
// (then frames not from this queue's tx_pool() are copied); a frame from
// another kind of pool is copied into an mbuf. Mempools of a closed device
// are freed once every mbuf is back (frames still in a ring or held by a
// caller keep them alive), af_xdp's RX pools at once (the driver abandons
// the buffers it had posted).
//
// TX: TxBurst and TxSegmented put mbufs on a software transmit ring of
// tx_ring_frames and push it into the port at once; what the port refuses
// waits there, in order, until a later call or Flush(). Back-pressure: the
// software ring is full.
#ifndef ATP_TRANSPORT_DPDK_H_
#define ATP_TRANSPORT_DPDK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "atp/time.h"
#include "atp/transport.h"

namespace atp::transport {

// ---------------------------------------------------------------------------
// EAL

// DpdkMemory: where the EAL takes its memory from.
enum class DpdkMemory : uint8_t {
  kNoHugePages,        // --no-huge -m N --no-shconf: anonymous memory, no root, no files
  kHugePagesInMemory,  // --in-memory -m N: hugepages, no files left behind
  kHugePagesShared,    // --file-prefix=P --huge-unlink -m N: hugepages, shared config files
};

// DpdkTelemetry: whether the EAL opens its telemetry socket (/var/run/dpdk/...).
enum class DpdkTelemetry : uint8_t { kOff, kOn };

// DpdkEalOptions: the EAL's command line, built from fields. Validate() says
// which field is wrong; ToArgs() is the argv (after the program name) that
// InitDpdkEal passes to rte_eal_init.
struct DpdkEalOptions {
  std::string program_name = "libatp";
  // lcores: --lcores value ("0", "0-1", "0@(0-1)"). Empty: lcore 0 on every
  // CPU this process may run on ("0@(<affinity>)"), so the EAL pins nothing.
  std::string lcores;
  uint32_t memory_mb = 256;  // -m: MiB of memory for mempools and rings
  DpdkMemory memory = DpdkMemory::kNoHugePages;
  std::string file_prefix;  // kHugePagesShared only (required there)
  // vdevs: --vdev strings, probed at init ("net_memif0,role=server,socket=/run/a.sock").
  std::vector<std::string> vdevs;
  // pci_allow: PCI addresses to probe ("0000:3b:00.0"); empty: --no-pci.
  std::vector<std::string> pci_allow;
  // log_level: --log-level value ("warning", "lib.eal:debug").
  std::string log_level = "warning";
  DpdkTelemetry telemetry = DpdkTelemetry::kOff;
  // extra_args: appended verbatim (each one "--option" or "--option=value").
  std::vector<std::string> extra_args;

  absl::Status Validate() const;
  std::vector<std::string> ToArgs() const;
};

// InitDpdkEal: runs rte_eal_init once per process. Calling it again with
// options that give the same arguments returns OK; with different ones it
// fails (FailedPrecondition) naming both, since the EAL can be initialised
// only once per process (even after rte_eal_cleanup). A failed init is not
// retried: later calls return the same error. Thread-safe.
absl::Status InitDpdkEal(const DpdkEalOptions& options);

// DpdkEalArgs: the arguments the EAL was initialised with; empty if it was not.
std::vector<std::string> DpdkEalArgs();

// RegisterDpdkIoThread: gives the calling (non-EAL) thread an lcore id, so its
// mempool operations use a per-thread cache instead of the shared ring. A
// thread that calls a DpdkQueue's bursts is registered at its first burst
// anyway; this is for threads that want the id (or to know it is refused)
// before. The id is given back when the thread ends, or earlier at
// UnregisterDpdkIoThread (after the thread's mempool caches are flushed).
// ResourceExhausted when all RTE_MAX_LCORE ids are taken: the thread still
// works, without a cache.
absl::Status RegisterDpdkIoThread();
void UnregisterDpdkIoThread();

// DpdkThreadLcoreStats: the lcore ids this library gave to threads, in the
// whole process, monotonic (GetDpdkThreadLcoreStats; any thread).
struct DpdkThreadLcoreStats {
  uint64_t registered = 0;  // ids taken (rte_thread_register)
  uint64_t released = 0;    // ids given back (thread ended, UnregisterDpdkIoThread)
  uint64_t failures = 0;    // registrations refused (no id left): those threads run
                            // without a mempool cache
};
DpdkThreadLcoreStats GetDpdkThreadLcoreStats();

// ---------------------------------------------------------------------------
// Ports

// DpdkPortSource: how the device finds its port.
enum class DpdkPortSource : uint8_t {
  kProbed,      // `port` exists already (EAL --vdev, PCI allow-list, DpdkRingLink)
  kCreateVdev,  // rte_vdev_init(port, vdev_args) at open, rte_vdev_uninit at close
};

// DpdkSteering: how frames reach the queue their UDP destination port names.
enum class DpdkSteering : uint8_t {
  kAuto,          // rte_flow rules when the port validates them, else software
  kHardwareFlow,  // rte_flow rules or fail to open
  kSoftware,      // never install flow rules
};

// DpdkDestinations: which frames TxBurst sends.
enum class DpdkDestinations : uint8_t {
  kKnownPeers,  // IPv4 destination must be a peer (or this node) with that queue; else tx_unroutable
  kAny,         // anything that is a whole ATP frame (a switch port)
};

// DpdkPromiscuous: whether the port receives frames for other MACs.
enum class DpdkPromiscuous : uint8_t { kOff, kOn };

// DpdkReconnect: what a memif client port does while its link is down (its
// server died or closed the port): memif connects only when a port starts,
// so reconnecting means restarting the port.
enum class DpdkReconnect : uint8_t {
  kAuto,    // queue 0's RxBurst / Flush restart it, at most every 200 ms, when that
            // thread polls every queue (one queue, or DpdkPolling::kOneThread)
  kManual,  // only DpdkDevice::Reconnect restarts it
};

// DpdkPolling: which threads poll the device's queues.
enum class DpdkPolling : uint8_t {
  kThreadPerQueue,  // possibly one thread per queue
  kOneThread,       // one thread polls every queue (a switch's datapath)
};

// DpdkRxInterrupts: whether the queues' wait_fd() is the port's Rx
// interrupts, so that a runtime's back-off sleeps until a frame arrives
// instead of for a fixed time. The port is asked for them (intr_conf.rxq).
// A NIC's are armed (rte_eth_dev_rx_intr_enable) when RxBurst finds the
// queue's hardware queue empty and disarmed when frames come again, so a
// busy queue never touches them; net_tap's need no arming (the fd is the
// tap queue's own). net_tap and most NIC drivers (mlx5, mlx4,
// i40e, ice, ixgbe, igb, ena, bnxt, virtio...) have them; DPDK 22.11's
// net_memif, net_ring, net_af_packet and net_af_xdp do not (their queues
// return -1 and are polled). With software steering and several queues, a
// queue's wait_fd also wakes when another queue's thread hands it frames.
enum class DpdkRxInterrupts : uint8_t {
  kIfAvailable,  // when the driver has them; otherwise wait_fd() is -1
  kRequired,     // or fail to open, saying why
  kOff,          // never: wait_fd() is -1 (pure polling)
};

// DpdkPeer: a node reachable through the port, with its number of queues.
struct DpdkPeer {
  DeviceAddress address;
  uint32_t num_queues = 1;
};

struct DpdkOptions {
  DeviceOptions device;   // rx_ring_frames: descriptors per hardware RX queue and the
                          // software steering ring; tx_ring_frames: descriptors per
                          // hardware TX queue and the software transmit ring;
                          // rx_pool_frames: the application's share of each RX
                          // mempool (the driver's posted buffers come on top)
  DeviceAddress address;  // this node
  // port: the DPDK device name ("net_memif0", "0000:3b:00.0", a DpdkRingLink port).
  std::string port;
  std::string vdev_args;  // kCreateVdev: the devargs after the name ("role=client,id=0,...")
  DpdkPortSource source = DpdkPortSource::kProbed;
  // netns: a network namespace (/var/run/netns/<netns>, as `ip netns add`
  // makes) to enter while the port is created, configured and closed, for
  // net_af_packet / net_af_xdp on an interface inside it. Needs root.
  std::string netns;
  DpdkSteering steering = DpdkSteering::kAuto;
  DpdkDestinations destinations = DpdkDestinations::kKnownPeers;
  DpdkPromiscuous promiscuous = DpdkPromiscuous::kOff;
  std::vector<DpdkPeer> peers;  // this node is added automatically
  uint32_t mempool_cache = 256;  // per-lcore mbuf cache of each pool (capped at pool size / 2)
  // link_timeout: how long OpenDpdkDevice waits for the link (a memif peer
  // connecting, a NIC negotiating); zero: do not wait (see DpdkDevice::WaitForLink).
  TimeDelta link_timeout = TimeDelta::FromSeconds(2);
  // reconnect, polling: memif clients (see DpdkReconnect).
  DpdkReconnect reconnect = DpdkReconnect::kAuto;
  DpdkPolling polling = DpdkPolling::kThreadPerQueue;
  DpdkRxInterrupts rx_interrupts = DpdkRxInterrupts::kIfAvailable;

  absl::Status Validate() const;
};

// DpdkPortStats: the port's own counters (rte_eth_stats), all queues together.
struct DpdkPortStats {
  uint64_t ipackets = 0;
  uint64_t opackets = 0;
  uint64_t imissed = 0;    // dropped by the hardware: RX descriptors were full
  uint64_t ierrors = 0;
  uint64_t oerrors = 0;
  uint64_t rx_nombuf = 0;  // RX mbuf allocation failures
};

// DpdkDevice: a Device over one DPDK port.
class DpdkDevice : public Device {
 public:
  virtual uint16_t port_id() const = 0;
  // steering: what opening chose (kHardwareFlow or kSoftware).
  virtual Steering steering() const = 0;
  // tx_offloads: the RTE_ETH_TX_OFFLOAD_* bits enabled on the port.
  virtual uint64_t tx_offloads() const = 0;
  // link_up: the port's link state now. WaitForLink: polls it (sleeping
  // between tries) until up or `timeout` (DeadlineExceeded then). A memif
  // client it created restarts its port every 200 ms meanwhile (memif
  // connects only when a port starts, so a client started before its server
  // would never connect). Once up, a memif client hands the server its first
  // receive buffers (the server can send nothing before). Control path:
  // before the queues' threads start.
  virtual bool link_up() const = 0;
  virtual absl::Status WaitForLink(TimeDelta timeout) = 0;
  virtual DpdkPortStats port_stats() const = 0;
  // AddPeer: control path, no queue may be running. AlreadyExists if known.
  virtual absl::Status AddPeer(const DpdkPeer& peer) = 0;
  // Reconnect: a memif client whose link is down restarts its port, which
  // connects to the server if one listens (the handshake then completes on
  // the EAL interrupt thread: link_up() a few ms later). OK when it started,
  // or nothing was to be done (link up, not a memif client); Unavailable when
  // no server accepted. From the one thread that polls every queue of the
  // device, or while no queue is polled (never while another thread is
  // inside RxBurst / TxBurst / Flush of this device). DpdkReconnect::kAuto
  // calls it by itself.
  virtual absl::Status Reconnect() = 0;
};

// OpenDpdkDevice: configures and starts the port with num_queues RX and TX
// queues. Fails, saying why, when the EAL is not initialised, the options are
// invalid, the port does not exist or cannot give num_queues queues, memory
// runs out, or kHardwareFlow was asked for and the port cannot steer.
absl::StatusOr<std::unique_ptr<DpdkDevice>> OpenDpdkDevice(const DpdkOptions& options);

// ---------------------------------------------------------------------------
// Virtual devices

// MemifRole: the memif side that listens on the socket (server) or connects.
enum class MemifRole : uint8_t { kServer, kClient };
// MemifSocket: an abstract socket name (no file, scoped to the network
// namespace) or a path in the file system.
enum class MemifSocket : uint8_t { kAbstract, kFile };

// kMaxMemifSocketBytes: the longest socket path or abstract name a memif
// port can use (sockaddr_un::sun_path, its NUL excluded); a longer one fails
// late and obscurely inside DPDK (a client never connects).
inline constexpr size_t kMaxMemifSocketBytes = 107;

struct MemifOptions {
  MemifRole role = MemifRole::kServer;
  std::string socket = "/run/atp-memif.sock";
  MemifSocket socket_kind = MemifSocket::kAbstract;
  uint32_t id = 0;             // interface id: several ports share one socket with id=0,1,...
  uint32_t ring_frames = 1024;  // slots per memif ring (power of two, 2..32768)
};

// MemifVdevArgs: the net_memif devargs for `options` ("role=server,id=0,...").
std::string MemifVdevArgs(const MemifOptions& options);

// DpdkRingLink: two in-process ports ("net_ring_<name>_a", "_b") joined by
// rte_rings, queue i of one to queue i of the other: what A sends on its TX
// queue i, B receives on its RX queue i, as the same mbuf. Open each side with
// DpdkPortSource::kProbed. Destroy the link after both devices; it frees
// whatever mbufs are still in its rings.
struct DpdkRingLinkOptions {
  std::string name;             // unique in the process, at most 16 characters
  uint32_t num_queues = 1;      // queue pairs, 1..16
  uint32_t ring_frames = 1024;  // mbufs each ring holds (power of two)
};

class DpdkRingLink {
 public:
  enum class Side : uint8_t { kA, kB };

  static absl::StatusOr<std::unique_ptr<DpdkRingLink>> Create(const DpdkRingLinkOptions& options);
  virtual ~DpdkRingLink() = default;

  virtual const std::string& port_name(Side side) const = 0;
  // Inject: puts a copy of `bytes` on the ring that `to`'s RX queue `queue`
  // reads, as if the other side had sent it (for tests of malformed
  // arrivals). ResourceExhausted when the ring is full.
  virtual absl::Status Inject(Side to, uint32_t queue, std::span<const uint8_t> bytes) = 0;
};

}  // namespace atp::transport

#endif  // ATP_TRANSPORT_DPDK_H_
