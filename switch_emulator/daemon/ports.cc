#include "switch_emulator/daemon/ports.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "atp/config.h"
#include "atp/status_macros.h"
#include "atp/transport/kernel_udp.h"
#include "lib/logging/log.h"
#if ATP_HAVE_DPDK
#include "atp/transport/dpdk.h"
#endif

namespace atp::switchd {
namespace {

absl::Status PortError(const PortConfig& port, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("port '", port.name, "' (", std::string(PortTypeName(port.type)),
                                                  ", line ", port.line, "): ", status.message()));
}

transport::DeviceOptions DeviceOptionsFor(const SwitchdConfig& config, const PortConfig& port) {
  transport::DeviceOptions device;
  device.num_queues = port.queues;
  device.base_port = config.base_port;
  return device;
}

absl::StatusOr<std::unique_ptr<transport::Device>> OpenKernelUdpPort(const SwitchdConfig& config,
                                                                    const PortConfig& port) {
  transport::KernelUdpOptions options;
  options.device = DeviceOptionsFor(config, port);
  options.address = {config.address, config.mac};
  options.bind = {port.bind_ip, port.bind_port};
  options.encapsulation = transport::KernelUdpEncapsulation::kWholeFrame;
  // The node behind the port is its only neighbour: every frame goes there.
  options.gateway = transport::SocketAddress{port.peer_ip, port.peer_port};
  ATP_ASSIGN_OR_RETURN(std::unique_ptr<transport::KernelUdpDevice> device,
                       transport::OpenKernelUdpDevice(options));
  return std::unique_ptr<transport::Device>(std::move(device));
}

#if ATP_HAVE_DPDK

// ListenerOf: the path a Unix socket listening on this host (this network
// namespace) was bound to that names the file `path`, from /proc/net/unix
// (flags __SO_ACCEPTCON), if any; nullopt when there is none or the table
// cannot be read. A relative bound path counts when its last part matches
// (the listener's working directory is unknown: better refused than a live
// server's socket removed).
std::optional<std::string> ListenerOf(const std::string& path) {
  constexpr unsigned long kAcceptCon = 0x00010000;  // include/net/af_unix.h
  std::error_code error;
  const std::filesystem::path ours =
      std::filesystem::weakly_canonical(std::filesystem::absolute(path, error), error);
  if (error) return std::nullopt;
  std::ifstream table("/proc/net/unix");
  std::string line;
  std::getline(table, line);  // the column names
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, refs, protocol, flags, type, state, inode, bound;
    if (!(fields >> slot >> refs >> protocol >> flags >> type >> state >> inode >> bound)) continue;
    if ((std::strtoul(flags.c_str(), nullptr, 16) & kAcceptCon) == 0 || bound.empty() ||
        bound[0] == '@') {
      continue;
    }
    const std::filesystem::path theirs(bound);
    if (theirs.is_absolute()
            ? std::filesystem::weakly_canonical(theirs, error) == ours && !error
            : theirs.filename() == ours.filename()) {
      return bound;
    }
  }
  return std::nullopt;
}

// RemoveStaleSocket: a socket file nobody listens on (its server died) is
// removed so that a new server can bind; one a live process listens on is
// refused. The listeners of this network namespace are read from
// /proc/net/unix, never probed by connecting: DPDK 22.11's memif server
// panics (epoll_ctl on a closed fd, in its interrupt thread) when a client
// connects and closes at once, so a second atp-switchd on the same
// configuration used to kill the first. A listener in another network
// namespace is invisible there: only then does a connect tell.
absl::Status RemoveStaleSocket(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::AlreadyExistsError(absl::StrCat(path, " exists and is not a socket"));
  }
  if (const std::optional<std::string> listener = ListenerOf(path)) {
    return absl::AlreadyExistsError(absl::StrCat(
        path, ": another process listens on this memif socket",
        *listener == path ? "" : absl::StrCat(" (bound as '", *listener, "')")));
  }
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", std::strerror(errno)));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int ret = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int error = errno;
  ::close(fd);
  if (ret == 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        path, ": another process listens on this memif socket (from another network namespace)"));
  }
  if (error != ECONNREFUSED) return absl::OkStatus();  // let DPDK report what is wrong
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(absl::StrCat("removing stale ", path, ": ", std::strerror(errno)));
  }
  internal::Logger().info("removed stale memif socket {}", path);
  return absl::OkStatus();
}

absl::Status InitEal(const SwitchdConfig& config) {
  transport::DpdkEalOptions eal;
  eal.program_name = "atp-switchd";
  eal.memory_mb = config.dpdk.memory_mb;
  eal.memory = config.dpdk.hugepages ? transport::DpdkMemory::kHugePagesInMemory
                                     : transport::DpdkMemory::kNoHugePages;
  eal.log_level = config.dpdk.log_level;
  for (const PortConfig& port : config.ports) {
    if (port.type == PortType::kPci) eal.pci_allow.push_back(port.pci);
  }
  // memif logs at ERR that it cannot register a multi-process handler, which
  // the EAL's --no-shconf disables on purpose.
  eal.extra_args = {"--log-level=pmd.net.memif:critical"};
  return transport::InitDpdkEal(eal);
}

