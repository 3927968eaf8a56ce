#include "switch_emulator/daemon/config.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "atp/status_macros.h"
#include "atp/transport.h"
#include "atp/transport/dpdk.h"
#include "switch_emulator/daemon/yaml_reader.h"

namespace atp::switchd {
namespace {

using internal::MapReader;
using internal::YamlContext;
using internal::YamlField;
using switch_emulator::AggregatorSlice;
using switch_emulator::JobLevels;
using switch_emulator::PartitionMode;

constexpr size_t kMaxNameBytes = 32;
constexpr size_t kMaxSocketPathBytes = transport::kMaxMemifSocketBytes;
constexpr size_t kMaxIfaceBytes = 15;        // IFNAMSIZ - 1
constexpr uint64_t kMaxRateMbps = 1'000'000;  // a port's rate_mbps: up to 1 Tb/s
constexpr uint64_t kMaxQueueFrames = 65536;   // a rate-limited queue's FIFO

bool IsMulticastGroup(wire::Ipv4Address ip) { return (ip.value >> 28) == 0xE; }

bool IsAfPort(PortType type) { return type == PortType::kAfPacket || type == PortType::kAfXdp; }

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

// CanonicalSocketFile: a memif socket path made absolute and lexically
// normal, with symbolic links of the parts that exist resolved, so that one
// file has one spelling ("/tmp/a.sock", "/tmp/./a.sock" and "a.sock" from
// /tmp are one). File system calls: once per port, never per pair.
std::string CanonicalSocketFile(const std::string& path) {
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return std::filesystem::path(path).lexically_normal().string();
  const std::filesystem::path resolved = std::filesystem::weakly_canonical(absolute, error);
  return (error ? absolute.lexically_normal() : resolved).string();
}

// ValidPci: "DDDD:BB:DD.F" (domain, bus, device, function in hex).
bool ValidPci(absl::string_view pci) {
  if (pci.size() != 12) return false;
  for (size_t i = 0; i < pci.size(); ++i) {
    const char c = pci[i];
    if (i == 4 || i == 7) {
      if (c != ':') return false;
    } else if (i == 10) {
      if (c != '.') return false;
    } else if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view path) : ctx_{std::string(path)} {}

  absl::StatusOr<SwitchdConfig> Parse(std::string_view text) {
    ATP_ASSIGN_OR_RETURN(YAML::Node root, internal::LoadOneDocument(ctx_, std::string(text)));
    config_.path = ctx_.path;
    ATP_ASSIGN_OR_RETURN(MapReader top, MapReader::Create(ctx_, YamlField{root, 1}, "config"));
    ATP_RETURN_IF_ERROR(ParseTop(top));
    ATP_RETURN_IF_ERROR(top.Finish());
    return std::move(config_);
  }

 private:
  absl::Status ParseTop(MapReader& top) {
    ATP_ASSIGN_OR_RETURN(YamlField name, top.Require("name"));
    ATP_ASSIGN_OR_RETURN(config_.name, ctx_.String(name, "name"));
    if (!ValidName(config_.name)) {
      return ctx_.ErrorAt(name, absl::StrCat("name: '", config_.name, "' must be 1..", kMaxNameBytes,
                                             " letters, digits, '_', '-' or '.'"));
    }
    ATP_ASSIGN_OR_RETURN(YamlField address, top.Require("address"));
    ATP_ASSIGN_OR_RETURN(config_.address, ctx_.Ipv4(address, "address"));
    if (IsMulticastGroup(config_.address) || config_.address.value == 0 ||
        config_.address.value == UINT32_MAX) {
      return ctx_.ErrorAt(address, absl::StrCat("address: ", config_.address.ToString(),
                                                " is not a unicast host address"));
    }
    config_.mac = transport::DefaultMacFor(config_.address);
    if (std::optional<YamlField> f = top.Take("mac")) {
      ATP_ASSIGN_OR_RETURN(std::string text, ctx_.String(*f, "mac"));
      absl::StatusOr<wire::MacAddress> mac = wire::MacAddress::Parse(text);
      if (!mac.ok()) {
        return ctx_.ErrorAt(*f, absl::StrCat("mac: '", text, "' is not a MAC (02:00:00:00:00:01)"));
      }
      if (mac->IsMulticast()) {
        return ctx_.ErrorAt(*f, absl::StrCat("mac: '", text,
                                             "' is a multicast MAC (its first byte is odd)"));
      }
      if (*mac == wire::MacAddress{}) {
        return ctx_.ErrorAt(*f, absl::StrCat("mac: '", text, "' is the all-zero MAC, no host's"));
      }
      config_.mac = *mac;
    }
    if (std::optional<YamlField> f = top.Take("aggregators")) {
      ATP_ASSIGN_OR_RETURN(config_.aggregators,
                           ctx_.Uint(*f, "aggregators", 1, switch_emulator::kMaxAggregators));
    }
    if (std::optional<YamlField> f = top.Take("partition")) {
      ATP_ASSIGN_OR_RETURN(size_t i, ctx_.OneOf(*f, "partition", {"dynamic", "static"}));
      config_.partition = i == 0 ? PartitionMode::kDynamic : PartitionMode::kStatic;
    }
    if (std::optional<YamlField> f = top.Take("ecn_threshold")) {
      ATP_ASSIGN_OR_RETURN(config_.ecn_threshold, ctx_.Uint(*f, "ecn_threshold", 0, UINT32_MAX));
    }
    if (std::optional<YamlField> f = top.Take("orphan_timeout_ms")) {
      ATP_ASSIGN_OR_RETURN(uint64_t ms, ctx_.Uint(*f, "orphan_timeout_ms", 1, 3'600'000));
      config_.orphan_timeout = TimeDelta::FromMilliseconds(static_cast<int64_t>(ms));
    }
    if (std::optional<YamlField> f = top.Take("link_timeout_ms")) {
      ATP_ASSIGN_OR_RETURN(uint64_t ms, ctx_.Uint(*f, "link_timeout_ms", 0, 3'600'000));
      config_.link_timeout = TimeDelta::FromMilliseconds(static_cast<int64_t>(ms));
    }
    if (std::optional<YamlField> f = top.Take("base_port")) {
      ATP_ASSIGN_OR_RETURN(config_.base_port, ctx_.Uint(*f, "base_port", 1, 65535 - 15));
    }
    const std::optional<YamlField> dpdk = top.Take("dpdk");
    if (dpdk) ATP_RETURN_IF_ERROR(ParseDpdk(*dpdk));
    ATP_ASSIGN_OR_RETURN(YamlField ports, top.Require("ports"));
    ATP_RETURN_IF_ERROR(ParsePorts(ports));
    ATP_RETURN_IF_ERROR(CheckPortsDistinct());
    if (dpdk && !config_.HasDpdkPorts()) {
      // Its settings would be silently ignored: DPDK is never started.
      return ctx_.ErrorAt(*dpdk, "dpdk: no port uses DPDK (every port is kernel_udp)");
    }
    if (std::optional<YamlField> f = top.Take("routes")) ATP_RETURN_IF_ERROR(ParseRoutes(*f));
    if (std::optional<YamlField> f = top.Take("multicast")) ATP_RETURN_IF_ERROR(ParseMulticast(*f));
    if (std::optional<YamlField> f = top.Take("jobs")) ATP_RETURN_IF_ERROR(ParseJobs(*f));
    return absl::OkStatus();
  }

  absl::Status ParseDpdk(const YamlField& f) {
    ATP_ASSIGN_OR_RETURN(MapReader dpdk, MapReader::Create(ctx_, f, "dpdk"));
    if (std::optional<YamlField> v = dpdk.Take("memory_mb")) {
      ATP_ASSIGN_OR_RETURN(config_.dpdk.memory_mb, ctx_.Uint(*v, "dpdk.memory_mb", 16, 1 << 20));
    }
    if (std::optional<YamlField> v = dpdk.Take("hugepages")) {
      ATP_ASSIGN_OR_RETURN(config_.dpdk.hugepages, ctx_.Bool(*v, "dpdk.hugepages"));
    }
    if (std::optional<YamlField> v = dpdk.Take("log_level")) {
      // The EAL's --log-level names (rte_log.h), or their numbers 1..8.
      const std::vector<absl::string_view> levels = {"emergency", "alert", "critical", "error",
                                                     "warning",   "notice", "info",    "debug",
                                                     "1", "2", "3", "4", "5", "6", "7", "8"};
      ATP_ASSIGN_OR_RETURN(size_t level, ctx_.OneOf(*v, "dpdk.log_level", levels));
      config_.dpdk.log_level = std::string(levels[level]);
    }
    if (std::optional<YamlField> v = dpdk.Take("rx_interrupts")) {
      constexpr transport::DpdkRxInterrupts kChoices[] = {transport::DpdkRxInterrupts::kIfAvailable,
                                                          transport::DpdkRxInterrupts::kRequired,
                                                          transport::DpdkRxInterrupts::kOff};
      ATP_ASSIGN_OR_RETURN(size_t choice,
                           ctx_.OneOf(*v, "dpdk.rx_interrupts", {"auto", "required", "off"}));
      config_.dpdk.rx_interrupts = kChoices[choice];
    }
    return dpdk.Finish();
  }

  // ParseSocket: "a.b.c.d:port", port 1..65535 with room for max(queues,
  // min_span) consecutive ports (a kernel UDP gateway always spans 16).
  absl::Status ParseSocket(const YamlField& f, absl::string_view field, uint32_t queues,
                           uint32_t min_span, wire::Ipv4Address* ip, uint16_t* port) {
    ATP_ASSIGN_OR_RETURN(std::string text, ctx_.String(f, field));
    const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
    uint32_t value = 0;
    absl::StatusOr<wire::Ipv4Address> parsed =
        parts.size() == 2 ? wire::Ipv4Address::Parse(std::string_view(parts[0].data(), parts[0].size()))
                          : absl::InvalidArgumentError("not ip:port");
    if (!parsed.ok() || !absl::SimpleAtoi(parts[1], &value) || value == 0 ||
        value + std::max<uint32_t>(queues, min_span) - 1 > 65535) {
      return ctx_.ErrorAt(f, absl::StrCat(field, ": '", text,
                                          "' is not IPv4:port with room for ",
                                          std::max<uint32_t>(queues, min_span),
                                          " queue port(s) below 65536"));
    }
    *ip = *parsed;
    *port = static_cast<uint16_t>(value);
    return absl::OkStatus();
  }

  absl::Status ParsePorts(const YamlField& list) {
    ATP_RETURN_IF_ERROR(ctx_.Sequence(list, "ports"));
    if (list.node.size() == 0) return ctx_.ErrorAt(list, "ports: needs at least one port");
    for (size_t i = 0; i < list.node.size(); ++i) {
      const std::string field = absl::StrCat("ports[", i, "]");
      ATP_ASSIGN_OR_RETURN(MapReader m, MapReader::Create(ctx_, list.Item(list.node[i]), field));
      PortConfig port;
      port.line = m.line();
      ATP_ASSIGN_OR_RETURN(YamlField name, m.Require("name"));
      ATP_ASSIGN_OR_RETURN(port.name, ctx_.String(name, field + ".name"));
      if (!ValidName(port.name)) {
        return ctx_.ErrorAt(name, absl::StrCat(field, ".name: '", port.name, "' must be 1..",
                                               kMaxNameBytes, " letters, digits, '_', '-' or '.'"));
      }
      for (const PortConfig& other : config_.ports) {
        if (other.name == port.name) {
          return ctx_.ErrorAt(name, absl::StrCat(field, ".name: duplicate port name '", port.name,
                                                 "' (first on line ", other.line, ")"));
        }
      }
      ATP_ASSIGN_OR_RETURN(YamlField type, m.Require("type"));
      ATP_ASSIGN_OR_RETURN(size_t t, ctx_.OneOf(type, field + ".type",
                                                {"memif", "af_packet", "af_xdp", "pci", "kernel_udp"}));
      port.type = static_cast<PortType>(t);
      if (std::optional<YamlField> q = m.Take("queues")) {
        ATP_ASSIGN_OR_RETURN(port.queues, ctx_.Uint(*q, field + ".queues", 1, transport::kMaxQueues));
      }
      if (std::optional<YamlField> pcap = m.Take("pcap")) {
        ATP_ASSIGN_OR_RETURN(port.pcap, ctx_.Bool(*pcap, field + ".pcap"));
      }
      if (std::optional<YamlField> rate = m.Take("rate_mbps")) {
        ATP_ASSIGN_OR_RETURN(port.rate_mbps, ctx_.Uint(*rate, field + ".rate_mbps", 1, kMaxRateMbps));
      }
      if (std::optional<YamlField> frames = m.Take("queue_frames")) {
        if (port.rate_mbps == 0) {
          return ctx_.ErrorAt(*frames, absl::StrCat(field, ".queue_frames: only with rate_mbps "
                                                           "(a port without a rate holds no queue of its own)"));
        }
        ATP_ASSIGN_OR_RETURN(port.queue_frames,
                             ctx_.Uint(*frames, field + ".queue_frames", 1, kMaxQueueFrames));
      }
      if (std::optional<YamlField> admits = m.Take("admits")) {
        ATP_RETURN_IF_ERROR(ParseAdmits(*admits, field + ".admits", &port));
      }
      switch (port.type) {
        case PortType::kMemif: {
          ATP_ASSIGN_OR_RETURN(YamlField socket, m.Require("socket"));
          ATP_ASSIGN_OR_RETURN(port.socket, ctx_.String(socket, field + ".socket"));
          if (port.socket.size() > kMaxSocketPathBytes || port.socket.find(',') != std::string::npos) {
            return ctx_.ErrorAt(socket, absl::StrCat(field, ".socket: a path of at most ",
                                                     kMaxSocketPathBytes, " bytes without ','"));
          }
          if (std::optional<YamlField> r = m.Take("role")) {
            ATP_ASSIGN_OR_RETURN(size_t role, ctx_.OneOf(*r, field + ".role", {"server", "client"}));
            port.role = role == 0 ? MemifPortRole::kServer : MemifPortRole::kClient;
          }
          if (std::optional<YamlField> id = m.Take("id")) {
            ATP_ASSIGN_OR_RETURN(port.memif_id, ctx_.Uint(*id, field + ".id", 0, 65535));
          }
          break;
        }
        case PortType::kAfPacket:
        case PortType::kAfXdp: {
          ATP_ASSIGN_OR_RETURN(YamlField iface, m.Require("iface"));
          ATP_ASSIGN_OR_RETURN(port.iface, ctx_.String(iface, field + ".iface"));
          if (port.iface.size() > kMaxIfaceBytes || port.iface.find(',') != std::string::npos) {
            return ctx_.ErrorAt(iface, absl::StrCat(field, ".iface: an interface name of at most ",
                                                    kMaxIfaceBytes, " bytes"));
          }
          if (std::optional<YamlField> ns = m.Take("netns")) {
            ATP_ASSIGN_OR_RETURN(port.netns, ctx_.String(*ns, field + ".netns"));
          }
          break;
        }
        case PortType::kPci: {
          ATP_ASSIGN_OR_RETURN(YamlField pci, m.Require("pci"));
          ATP_ASSIGN_OR_RETURN(port.pci, ctx_.String(pci, field + ".pci"));
          if (!ValidPci(port.pci)) {
            return ctx_.ErrorAt(pci, absl::StrCat(field, ".pci: '", port.pci,
                                                  "' is not a PCI address (0000:3b:00.0)"));
          }
          break;
        }
        case PortType::kKernelUdp: {
          ATP_ASSIGN_OR_RETURN(YamlField bind, m.Require("bind"));
          ATP_RETURN_IF_ERROR(
              ParseSocket(bind, field + ".bind", port.queues, 1, &port.bind_ip, &port.bind_port));
          ATP_ASSIGN_OR_RETURN(YamlField peer, m.Require("peer"));
          ATP_RETURN_IF_ERROR(
              ParseSocket(peer, field + ".peer", port.queues, transport::kMaxQueues, &port.peer_ip, &port.peer_port));
          // The port takes datagrams from the peer's address only: a
          // wildcard, broadcast or group address matches no sender.
          if (port.peer_ip.value == 0 || port.peer_ip.value == UINT32_MAX ||
              IsMulticastGroup(port.peer_ip)) {
            return ctx_.ErrorAt(peer, absl::StrCat(field, ".peer: ", port.peer_ip.ToString(),
                                                   " is not one host's address (the port takes "
                                                   "datagrams from the peer only)"));
          }
          break;
        }
      }
      ATP_RETURN_IF_ERROR(m.Finish());
      config_.ports.push_back(std::move(port));
    }
    return absl::OkStatus();
  }

  // CheckPortsDistinct: no two ports may open the same resource (a kernel
  // UDP socket, a memif socket and id, an interface, a NIC), and no kernel
  // UDP port may send into a socket this switch binds itself (a loop): the
  // second would fail to open at start, or steal or echo the first one's
  // frames, so the configuration is refused (blamed on the later port).
  absl::Status CheckPortsDistinct() const {
    const auto overlap = [](uint32_t a, uint32_t a_count, uint32_t b, uint32_t b_count) {
      return a < b + b_count && b < a + a_count;
    };
    // Same host address, or one of them is the wildcard 0.0.0.0.
    const auto same_host = [](wire::Ipv4Address a, wire::Ipv4Address b) {
      return a == b || a.value == 0 || b.value == 0;
    };
    std::vector<std::string> sockets(config_.ports.size());  // canonical, memif ports only
    for (size_t i = 0; i < config_.ports.size(); ++i) {
      if (config_.ports[i].type == PortType::kMemif) {
        sockets[i] = CanonicalSocketFile(config_.ports[i].socket);
      }
    }
    for (size_t i = 0; i < config_.ports.size(); ++i) {
      const PortConfig& p = config_.ports[i];
      const std::string field = absl::StrCat("ports[", i, "]");
      if (p.type == PortType::kKernelUdp) {
        // Queue q binds bind_port + q and sends to peer_port + q.
        for (size_t j = 0; j <= i; ++j) {
          const PortConfig& o = config_.ports[j];
          if (o.type != PortType::kKernelUdp) continue;
          if (j < i && same_host(p.bind_ip, o.bind_ip) &&
              overlap(p.bind_port, p.queues, o.bind_port, o.queues)) {
            return ctx_.Error(p.line, absl::StrCat(field, ".bind: ", p.bind_ip.ToString(), ":",
                                                   p.bind_port, "..+", p.queues - 1,
                                                   " overlaps port '", o.name, "' (line ", o.line,
                                                   "), which binds ", o.bind_ip.ToString(), ":",
                                                   o.bind_port, "..+", o.queues - 1));
          }
          // p sends into o's sockets, or o into p's.
          for (const auto& [from, to] : {std::pair<const PortConfig*, const PortConfig*>{&p, &o},
                                         {&o, &p}}) {
            if (from->peer_ip == to->bind_ip &&
                overlap(from->peer_port, from->queues, to->bind_port, to->queues)) {
              return ctx_.Error(p.line, absl::StrCat(
                  field, ": port '", from->name, "' would send to ", from->peer_ip.ToString(), ":",
                  from->peer_port, ", which this switch's port '", to->name,
                  "' binds itself (a loop; peer is the other side's socket)"));
            }
          }
        }
      }
      for (size_t j = 0; j < i; ++j) {
        const PortConfig& o = config_.ports[j];
        if (o.type != p.type && !(IsAfPort(o.type) && IsAfPort(p.type))) continue;
        std::string clash;
        if (p.type == PortType::kMemif && sockets[j] == sockets[i] &&
            (o.memif_id == p.memif_id || o.role != p.role)) {
          clash = o.memif_id == p.memif_id
                      ? absl::StrCat(".socket: '", p.socket, "' id ", p.memif_id)
                      : absl::StrCat(".socket: '", p.socket, "' as both server and client");
        } else if (IsAfPort(p.type) && o.iface == p.iface && o.netns == p.netns) {
          clash = absl::StrCat(".iface: '", p.iface, "'",
                               p.netns.empty() ? "" : absl::StrCat(" in netns ", p.netns));
        } else if (p.type == PortType::kPci && absl::EqualsIgnoreCase(o.pci, p.pci)) {
          clash = absl::StrCat(".pci: ", p.pci);
        }
        if (!clash.empty()) {
          return ctx_.Error(p.line, absl::StrCat(field, clash, " is already port '", o.name,
                                                 "' (line ", o.line, ")"));
        }
      }
    }
    return absl::OkStatus();
  }

  // PortIndex: the index of the port named by `f`.
  absl::StatusOr<uint32_t> PortIndex(const YamlField& f, const std::string& field) {
    ATP_ASSIGN_OR_RETURN(std::string name, ctx_.String(f, field));
    for (size_t i = 0; i < config_.ports.size(); ++i) {
      if (config_.ports[i].name == name) return static_cast<uint32_t>(i);
    }
    return ctx_.ErrorAt(f, absl::StrCat(field, ": no port named '", name, "'"));
  }

  absl::Status ParseRoutes(const YamlField& list) {
    ATP_RETURN_IF_ERROR(ctx_.Sequence(list, "routes"));
    for (size_t i = 0; i < list.node.size(); ++i) {
      const std::string field = absl::StrCat("routes[", i, "]");
      ATP_ASSIGN_OR_RETURN(MapReader m, MapReader::Create(ctx_, list.Item(list.node[i]), field));
      RouteConfig route;
      route.line = m.line();
      ATP_ASSIGN_OR_RETURN(YamlField prefix, m.Require("prefix"));
      ATP_ASSIGN_OR_RETURN(std::string text, ctx_.String(prefix, field + ".prefix"));
      const std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
      absl::StatusOr<wire::Ipv4Address> ip = parts.size() == 2
                                                 ? wire::Ipv4Address::Parse(std::string_view(parts[0].data(), parts[0].size()))
                                                 : absl::InvalidArgumentError("no '/'");
      if (!ip.ok() || parts[1].empty() ||
          !std::all_of(parts[1].begin(), parts[1].end(),
                       [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
          !absl::SimpleAtoi(parts[1], &route.length) || route.length > 32) {
        return ctx_.ErrorAt(prefix, absl::StrCat(field, ".prefix: '", text,
                                                 "' is not a.b.c.d/len with len 0..32"));
      }
      route.prefix = *ip;
      const uint32_t mask = route.length == 0 ? 0 : ~uint32_t{0} << (32 - route.length);
      if ((route.prefix.value & ~mask) != 0) {
        return ctx_.ErrorAt(prefix, absl::StrCat(field, ".prefix: '", text,
                                                 "' has bits set beyond its length"));
      }
      // Frames to a group go by `multicast:` only: a route inside
      // 224.0.0.0/4 would never be used.
      if (route.length >= 4 && IsMulticastGroup(route.prefix)) {
        return ctx_.ErrorAt(prefix, absl::StrCat(field, ".prefix: '", text,
                                                 "' is multicast (224.0.0.0/4): groups are "
                                                 "forwarded by multicast:, never by routes"));
      }
      for (const RouteConfig& other : config_.routes) {
        if (other.prefix == route.prefix && other.length == route.length) {
          return ctx_.ErrorAt(prefix, absl::StrCat(field, ".prefix: '", text,
                                                   "' is already routed (line ", other.line, ")"));
        }
      }
      ATP_ASSIGN_OR_RETURN(YamlField port, m.Require("port"));
      ATP_ASSIGN_OR_RETURN(route.port_index, PortIndex(port, field + ".port"));
      route.port = config_.ports[route.port_index].name;
      ATP_RETURN_IF_ERROR(m.Finish());
      config_.routes.push_back(std::move(route));
    }
    return absl::OkStatus();
  }

  absl::Status ParseMulticast(const YamlField& list) {
    ATP_RETURN_IF_ERROR(ctx_.Sequence(list, "multicast"));
    for (size_t i = 0; i < list.node.size(); ++i) {
      const std::string field = absl::StrCat("multicast[", i, "]");
      ATP_ASSIGN_OR_RETURN(MapReader m, MapReader::Create(ctx_, list.Item(list.node[i]), field));
      MulticastConfig entry;
      entry.line = m.line();
      ATP_ASSIGN_OR_RETURN(YamlField group, m.Require("group"));
      ATP_ASSIGN_OR_RETURN(entry.group, ctx_.Ipv4(group, field + ".group"));
      if (!IsMulticastGroup(entry.group)) {
        return ctx_.ErrorAt(group, absl::StrCat(field, ".group: ", entry.group.ToString(),
                                                " is not a multicast address (224.0.0.0/4)"));
      }
      for (const MulticastConfig& other : config_.multicast) {
        if (other.group == entry.group) {
          return ctx_.ErrorAt(group, absl::StrCat(field, ".group: ", entry.group.ToString(),
                                                  " is already listed (line ", other.line, ")"));
        }
      }
      ATP_ASSIGN_OR_RETURN(YamlField ports, m.Require("ports"));
      ATP_RETURN_IF_ERROR(ctx_.Sequence(ports, field + ".ports"));
      if (ports.node.size() == 0) {
        return ctx_.ErrorAt(ports, absl::StrCat(field, ".ports: needs at least one port"));
      }
      for (size_t p = 0; p < ports.node.size(); ++p) {
        const std::string pfield = absl::StrCat(field, ".ports[", p, "]");
        ATP_ASSIGN_OR_RETURN(uint32_t index, PortIndex(ports.Item(ports.node[p]), pfield));
        if (std::find(entry.port_indices.begin(), entry.port_indices.end(), index) !=
            entry.port_indices.end()) {
          return ctx_.ErrorAt(ports.Item(ports.node[p]),
                              absl::StrCat(pfield, ": port '", config_.ports[index].name,
                                           "' is listed twice"));
        }
        entry.port_indices.push_back(index);
        entry.ports.push_back(config_.ports[index].name);
      }
      ATP_RETURN_IF_ERROR(m.Finish());
      config_.multicast.push_back(std::move(entry));
    }
    return absl::OkStatus();
  }

  absl::Status ParseJobs(const YamlField& list) {
    ATP_RETURN_IF_ERROR(ctx_.Sequence(list, "jobs"));
    const bool is_static = config_.partition == PartitionMode::kStatic;
    for (size_t i = 0; i < list.node.size(); ++i) {
      const std::string field = absl::StrCat("jobs[", i, "]");
      ATP_ASSIGN_OR_RETURN(MapReader m, MapReader::Create(ctx_, list.Item(list.node[i]), field));
      JobEntryConfig job;
      job.line = m.line();
      ATP_ASSIGN_OR_RETURN(YamlField id, m.Require("id"));
      ATP_ASSIGN_OR_RETURN(job.id, ctx_.Uint(id, field + ".id", 1, wire::kMaxJobId));
      for (const JobEntryConfig& other : config_.jobs) {
        if (other.id == job.id) {
          return ctx_.ErrorAt(id, absl::StrCat(field, ".id: job ", job.id,
                                               " is already listed (line ", other.line, ")"));
        }
      }
      ATP_ASSIGN_OR_RETURN(YamlField level, m.Require("level"));
      ATP_ASSIGN_OR_RETURN(size_t l, ctx_.OneOf(level, field + ".level", {"1", "2", "both"}));
      job.levels = l == 0 ? JobLevels::kLevel1 : l == 1 ? JobLevels::kLevel2 : JobLevels::kBoth;
      ATP_ASSIGN_OR_RETURN(YamlField group, m.Require("group"));
      ATP_ASSIGN_OR_RETURN(job.group, ctx_.Ipv4(group, field + ".group"));
      if (std::none_of(config_.multicast.begin(), config_.multicast.end(),
                       [&](const MulticastConfig& mc) { return mc.group == job.group; })) {
        return ctx_.ErrorAt(group, absl::StrCat(field, ".group: ", job.group.ToString(),
                                                " is not in the multicast table"));
      }
      std::optional<YamlField> slice = m.Take("aggregators");
      if (slice && !is_static) {
        return ctx_.ErrorAt(*slice, absl::StrCat(field, ".aggregators: a slice needs partition: static"));
      }
      if (!slice && is_static) {
        return ctx_.Error(job.line, absl::StrCat(field, ": partition: static needs 'aggregators: "
                                                        "{first: N, count: M}'"));
      }
      if (slice) ATP_RETURN_IF_ERROR(ParseSlice(*slice, field + ".aggregators", &job));
      ATP_RETURN_IF_ERROR(ParseAdmission(m, field, &job));
      ATP_RETURN_IF_ERROR(m.Finish());
      config_.jobs.push_back(std::move(job));
    }
    return absl::OkStatus();
  }

  // PortList: a non-empty list of distinct port names, as indices.
  absl::StatusOr<std::vector<uint32_t>> PortList(const YamlField& list, const std::string& field) {
    ATP_RETURN_IF_ERROR(ctx_.Sequence(list, field));
    if (list.node.size() == 0) return ctx_.ErrorAt(list, absl::StrCat(field, ": needs at least one port"));
    std::vector<uint32_t> ports;
    for (size_t p = 0; p < list.node.size(); ++p) {
      const std::string pfield = absl::StrCat(field, "[", p, "]");
      ATP_ASSIGN_OR_RETURN(uint32_t index, PortIndex(list.Item(list.node[p]), pfield));
      if (std::find(ports.begin(), ports.end(), index) != ports.end()) {
        return ctx_.ErrorAt(list.Item(list.node[p]),
                            absl::StrCat(pfield, ": port '", config_.ports[index].name,
                                         "' is listed twice"));
      }
      ports.push_back(index);
    }
    return ports;
  }

  // RoutePort: the port of the longest route holding `ip`, if any.
  std::optional<uint32_t> RoutePort(wire::Ipv4Address ip) const {
    std::optional<uint32_t> port;
    int best = -1;
    for (const RouteConfig& r : config_.routes) {
      const uint32_t mask = r.length == 0 ? 0 : ~uint32_t{0} << (32 - r.length);
      if ((ip.value & mask) == r.prefix.value && static_cast<int>(r.length) > best) {
        best = static_cast<int>(r.length);
        port = r.port_index;
      }
    }
    return port;
  }

  // ParseAdmits: a port's `admits` list: parameters, gradients, both or none.
  absl::Status ParseAdmits(const YamlField& list, const std::string& field, PortConfig* port) {
    ATP_RETURN_IF_ERROR(ctx_.Sequence(list, field));
    port->admits_parameters = false;
    port->admits_gradients = false;
    for (size_t k = 0; k < list.node.size(); ++k) {
      const std::string kfield = absl::StrCat(field, "[", k, "]");
      const YamlField item = list.Item(list.node[k]);
      ATP_ASSIGN_OR_RETURN(size_t kind, ctx_.OneOf(item, kfield, {"parameters", "gradients"}));
      bool& admitted = kind == 0 ? port->admits_parameters : port->admits_gradients;
      if (admitted) {
        return ctx_.ErrorAt(item, absl::StrCat(kfield, ": '", kind == 0 ? "parameters" : "gradients",
                                               "' listed twice"));
      }
      admitted = true;
    }
    return absl::OkStatus();
  }

  // ParseAdmission: a job's ingress_check, ps, parameters_from and
  // gradients_from, resolved into port lists (docs/switchd.md, "Admission").
  absl::Status ParseAdmission(MapReader& m, const std::string& field, JobEntryConfig* job) {
    std::optional<YamlField> check = m.Take("ingress_check");
    std::optional<YamlField> ps = m.Take("ps");
    std::optional<YamlField> parameters_from = m.Take("parameters_from");
    std::optional<YamlField> gradients_from = m.Take("gradients_from");
    if (check) {
      ATP_ASSIGN_OR_RETURN(job->ingress_check, ctx_.Bool(*check, field + ".ingress_check"));
    }
    if (ps) {
      ATP_RETURN_IF_ERROR(ctx_.Sequence(*ps, field + ".ps"));
      if (ps->node.size() == 0) {
        return ctx_.ErrorAt(*ps, absl::StrCat(field, ".ps: needs at least one address"));
      }
      for (size_t k = 0; k < ps->node.size(); ++k) {
        const std::string kfield = absl::StrCat(field, ".ps[", k, "]");
        const YamlField item = ps->Item(ps->node[k]);
        ATP_ASSIGN_OR_RETURN(wire::Ipv4Address ip, ctx_.Ipv4(item, kfield));
        if (IsMulticastGroup(ip) || ip.value == 0 || ip.value == ~uint32_t{0}) {
          return ctx_.ErrorAt(item, absl::StrCat(kfield, ": ", ip.ToString(),
                                                 " is not a host address"));
        }
        if (ip == config_.address) {
          return ctx_.ErrorAt(item, absl::StrCat(kfield, ": ", ip.ToString(),
                                                 " is this switch's own address"));
        }
        if (std::find(job->ps.begin(), job->ps.end(), ip) != job->ps.end()) {
          return ctx_.ErrorAt(item, absl::StrCat(kfield, ": ", ip.ToString(), " is listed twice"));
        }
        job->ps.push_back(ip);
      }
    }
    if (!job->ingress_check) {
      for (const auto& [key, f] : {std::pair<const char*, const std::optional<YamlField>*>{"ps", &ps},
                                   {"parameters_from", &parameters_from},
                                   {"gradients_from", &gradients_from}}) {
        if (f->has_value()) {
          return ctx_.ErrorAt(**f, absl::StrCat(field, ".", key, ": not with ingress_check: false"));
        }
      }
      return absl::OkStatus();
    }
    if (parameters_from && ps) {
      return ctx_.ErrorAt(*parameters_from,
                          absl::StrCat(field, ".parameters_from: give either it or ", field,
                                       ".ps (whose routes name the ports), not both"));
    }
    const std::vector<uint32_t>* group_ports = nullptr;
    for (const MulticastConfig& mc : config_.multicast) {
      if (mc.group == job->group) group_ports = &mc.port_indices;
    }
    if (parameters_from) {
      ATP_ASSIGN_OR_RETURN(job->parameter_ports, PortList(*parameters_from, field + ".parameters_from"));
    } else if (ps) {
      for (size_t k = 0; k < job->ps.size(); ++k) {
        const std::optional<uint32_t> port = RoutePort(job->ps[k]);
        if (!port) {
          return ctx_.ErrorAt(ps->Item(ps->node[k]),
                              absl::StrCat(field, ".ps[", k, "]: no route leads to ",
                                           job->ps[k].ToString()));
        }
        if (std::find(job->parameter_ports.begin(), job->parameter_ports.end(), *port) ==
            job->parameter_ports.end()) {
          job->parameter_ports.push_back(*port);
        }
      }
    } else {
      for (uint32_t p = 0; p < config_.ports.size(); ++p) {
        if (std::find(group_ports->begin(), group_ports->end(), p) == group_ports->end()) {
          job->parameter_ports.push_back(p);
        }
      }
    }
    if (gradients_from) {
      ATP_ASSIGN_OR_RETURN(job->gradient_ports, PortList(*gradients_from, field + ".gradients_from"));
    } else {
      job->gradient_ports = *group_ports;
    }
    return absl::OkStatus();
  }

  absl::Status ParseSlice(const YamlField& f, const std::string& field, JobEntryConfig* job) {
    ATP_ASSIGN_OR_RETURN(MapReader m, MapReader::Create(ctx_, f, field));
    ATP_ASSIGN_OR_RETURN(YamlField first, m.Require("first"));
    ATP_ASSIGN_OR_RETURN(YamlField count, m.Require("count"));
    const uint64_t n = config_.aggregators;
    AggregatorSlice slice;
    ATP_ASSIGN_OR_RETURN(slice.first, ctx_.Uint(first, field + ".first", 0, n - 1));
    ATP_ASSIGN_OR_RETURN(slice.count, ctx_.Uint(count, field + ".count", 1, n - slice.first));
    ATP_RETURN_IF_ERROR(m.Finish());
    for (const JobEntryConfig& other : config_.jobs) {
      const AggregatorSlice& o = *other.slice;
      if (slice.first < o.first + o.count && o.first < slice.first + slice.count) {
        return ctx_.ErrorAt(f, absl::StrCat(field, ": [", slice.first, ", ",
                                            slice.first + slice.count, ") overlaps job ",
                                            other.id, "'s [", o.first, ", ", o.first + o.count,
                                            ") (line ", other.line, ")"));
      }
    }
    job->slice = slice;
    return absl::OkStatus();
  }

  YamlContext ctx_;
  SwitchdConfig config_;
};

}  // namespace

std::string_view PortTypeName(PortType type) {
  switch (type) {
    case PortType::kMemif: return "memif";
    case PortType::kAfPacket: return "af_packet";
    case PortType::kAfXdp: return "af_xdp";
    case PortType::kPci: return "pci";
    case PortType::kKernelUdp: return "kernel_udp";
  }
  return "?";
}

bool IsDpdkPort(PortType type) { return type != PortType::kKernelUdp; }

bool SwitchdConfig::HasDpdkPorts() const {
  return std::any_of(ports.begin(), ports.end(), [](const PortConfig& p) { return IsDpdkPort(p.type); });
}

switch_emulator::PipelineConfig SwitchdConfig::ToPipelineConfig() const {
  switch_emulator::PipelineConfig pipeline;
  pipeline.aggregator_count = aggregators;
  pipeline.orphan_timeout = orphan_timeout;
  pipeline.ecn_threshold = ecn_threshold;
  pipeline.base_port = base_port;
  pipeline.partition = partition;
  for (const JobEntryConfig& job : jobs) {
    pipeline.jobs.push_back(switch_emulator::JobConfig{
        .job = job.id,
        .levels = job.levels,
        .multicast_group = job.group.value,
        .slice = job.slice.value_or(AggregatorSlice{}),
    });
  }
  return pipeline;
}

absl::StatusOr<SwitchdConfig> ParseSwitchdConfig(std::string_view text, std::string_view path) {
  return Parser(path).Parse(text);
}

absl::StatusOr<SwitchdConfig> LoadSwitchdConfig(const std::string& path) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a configuration file"));
  }
  std::ifstream in(path);
  if (!in) {
    const int error = errno;
    return absl::NotFoundError(absl::StrCat(path, ": cannot read: ", std::strerror(error)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseSwitchdConfig(text.str(), path);
}

}  // namespace atp::switchd
