// examples/common/endpoint.cc: BuildEndpoint, OpenEndpointDevice and the
// endpoint processes' small utilities (endpoint.h).
#include "examples/common/endpoint.h"

#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "atp/config.h"
#include "atp/status_macros.h"
#include "atp/transport/dpdk.h"
#include "lib/tool/flag_checks.h"

namespace atp::examples {
namespace {

wire::Ipv4Address Ip(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return wire::Ipv4Address{(uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | d};
}

absl::Status FlagError(absl::string_view flag, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", reason));
}

absl::StatusOr<wire::Ipv4Address> ParseIp(absl::string_view flag, const std::string& text) {
  absl::StatusOr<wire::Ipv4Address> ip = wire::Ipv4Address::Parse(text);
  if (!ip.ok()) return FlagError(flag, absl::StrCat("'", text, "' is not an IPv4 address"));
  return *ip;
}

bool IsMulticastIp(wire::Ipv4Address ip) { return (ip.value >> 28) == 0xe; }

// ParseHostIp: a node's own address: unicast, not 0.0.0.0 nor the broadcast.
absl::StatusOr<wire::Ipv4Address> ParseHostIp(absl::string_view flag, const std::string& text) {
  ATP_ASSIGN_OR_RETURN(wire::Ipv4Address ip, ParseIp(flag, text));
  if (IsMulticastIp(ip)) return FlagError(flag, absl::StrCat(text, " is a multicast address"));
  if (ip.value == 0 || ip.value == 0xFFFFFFFFu) {
    return FlagError(flag, absl::StrCat(text, " is not a host address"));
  }
  return ip;
}

transport::DeviceAddress MulticastAddress(wire::Ipv4Address ip) {
  // RFC 1112: 01:00:5e + the low 23 bits of the group.
  transport::DeviceAddress a;
  a.ipv4 = ip;
  a.mac.bytes = {0x01, 0x00, 0x5e, static_cast<uint8_t>((ip.value >> 16) & 0x7f),
                 static_cast<uint8_t>(ip.value >> 8), static_cast<uint8_t>(ip.value)};
  return a;
}

absl::Status CheckRange(absl::string_view flag, int value, int low, int high) {
  if (value < low || value > high) {
    return FlagError(flag, absl::StrCat(value, " is outside ", low, "..", high));
  }
  return absl::OkStatus();
}

// BuildDpdk: the DPDK side of BuildEndpoint.
absl::Status BuildDpdk(const EndpointFlags& flags, EndpointSpec& spec) {
  if (!TransportAvailable(TransportKind::kDpdk)) {
    return FlagError("transport", "dpdk: this build of libatp has no DPDK (LIBATP_WITH_DPDK)");
  }
  TransportOptions& t = spec.transport;
  t.kind = TransportKind::kDpdk;
  t.dpdk_eal.program_name = spec.place.program_name;
  ATP_RETURN_IF_ERROR(CheckRange("dpdk_memory_mb", flags.dpdk_memory_mb, 64, 1 << 20));
  t.dpdk_eal.memory_mb = static_cast<uint32_t>(flags.dpdk_memory_mb);
  t.dpdk_eal.log_level = "warning";
  // The memif driver logs every failed connection attempt (a client waiting
  // for its switch) and a harmless multi-process warning; OpenEndpointDevice
  // says what it is waiting for instead.
  t.dpdk_eal.extra_args.push_back("--log-level=pmd.net.memif:critical");
  transport::DpdkOptions& d = t.dpdk;
  d.device.num_queues = spec.job.io_threads;
  d.device.base_port = spec.job.base_port;
  d.address = spec.self;
  d.link_timeout = TimeDelta::Zero();  // OpenEndpointDevice waits, watching for signals
  d.destinations = transport::DpdkDestinations::kKnownPeers;
  const uint32_t queues = spec.job.io_threads;
  if (spec.place.role == EndpointRole::kWorker) {
    d.peers.push_back({spec.ps, queues});
  } else if (spec.place.delivery == ParameterDelivery::kMulticast) {
    d.peers.push_back({spec.group, queues});
  } else {
    for (const transport::DeviceAddress& w : spec.workers) {
      if (!(w.ipv4 == spec.self.ipv4)) d.peers.push_back({w, queues});
    }
  }
  const auto needs = [&](absl::string_view flag, const std::string& value) -> absl::Status {
    if (value.empty()) {
      return FlagError(flag, absl::StrCat("required with --dpdk_port=", flags.dpdk_port));
    }
    return absl::OkStatus();
  };
  std::string what;
  if (flags.dpdk_port == "memif") {
    ATP_RETURN_IF_ERROR(needs("memif_socket", flags.memif_socket));
    transport::MemifOptions memif;
    if (flags.memif_role == "client") {
      memif.role = transport::MemifRole::kClient;
    } else if (flags.memif_role == "server") {
      memif.role = transport::MemifRole::kServer;
    } else {
      return FlagError("memif_role", absl::StrCat("'", flags.memif_role, "' is not client or server"));
    }
    ATP_RETURN_IF_ERROR(CheckRange("memif_id", flags.memif_id, 0, 255));
    memif.id = static_cast<uint32_t>(flags.memif_id);
    if (absl::StartsWith(flags.memif_socket, "@")) {
      memif.socket = flags.memif_socket.substr(1);
      memif.socket_kind = transport::MemifSocket::kAbstract;
    } else {
      memif.socket = flags.memif_socket;
      memif.socket_kind = transport::MemifSocket::kFile;
    }
    if (memif.socket.empty() || memif.socket.find_first_of(", ") != std::string::npos ||
        memif.socket.size() > transport::kMaxMemifSocketBytes) {
      return FlagError("memif_socket",
                       absl::StrCat("'", flags.memif_socket, "': a path of at most ",
                                    transport::kMaxMemifSocketBytes, " bytes without ',' or ' '"));
    }
    if (memif.role == transport::MemifRole::kServer &&
        memif.socket_kind == transport::MemifSocket::kFile) {
      // The server creates the file: said here, not as DPDK's errno.
      std::error_code error;
      const std::filesystem::path socket(memif.socket);
      const std::filesystem::path directory =
          socket.has_parent_path() ? socket.parent_path() : std::filesystem::path(".");
      if (!std::filesystem::is_directory(directory, error)) {
        return FlagError("memif_socket", absl::StrCat("'", flags.memif_socket, "': no directory '",
                                                      directory.string(), "'"));
      }
      if (std::filesystem::exists(socket, error) && !std::filesystem::is_socket(socket, error)) {
        return FlagError("memif_socket",
                         absl::StrCat("'", flags.memif_socket, "' exists and is not a socket"));
      }
    }
    memif.ring_frames = d.device.rx_ring_frames;
    d.port = "net_memif_atp";
    d.source = transport::DpdkPortSource::kCreateVdev;
#if ATP_HAVE_DPDK  // MemifVdevArgs is DPDK's (this path returned above without it)
    d.vdev_args = transport::MemifVdevArgs(memif);
#endif
    what = absl::StrCat("memif ", flags.memif_role, " ", flags.memif_socket, " id ", flags.memif_id);
  } else if (flags.dpdk_port == "af_packet" || flags.dpdk_port == "af_xdp") {
    ATP_RETURN_IF_ERROR(needs("iface", flags.iface));
    const bool xdp = flags.dpdk_port == "af_xdp";
    d.port = xdp ? "net_af_xdp_atp" : "net_af_packet_atp";
    d.source = transport::DpdkPortSource::kCreateVdev;
    d.vdev_args = xdp ? absl::StrCat("iface=", flags.iface, ",start_queue=0,queue_count=", queues)
                      : absl::StrCat("iface=", flags.iface, ",qpairs=", queues,
                                     ",framecnt=", d.device.rx_ring_frames * 2);
    d.netns = flags.netns;
    what = absl::StrCat(flags.dpdk_port, " ", flags.iface,
                        flags.netns.empty() ? "" : absl::StrCat(" in netns ", flags.netns));
  } else if (flags.dpdk_port == "pci") {
    ATP_RETURN_IF_ERROR(needs("pci", flags.pci));
    d.port = flags.pci;
    d.source = transport::DpdkPortSource::kProbed;
    t.dpdk_eal.pci_allow.push_back(flags.pci);
    what = absl::StrCat("pci ", flags.pci);
  } else {
    return FlagError("dpdk_port",
                     absl::StrCat("'", flags.dpdk_port, "' is not memif, af_packet, af_xdp or pci"));
  }
  if (flags.dpdk_port != "memif") {
    // The memif flags would be ignored (their defaults: client, id 0).
    const EndpointFlags defaults;
    if (!flags.memif_socket.empty() || flags.memif_role != defaults.memif_role ||
        flags.memif_id != defaults.memif_id) {
      return FlagError(!flags.memif_socket.empty()            ? "memif_socket"
                       : flags.memif_role != defaults.memif_role ? "memif_role"
                                                                 : "memif_id",
                       absl::StrCat("only with --dpdk_port=memif, not ", flags.dpdk_port));
    }
  }
  if (!flags.iface.empty() && flags.dpdk_port != "af_packet" && flags.dpdk_port != "af_xdp") {
    return FlagError("iface", "only with --dpdk_port=af_packet or af_xdp");
  }
  if (!flags.pci.empty() && flags.dpdk_port != "pci") {
    return FlagError("pci", "only with --dpdk_port=pci");
  }
  if (!flags.netns.empty() && flags.dpdk_port != "af_packet" && flags.dpdk_port != "af_xdp") {
    return FlagError("netns", "only with --dpdk_port=af_packet or af_xdp");
  }
  // A worker receives the parameter packets at the group's MAC: a kernel
  // interface or a NIC filters it out unless promiscuous (memif does not filter).
  if (spec.place.role == EndpointRole::kWorker && flags.dpdk_port != "memif") {
    d.promiscuous = transport::DpdkPromiscuous::kOn;
  }
  if (absl::Status s = t.Validate("TransportOptions"); !s.ok()) {
    return FlagError("dpdk_port", s.message());
  }
  spec.description = absl::StrCat(spec.description, ", dpdk ", what);
  return absl::OkStatus();
}

absl::StatusOr<transport::SocketAddress> ParseSocket(absl::string_view flag, const std::string& text) {
  const size_t colon = text.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(colon + 1), &port) || port == 0 ||
      port > 65535) {
    return FlagError(flag, absl::StrCat("'", text, "' is not IP:PORT (127.0.0.1:47000)"));
  }
  ATP_ASSIGN_OR_RETURN(wire::Ipv4Address ip, ParseIp(flag, text.substr(0, colon)));
  return transport::SocketAddress{ip, static_cast<uint16_t>(port)};
}

// BuildKernelUdp: the kernel UDP overlay (KernelUdpEncapsulation::kWholeFrame):
// whole frames in datagrams, every frame to the gateway (the ToR switch
// process, or on a direct link the other endpoint), since the endpoint's
// table holds only itself.
absl::Status BuildKernelUdp(const EndpointFlags& flags, EndpointSpec& spec) {
  if (flags.udp_bind.empty()) return FlagError("udp_bind", "required with --transport=kernel_udp");
  if (flags.udp_gateway.empty()) {
    return FlagError("udp_gateway", "required with --transport=kernel_udp (the ToR's socket)");
  }
  for (const auto& [flag, value] : {std::pair<absl::string_view, const std::string&>{"memif_socket", flags.memif_socket},
                                    {"iface", flags.iface}, {"netns", flags.netns}, {"pci", flags.pci}}) {
    if (!value.empty()) return FlagError(flag, "only with --transport=dpdk");
  }
  const EndpointFlags defaults;
  if (flags.dpdk_port != defaults.dpdk_port) return FlagError("dpdk_port", "only with --transport=dpdk");
  if (flags.memif_role != defaults.memif_role) return FlagError("memif_role", "only with --transport=dpdk");
  if (flags.memif_id != defaults.memif_id) return FlagError("memif_id", "only with --transport=dpdk");
  if (flags.dpdk_memory_mb != defaults.dpdk_memory_mb) {
    return FlagError("dpdk_memory_mb", "only with --transport=dpdk");
  }
  transport::KernelUdpOptions& u = spec.transport.kernel_udp;
  spec.transport.kind = TransportKind::kKernelUdp;
  u.device.num_queues = spec.job.io_threads;
  u.device.base_port = spec.job.base_port;
  u.address = spec.self;
  ATP_ASSIGN_OR_RETURN(u.bind, ParseSocket("udp_bind", flags.udp_bind));
  if (u.bind.ip.value == 0) {
    return FlagError("udp_bind", absl::StrCat("'", flags.udp_bind,
                                             "': bind one local IPv4 (e.g. 127.0.0.1), not 0.0.0.0"));
  }
  ATP_ASSIGN_OR_RETURN(u.gateway, ParseSocket("udp_gateway", flags.udp_gateway));
  u.encapsulation = transport::KernelUdpEncapsulation::kWholeFrame;
  if (uint32_t{u.bind.port} + spec.job.io_threads - 1 > 65535) {
    return FlagError("udp_bind", absl::StrCat("ports ", u.bind.port, "..+", spec.job.io_threads - 1,
                                             " pass 65535"));
  }
  // Queue q binds bind.port + q and sends to gateway.port + q: a gateway on
  // this node's own sockets would send every frame back to itself.
  const transport::SocketAddress& gateway = *u.gateway;
  const bool same_host = u.bind.ip == gateway.ip || u.bind.ip.value == 0;
  if (same_host && gateway.port < uint32_t{u.bind.port} + spec.job.io_threads &&
      u.bind.port < uint32_t{gateway.port} + spec.job.io_threads) {
    return FlagError("udp_gateway", absl::StrCat(flags.udp_gateway, " is one of this node's own "
                                                 "sockets (--udp_bind=", flags.udp_bind, ", ",
                                                 spec.job.io_threads, " queue(s))"));
  }
  if (absl::Status s = spec.transport.Validate("TransportOptions"); !s.ok()) {
    return FlagError("transport", s.message());
  }
  spec.description = absl::StrCat(spec.description, ", kernel_udp overlay ", flags.udp_bind,
                                   " via ", flags.udp_gateway);
  return absl::OkStatus();
}

}  // namespace