absl::StatusOr<std::unique_ptr<transport::DpdkDevice>> OpenDpdkPort(const SwitchdConfig& config,
                                                                   const PortConfig& port) {
  transport::DpdkOptions options;
  options.device = DeviceOptionsFor(config, port);
  options.address = {config.address, config.mac};
  options.destinations = transport::DpdkDestinations::kAny;
  options.promiscuous = transport::DpdkPromiscuous::kOn;
  options.link_timeout = TimeDelta::Zero();  // memif clients wait below, after every port is open
  // One datapath thread polls every queue of every port: a memif client port
  // whose server restarts reconnects from that thread (DpdkReconnect::kAuto).
  options.reconnect = transport::DpdkReconnect::kAuto;
  options.polling = transport::DpdkPolling::kOneThread;
  options.rx_interrupts = config.dpdk.rx_interrupts;
  options.source = transport::DpdkPortSource::kCreateVdev;
  switch (port.type) {
    case PortType::kMemif: {
      transport::MemifOptions memif;
      memif.role = port.role == MemifPortRole::kServer ? transport::MemifRole::kServer
                                                       : transport::MemifRole::kClient;
      memif.socket = port.socket;
      memif.socket_kind = transport::MemifSocket::kFile;
      memif.id = port.memif_id;
      if (port.role == MemifPortRole::kServer) ATP_RETURN_IF_ERROR(RemoveStaleSocket(port.socket));
      options.port = absl::StrCat("net_memif_", port.name);
      options.vdev_args = transport::MemifVdevArgs(memif);
      break;
    }
    case PortType::kAfPacket:
      options.port = absl::StrCat("net_af_packet_", port.name);
      options.vdev_args = absl::StrCat("iface=", port.iface, ",qpairs=", port.queues,
                                       ",framecnt=", options.device.rx_ring_frames * 2);
      options.netns = port.netns;
      break;
    case PortType::kAfXdp:
      options.port = absl::StrCat("net_af_xdp_", port.name);
      options.vdev_args =
          absl::StrCat("iface=", port.iface, ",start_queue=0,queue_count=", port.queues);
      options.netns = port.netns;
      break;
    case PortType::kPci:
      options.port = port.pci;
      options.source = transport::DpdkPortSource::kProbed;
      break;
    case PortType::kKernelUdp:
      return absl::InternalError("not a DPDK port");
  }
  return transport::OpenDpdkDevice(options);
}

#endif  // ATP_HAVE_DPDK

}  // namespace

absl::StatusOr<OpenedPorts> OpenPorts(const SwitchdConfig& config) {
  OpenedPorts opened;
#if ATP_HAVE_DPDK
  if (config.HasDpdkPorts()) {
    if (absl::Status s = InitEal(config); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("DPDK EAL: ", s.message()));
    }
    opened.dpdk = true;
  }
  std::vector<std::pair<transport::DpdkDevice*, const PortConfig*>> memif_clients;
#endif
  for (const PortConfig& port : config.ports) {
    if (port.type == PortType::kKernelUdp) {
      absl::StatusOr<std::unique_ptr<transport::Device>> device = OpenKernelUdpPort(config, port);
      if (!device.ok()) return PortError(port, device.status());
      opened.devices.push_back(*std::move(device));
      continue;
    }
#if ATP_HAVE_DPDK
    absl::StatusOr<std::unique_ptr<transport::DpdkDevice>> device = OpenDpdkPort(config, port);
    if (!device.ok()) return PortError(port, device.status());
    if (port.type == PortType::kMemif && port.role == MemifPortRole::kClient) {
      memif_clients.emplace_back(device->get(), &port);
    }
    internal::Logger().info("port {}: {} {} queue(s), steering {}", port.name, PortTypeName(port.type),
                            port.queues, transport::SteeringName((*device)->steering()));
    opened.devices.push_back(*std::move(device));
#else
    return PortError(port, absl::UnimplementedError(
                               "this atp-switchd was built without DPDK (libdpdk-dev missing)"));
#endif
  }
#if ATP_HAVE_DPDK
  for (auto [device, port] : memif_clients) {
    if (absl::Status s = device->WaitForLink(config.link_timeout); !s.ok()) return PortError(*port, s);
  }
#endif
  return opened;
}

std::function<void()> DpdkThreadStartHook() {
#if ATP_HAVE_DPDK
  return [] {
    if (absl::Status s = transport::RegisterDpdkIoThread(); !s.ok()) {
      internal::Logger().warn("datapath thread: {}", std::string(s.message()));
    }
  };
#else
  return [] {};
#endif
}

std::function<void()> DpdkThreadStopHook() {
#if ATP_HAVE_DPDK
  return [] { transport::UnregisterDpdkIoThread(); };
#else
  return [] {};
#endif
}

}  // namespace atp::switchd
