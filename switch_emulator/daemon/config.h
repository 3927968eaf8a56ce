// switch_emulator/daemon/config.h: atp-switchd's configuration file (YAML),
// parsed and validated into plain structs.
//
//   absl::StatusOr<SwitchdConfig> config = LoadSwitchdConfig("/etc/atp/tor0.yaml");
//   if (!config.ok()) { std::cerr << config.status().message(); return 2; }
//   //   "/etc/atp/tor0.yaml:12: ports[1].queues: 17 is not in 1..16"
//
// Every error names the file and the 1-based line of the offending node, then
// the field and the reason. A second YAML document, unknown keys, duplicate
// keys, wrong types, values out of range, references to unknown ports or
// groups, and aggregator slices that overlap or leave the array are all
// refused. docs/switchd.md is the reference of the format.
#ifndef ATP_SWITCH_EMULATOR_DAEMON_CONFIG_H_
#define ATP_SWITCH_EMULATOR_DAEMON_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "atp/time.h"
#include "atp/transport/dpdk.h"
#include "atp/wire.h"
#include "switch_emulator/pipeline/job_table.h"
#include "switch_emulator/pipeline/pipeline_config.h"

namespace atp::switchd {

// PortType: what carries a port's frames.
enum class PortType : uint8_t {
  kMemif,      // DPDK net_memif over a socket file (no root)
  kAfPacket,   // DPDK net_af_packet on a kernel interface (root)
  kAfXdp,      // DPDK net_af_xdp on a kernel interface (root)
  kPci,        // a NIC bound to a DPDK driver
  kKernelUdp,  // whole frames as UDP datagrams (an overlay; no DPDK)
};
std::string_view PortTypeName(PortType type);
bool IsDpdkPort(PortType type);

enum class MemifPortRole : uint8_t { kServer, kClient };

// PortConfig: one port. Only the fields of its type are meaningful.
struct PortConfig {
  std::string name;
  PortType type = PortType::kMemif;
  uint32_t queues = 1;  // 1..16: the port's queues; egress queue = UDP port - base_port (mod queues)
  int line = 0;         // where the port was declared, for later errors
  bool pcap = false;    // capture this port under --pcap_dir (docs/observability.md)
  // rate_mbps: > 0: the port sends at most this many Mb/s, from a FIFO of
  // queue_frames frames per queue (switch_emulator/daemon/port_rate.h); 0:
  // as fast as the port takes frames.
  uint64_t rate_mbps = 0;
  uint32_t queue_frames = 1024;
  // admits: which ATP frames of any job may arrive on the port (`admits:
  // [parameters, gradients]`, the default): parameter packets (`ack`, from a
  // PS's side) and gradients (no `ack`, from workers' side). What a
  // forwarding-only switch can check without knowing jobs (docs/security.md).
  bool admits_parameters = true;
  bool admits_gradients = true;
  // kMemif
  std::string socket;  // a socket file path
  MemifPortRole role = MemifPortRole::kServer;
  uint32_t memif_id = 0;
  // kAfPacket, kAfXdp
  std::string iface;
  std::string netns;  // empty: this process's namespace
  // kPci
  std::string pci;
  // kKernelUdp: queue i binds bind.port + i and sends to peer.port + i.
  wire::Ipv4Address bind_ip;
  uint16_t bind_port = 0;
  wire::Ipv4Address peer_ip;
  uint16_t peer_port = 0;
};

// RouteConfig: frames whose IPv4 destination is in prefix/length go to `port`.
struct RouteConfig {
  wire::Ipv4Address prefix;
  uint32_t length = 0;  // 0..32
  std::string port;
  uint32_t port_index = 0;  // index into SwitchdConfig::ports
  int line = 0;
};

// MulticastConfig: a group and the ports its frames are replicated to.
struct MulticastConfig {
  wire::Ipv4Address group;  // 224.0.0.0/4
  std::vector<std::string> ports;
  std::vector<uint32_t> port_indices;
  int line = 0;
};

// JobEntryConfig: a job this switch aggregates.
struct JobEntryConfig {
  uint8_t id = 0;  // 1..255
  switch_emulator::JobLevels levels = switch_emulator::JobLevels::kLevel1;
  wire::Ipv4Address group;  // its parameter packets' destination; in the multicast table
  std::optional<switch_emulator::AggregatorSlice> slice;  // partition: static only (required there)
  int line = 0;
  // Ingress admission (docs/security.md), resolved at parse time:
  // ingress_check false: the job's frames are admitted on every port.
  bool ingress_check = true;
  std::vector<wire::Ipv4Address> ps;  // `ps`: the job's PS addresses (may be empty)
  // parameter_ports: where its parameter packets may arrive: `parameters_from`,
  // else the ports the routes send its `ps` addresses to, else every port
  // outside its multicast group. gradient_ports: `gradients_from`, else its
  // multicast group's ports (toward its workers or lower-level switches).
  std::vector<uint32_t> parameter_ports;
  std::vector<uint32_t> gradient_ports;
};

// DpdkConfig: the EAL, set up once if any port is DPDK-based.
struct DpdkConfig {
  uint32_t memory_mb = 256;
  bool hugepages = false;  // false: --no-huge (no root, no hugepage files)
  std::string log_level = "warning";
  // rx_interrupts: `rx_interrupts: auto | required | off`: whether idle
  // ports wake the datapath thread by Rx interrupt (NICs, net_tap; memif
  // has none) or are polled (atp/transport/dpdk.h).
  transport::DpdkRxInterrupts rx_interrupts = transport::DpdkRxInterrupts::kIfAvailable;
};

struct SwitchdConfig {
  std::string path;  // the file it came from (for messages)
  std::string name;
  wire::Ipv4Address address;
  wire::MacAddress mac;  // default: transport::DefaultMacFor(address)
  size_t aggregators = switch_emulator::kDefaultAggregatorCount;
  switch_emulator::PartitionMode partition = switch_emulator::PartitionMode::kDynamic;
  uint32_t ecn_threshold = 64;  // frames held by the egress queue
  TimeDelta orphan_timeout = TimeDelta::FromMilliseconds(10);
  uint16_t base_port = wire::kDefaultBasePort;
  // link_timeout: how long startup waits for a memif client port's link.
  TimeDelta link_timeout = TimeDelta::FromSeconds(30);
  DpdkConfig dpdk;
  std::vector<PortConfig> ports;
  std::vector<RouteConfig> routes;
  std::vector<MulticastConfig> multicast;
  std::vector<JobEntryConfig> jobs;

  bool HasDpdkPorts() const;
  // ToPipelineConfig: the switch pipeline's configuration; a job's
  // multicast_group is its group's IPv4 address (host order).
  switch_emulator::PipelineConfig ToPipelineConfig() const;
};

// ParseSwitchdConfig: parses and validates `text`; `path` only labels errors.
// InvalidArgument "<path>:<line>: <reason>" on the first problem.
absl::StatusOr<SwitchdConfig> ParseSwitchdConfig(std::string_view text, std::string_view path);

// LoadSwitchdConfig: reads the file, then ParseSwitchdConfig. NotFound (or
// another errno status) "<path>: <why>" when it cannot be read.
absl::StatusOr<SwitchdConfig> LoadSwitchdConfig(const std::string& path);

}  // namespace atp::switchd

#endif  // ATP_SWITCH_EMULATOR_DAEMON_CONFIG_H_