transport::DeviceAddress WorkerAddress(uint8_t job, int rack, int index) {
  const wire::Ipv4Address ip = Ip(10, job, static_cast<uint8_t>(rack), static_cast<uint8_t>(index + 1));
  return {ip, transport::DefaultMacFor(ip)};
}

transport::DeviceAddress PsAddress(uint8_t job) {
  const wire::Ipv4Address ip = Ip(10, job, 200, 1);
  return {ip, transport::DefaultMacFor(ip)};
}

transport::DeviceAddress GroupAddress(uint8_t job) { return MulticastAddress(Ip(239, 1, 0, job)); }

// BuildCapture: --pcap_dir and its ring (atp/capture.h); files named after
// the endpoint ("ps", "w<rank>").
absl::Status BuildCapture(const EndpointFlags& flags, EndpointSpec& spec) {
  if (flags.pcap_dir.empty()) {
    const EndpointFlags defaults;
    if (flags.pcap_max_file_mb != defaults.pcap_max_file_mb) {
      return FlagError("pcap_max_file_mb", "only with --pcap_dir");
    }
    if (flags.pcap_max_files != defaults.pcap_max_files) {
      return FlagError("pcap_max_files", "only with --pcap_dir");
    }
    return absl::OkStatus();
  }
  CaptureOptions& c = spec.transport.capture;
  c.directory = flags.pcap_dir;
  c.name = spec.place.role == EndpointRole::kWorker ? absl::StrCat("w", spec.place.rank) : "ps";
  ATP_RETURN_IF_ERROR(CheckRange("pcap_max_file_mb", flags.pcap_max_file_mb, 1, 1 << 20));
  ATP_RETURN_IF_ERROR(CheckRange("pcap_max_files", flags.pcap_max_files, 1, 1 << 20));
  c.max_file_bytes = uint64_t{static_cast<uint32_t>(flags.pcap_max_file_mb)} << 20;
  c.max_files = static_cast<uint32_t>(flags.pcap_max_files);
  // The directory is checked as the flag's value: CaptureOptions::Validate
  // would name its own field ("--pcap_dir: capture.directory: ...").
  ATP_RETURN_IF_ERROR(tool::CheckWritableDirectory("pcap_dir", flags.pcap_dir));
  if (absl::Status s = c.Validate("--pcap_dir"); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  spec.description = absl::StrCat(spec.description, ", capturing to ", flags.pcap_dir);
  return absl::OkStatus();
}

absl::StatusOr<EndpointSpec> BuildEndpoint(const EndpointFlags& flags, const EndpointPlace& place) {
  EndpointSpec spec;
  spec.place = place;
  ATP_RETURN_IF_ERROR(CheckRange("job", flags.job, 1, 255));
  ATP_RETURN_IF_ERROR(CheckRange("racks", flags.racks, 1, 32));
  ATP_RETURN_IF_ERROR(CheckRange("workers_per_rack", flags.workers_per_rack, 1, 32));
  ATP_RETURN_IF_ERROR(CheckRange("io_threads", flags.io_threads, 1, 16));
  const uint8_t job = static_cast<uint8_t>(flags.job);
  spec.job.job_id = job;
  spec.job.layout = RackLayout::Uniform(flags.racks, flags.workers_per_rack);
  spec.job.io_threads = static_cast<uint32_t>(flags.io_threads);
  if (absl::Status s = spec.job.Validate("JobOptions"); !s.ok()) {
    return FlagError("job", s.message());
  }
  const int total = flags.racks * flags.workers_per_rack;
  for (int r = 0; r < flags.racks; ++r) {
    for (int i = 0; i < flags.workers_per_rack; ++i) spec.workers.push_back(WorkerAddress(job, r, i));
  }
  spec.ps = PsAddress(job);
  if (!flags.ps_address.empty()) {
    ATP_ASSIGN_OR_RETURN(wire::Ipv4Address ip, ParseHostIp("ps_address", flags.ps_address));
    spec.ps = {ip, transport::DefaultMacFor(ip)};
  }
  if (flags.source_check == "ipv4") {
    spec.source_check = SourceCheck::kIpv4;
  } else if (flags.source_check == "ipv4_mac") {
    spec.source_check = SourceCheck::kIpv4AndMac;
  } else if (flags.source_check == "off") {
    spec.source_check = SourceCheck::kOff;
  } else {
    return FlagError("source_check",
                     absl::StrCat("'", flags.source_check, "' is not ipv4, ipv4_mac or off"));
  }
  spec.group = GroupAddress(job);
  if (!flags.group.empty()) {
    ATP_ASSIGN_OR_RETURN(wire::Ipv4Address ip, ParseIp("group", flags.group));
    if (!IsMulticastIp(ip)) return FlagError("group", absl::StrCat(flags.group, " is not multicast (224.0.0.0/4)"));
    spec.group = MulticastAddress(ip);
  }
  if (place.role == EndpointRole::kWorker) {
    if (place.rank < 0 || place.rank >= total) {
      return FlagError("rank", absl::StrCat(place.rank, " is outside 0..", total - 1, " (--racks=",
                                            flags.racks, " x --workers_per_rack=",
                                            flags.workers_per_rack, ", rack-major)"));
    }
    spec.rack = place.rank / flags.workers_per_rack;
    spec.worker_in_rack = place.rank % flags.workers_per_rack;
    spec.self = spec.workers[static_cast<size_t>(place.rank)];
  } else {
    spec.self = spec.ps;
    if (!flags.address.empty() && !flags.ps_address.empty() && flags.address != flags.ps_address) {
      return FlagError("address", absl::StrCat(flags.address, " differs from --ps_address=",
                                               flags.ps_address, " (the PS's address; give one)"));
    }
  }
  if (!flags.address.empty()) {
    ATP_ASSIGN_OR_RETURN(wire::Ipv4Address ip, ParseHostIp("address", flags.address));
    spec.self = {ip, transport::DefaultMacFor(ip)};
    if (place.role == EndpointRole::kWorker) spec.workers[static_cast<size_t>(place.rank)] = spec.self;
  }
  if (place.role == EndpointRole::kWorker) {
    // Two workers, or a worker and the PS, on one address: the frames of
    // one would go to the other.
    for (size_t w = 0; w < spec.workers.size(); ++w) {
      if (w != static_cast<size_t>(place.rank) && spec.workers[w].ipv4 == spec.self.ipv4) {
        return FlagError("address", absl::StrCat(spec.self.ipv4.ToString(), " is worker ", w,
                                                 "'s address"));
      }
    }
    if (spec.self.ipv4 == spec.ps.ipv4) {
      return FlagError(flags.address.empty() ? "ps_address" : "address",
                       absl::StrCat(spec.self.ipv4.ToString(),
                                    " is both this worker's and the PS's address"));
    }
  }
  spec.description =
      place.role == EndpointRole::kWorker
          ? absl::StrCat("worker ", place.rank, " (rack ", spec.rack, ", ", spec.self.ipv4.ToString(),
                         ") of job ", flags.job, ", PS ", spec.ps.ipv4.ToString())
          : absl::StrCat("PS ", spec.self.ipv4.ToString(), " of job ", flags.job, " (", total,
                         " workers, ",
                         place.delivery == ParameterDelivery::kMulticast
                             ? absl::StrCat("multicast to ", spec.group.ipv4.ToString())
                             : std::string("unicast"),
                         ")");

  const bool udp_flags = !flags.udp_bind.empty() || !flags.udp_gateway.empty();
  if (flags.transport == "dpdk") {
    if (udp_flags) {
      return FlagError(flags.udp_bind.empty() ? "udp_gateway" : "udp_bind",
                       "only with --transport=kernel_udp");
    }
    ATP_RETURN_IF_ERROR(BuildDpdk(flags, spec));
  } else if (flags.transport == "kernel_udp" || flags.transport == "udp") {
    ATP_RETURN_IF_ERROR(BuildKernelUdp(flags, spec));
  } else if (flags.transport == "loopback") {
    return FlagError("transport", "loopback is in-process only; endpoint processes need dpdk or kernel_udp");
  } else {
    return FlagError("transport", absl::StrCat("'", flags.transport, "' is not dpdk or kernel_udp"));
  }
  ATP_RETURN_IF_ERROR(BuildCapture(flags, spec));
  return spec;
}

StopSignals::StopSignals() {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  sigaddset(&set_, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

StopSignals::Event StopSignals::Wait(absl::Duration timeout) {
  if (timeout < absl::ZeroDuration()) timeout = absl::ZeroDuration();
  const timespec ts = absl::ToTimespec(timeout);
  const int sig = sigtimedwait(&set_, nullptr, &ts);
  if (sig == SIGINT || sig == SIGTERM) {
    stop_signal_ = sig;
    return Event::kStop;
  }
  if (sig == SIGUSR1) return Event::kUser1;
  return Event::kNone;
}

bool StopSignals::Poll() {
  while (!stopped() && Wait(absl::ZeroDuration()) != Event::kNone) {
  }
  return stopped();
}

absl::StatusOr<std::unique_ptr<transport::Device>> OpenEndpointDevice(
    const EndpointSpec& spec, absl::Time deadline, StopSignals& stop, absl::Duration report_every) {
  const absl::Time start = absl::Now();
  absl::Time next_report = start + report_every;
  const auto waited = [&] { return absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(100))); };
  const auto report = [&](std::string_view what) {
    if (absl::Now() < next_report) return;
    std::fprintf(stderr, "%s: still waiting for %.*s (%s)\n", spec.place.program_name.c_str(),
                 static_cast<int>(what.size()), what.data(), waited().c_str());
    next_report = absl::Now() + report_every;
  };
  // A memif client cannot start its port before the server's socket exists:
  // it tries again every 200 ms.
  const bool memif_client = spec.transport.kind == TransportKind::kDpdk &&
                            absl::StartsWith(spec.transport.dpdk.port, "net_memif") &&
                            absl::StrContains(spec.transport.dpdk.vdev_args, "role=client");
  // The capture decorator goes on once the link is up (waiting needs the
  // DPDK device itself).
  TransportOptions uncaptured = spec.transport;
  uncaptured.capture = {};
  std::unique_ptr<transport::Device> device;
  for (;;) {
    absl::StatusOr<std::unique_ptr<transport::Device>> opened = OpenTransport(uncaptured);
    if (opened.ok()) {
      device = *std::move(opened);
      break;
    }
    if (!memif_client) return opened.status();
    if (stop.Wait(absl::Milliseconds(200)) == StopSignals::Event::kStop) {
      return absl::CancelledError("stopped by a signal while connecting");
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "could not connect to the memif server at ", spec.transport.dpdk.vdev_args, " within ",
          waited(), " (is the switch running and listening there?): ", opened.status().message()));
    }
    report("the memif server");
  }
  if (spec.transport.kind != TransportKind::kDpdk) {
    return CaptureDevice(std::move(device), spec.transport.capture);
  }
  auto* dpdk = dynamic_cast<transport::DpdkDevice*>(device.get());
  if (dpdk == nullptr) return absl::InternalError("a DPDK transport that is not a DpdkDevice");
  while (!dpdk->link_up()) {
    if (stop.Poll()) return absl::CancelledError("stopped by a signal while waiting for the link");
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the link of ", spec.transport.dpdk.port, " (", spec.transport.dpdk.vdev_args,
          ") did not come up within ", waited(),
          ": is the switch (or the memif peer) running, with the same socket and id?"));
    }
    report("the link");
    // WaitForLink restarts a memif client's port every 200 ms while down.
    const absl::Status s =
        dpdk->WaitForLink(TimeDelta::FromMilliseconds(std::min<int64_t>(
            200, std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - now)))));
    if (!s.ok() && s.code() != absl::StatusCode::kDeadlineExceeded) return s;
  }
  return CaptureDevice(std::move(device), spec.transport.capture);
}

nlohmann::json DeviceStatsJson(transport::Device& device, QueueCounters queues) {
  nlohmann::json j;
  j["backend"] = std::string(device.backend());
  j["address"] = device.address().ipv4.ToString();
  j["queues"] = device.num_queues();
  if (queues == QueueCounters::kRead) {
    transport::QueueStats sum;
    for (uint32_t q = 0; q < device.num_queues(); ++q) {
      const transport::QueueStats s = device.queue(q).stats();
      sum.rx_frames += s.rx_frames;
      sum.rx_bad_frames += s.rx_bad_frames;
      sum.rx_dropped += s.rx_dropped;
      sum.tx_frames += s.tx_frames;
      sum.tx_bad_frames += s.tx_bad_frames;
      sum.tx_unroutable += s.tx_unroutable;
      sum.tx_backpressure += s.tx_backpressure;
      sum.tx_errors += s.tx_errors;
      sum.tx_segmentation_jobs += s.tx_segmentation_jobs;
      sum.tx_offloaded_segments += s.tx_offloaded_segments;
    }
    j["rx_frames"] = sum.rx_frames;
    j["rx_bad_frames"] = sum.rx_bad_frames;
    j["rx_dropped"] = sum.rx_dropped;
    j["tx_frames"] = sum.tx_frames;
    j["tx_bad_frames"] = sum.tx_bad_frames;
    j["tx_unroutable"] = sum.tx_unroutable;
    j["tx_backpressure"] = sum.tx_backpressure;
    j["tx_errors"] = sum.tx_errors;
    j["tx_segmentation_jobs"] = sum.tx_segmentation_jobs;
    j["tx_offloaded_segments"] = sum.tx_offloaded_segments;
  }
  if (auto* dpdk = dynamic_cast<transport::DpdkDevice*>(&UncapturedDevice(device)); dpdk != nullptr) {
    const transport::DpdkPortStats p = dpdk->port_stats();
    j["port"] = {{"link_up", dpdk->link_up()}, {"ipackets", p.ipackets}, {"opackets", p.opackets},
                 {"imissed", p.imissed},      {"ierrors", p.ierrors},   {"oerrors", p.oerrors},
                 {"rx_nombuf", p.rx_nombuf}};
  }
  return j;
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot rename ", tmp, " to ", path, ": errno ", errno));
  }
  return absl::OkStatus();
}

}  // namespace atp::examples
