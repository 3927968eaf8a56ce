// atp-switchd's configuration file: a good file parses into the structs; every
// kind of mistake is refused with "<path>:<line>: <reason>" at the right line.
#include "switch_emulator/daemon/config.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "atp/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace atp::switchd {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kPath[] = "tor0.yaml";

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }

// kGood: one of everything (line numbers matter to the tests below).
constexpr char kGood[] = R"(name: tor0                 # line 1
address: 10.255.0.1
aggregators: 4096
partition: dynamic
ecn_threshold: 32
orphan_timeout_ms: 20
dpdk: {memory_mb: 128}
ports:
  - {name: w0, type: memif, socket: /tmp/tb/w0.sock, role: server, id: 0, queues: 2}
  - {name: up, type: memif, socket: /tmp/tb/up.sock, role: client}
  - {name: v0, type: af_packet, iface: sw0, netns: atptb-tor0}
  - {name: x0, type: af_xdp, iface: sw1}
  - {name: n0, type: pci, pci: "0000:3b:00.0"}
  - {name: u0, type: kernel_udp, bind: "127.0.0.1:47000", peer: "127.0.0.1:47100"}
routes:
  - {prefix: 10.1.0.0/24, port: w0}
  - {prefix: 0.0.0.0/0, port: up}
multicast:
  - {group: 239.1.0.1, ports: [w0, v0]}
jobs:
  - {id: 1, level: 1, group: 239.1.0.1}
)";

// ErrorOf: the message ParseSwitchdConfig gives `text`.
std::string ErrorOf(const std::string& text) {
  absl::StatusOr<SwitchdConfig> config = ParseSwitchdConfig(text, kPath);
  EXPECT_FALSE(config.ok()) << "accepted:\n" << text;
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

// At: the message prefix for `line`.
std::string At(int line) { return absl::StrCat(kPath, ":", line, ": "); }

// Minimal: a valid file with a placeholder appended; lines 1..4 are fixed.
std::string Minimal(const std::string& tail) {
  return absl::StrCat(
      "name: s\n"                                              // 1
      "address: 10.255.0.1\n"                                  // 2
      "ports:\n"                                               // 3
      "  - {name: a, type: memif, socket: /tmp/a.sock}\n",     // 4
      tail);
}

TEST(SwitchdConfigTest, GoodFileParses) {
  absl::StatusOr<SwitchdConfig> config = ParseSwitchdConfig(kGood, kPath);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->name, "tor0");
  EXPECT_EQ(config->address, Ip("10.255.0.1"));
  EXPECT_EQ(config->mac, transport::DefaultMacFor(Ip("10.255.0.1")));
  EXPECT_EQ(config->ecn_threshold, 32u);
  EXPECT_EQ(config->orphan_timeout, TimeDelta::FromMilliseconds(20));
  EXPECT_EQ(config->dpdk.memory_mb, 128u);
  ASSERT_EQ(config->ports.size(), 6u);
  EXPECT_EQ(config->ports[0].type, PortType::kMemif);
  EXPECT_EQ(config->ports[0].queues, 2u);
  EXPECT_EQ(config->ports[0].line, 9);
  EXPECT_EQ(config->ports[1].role, MemifPortRole::kClient);
  EXPECT_EQ(config->ports[2].netns, "atptb-tor0");
  EXPECT_EQ(config->ports[3].type, PortType::kAfXdp);
  EXPECT_EQ(config->ports[4].pci, "0000:3b:00.0");
  EXPECT_EQ(config->ports[5].peer_port, 47100);
  ASSERT_EQ(config->routes.size(), 2u);
  EXPECT_EQ(config->routes[0].length, 24u);
  EXPECT_EQ(config->routes[1].port_index, 1u);
  ASSERT_EQ(config->multicast.size(), 1u);
  EXPECT_EQ(config->multicast[0].port_indices, (std::vector<uint32_t>{0, 2}));
  ASSERT_EQ(config->jobs.size(), 1u);
  EXPECT_EQ(config->jobs[0].levels, switch_emulator::JobLevels::kLevel1);
  EXPECT_TRUE(config->HasDpdkPorts());

  const switch_emulator::PipelineConfig pipeline = config->ToPipelineConfig();
  ASSERT_EQ(pipeline.jobs.size(), 1u);
  EXPECT_EQ(pipeline.jobs[0].multicast_group, Ip("239.1.0.1").value);
  EXPECT_EQ(pipeline.ecn_threshold, 32u);
}

TEST(SwitchdConfigTest, StaticPartitionWithSlices) {
  const std::string text = absl::StrCat(
      "name: s\naddress: 10.255.0.1\naggregators: 100\npartition: static\n",
      "ports: [{name: a, type: kernel_udp, bind: '127.0.0.1:1000', peer: '127.0.0.1:2000'}]\n",
      "multicast: [{group: 239.1.0.1, ports: [a]}, {group: 239.1.0.2, ports: [a]}]\n",
      "jobs:\n",
      "  - {id: 1, level: 2, group: 239.1.0.1, aggregators: {first: 0, count: 50}}\n",
      "  - {id: 2, level: both, group: 239.1.0.2, aggregators: {first: 50, count: 50}}\n");
  absl::StatusOr<SwitchdConfig> config = ParseSwitchdConfig(text, kPath);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->HasDpdkPorts());
  ASSERT_TRUE(config->jobs[1].slice.has_value());
  EXPECT_EQ(config->jobs[1].slice->first, 50u);
  EXPECT_EQ(config->jobs[1].levels, switch_emulator::JobLevels::kBoth);
}

TEST(SwitchdConfigTest, YamlSyntaxErrorGivesItsLine) {
  EXPECT_EQ(ErrorOf("name: s\naddress: 10.0.0.1\nports: [1, 2]]\nx: 1\n"),
            At(3) + "YAML: illegal flow end");
  EXPECT_EQ(ErrorOf("name: s\na: b: c\nx: 1\n"), At(2) + "YAML: illegal map value");
}

TEST(SwitchdConfigTest, EmptyFileIsRefused) {
  EXPECT_THAT(ErrorOf(""), StartsWith(At(1) + "config: expected a mapping"));
}

TEST(SwitchdConfigTest, UnknownTopLevelKey) {
  EXPECT_EQ(ErrorOf(Minimal("aggregatorz: 5\n")), At(5) + "config: unknown key 'aggregatorz'");
}

TEST(SwitchdConfigTest, UnknownPortKeyOrKeyOfAnotherType) {
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b,\n     iface: x}\n")),
            At(6) + "ports[1]: unknown key 'iface'");
}

TEST(SwitchdConfigTest, DuplicateKey) {
  EXPECT_THAT(ErrorOf(Minimal("name: t\n")), StartsWith(At(5) + "config: duplicate key 'name'"));
}

TEST(SwitchdConfigTest, MissingRequiredKeys) {
  EXPECT_EQ(ErrorOf("address: 10.0.0.1\nports: []\n"), At(1) + "config: missing 'name'");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b,\n     type: memif}\n")),
            At(5) + "ports[1]: missing 'socket'");
}

TEST(SwitchdConfigTest, KeyWithoutValueIsBlamedOnItsLine) {
  EXPECT_EQ(ErrorOf(Minimal("aggregators:\nbase_port: 1\n")),
            At(5) + "aggregators: expected an integer, got nothing");
}

TEST(SwitchdConfigTest, WrongTypes) {
  EXPECT_EQ(ErrorOf(Minimal("aggregators: many\n")),
            At(5) + "aggregators: expected a non-negative integer, got 'many'");
  EXPECT_EQ(ErrorOf(Minimal("aggregators: -4\n")),
            At(5) + "aggregators: expected a non-negative integer, got '-4'");
  EXPECT_EQ(ErrorOf(Minimal("routes: {prefix: 1}\n")),
            At(5) + "routes: expected a list, got a mapping");
  EXPECT_EQ(ErrorOf(Minimal("dpdk: {hugepages: maybe}\n")),
            At(5) + "dpdk.hugepages: expected true or false");
  EXPECT_EQ(ErrorOf(Minimal("dpdk: 5\n")),
            At(5) + "dpdk: expected a mapping (key: value), got a scalar");
}

TEST(SwitchdConfigTest, ADpdkSectionWithoutDpdkPortsIsRefused) {
  EXPECT_EQ(ErrorOf("name: s\n"
                    "address: 10.255.0.1\n"
                    "dpdk: {memory_mb: 128}\n"
                    "ports: [{name: a, type: kernel_udp, bind: '127.0.0.1:1000', "
                    "peer: '127.0.0.1:2000'}]\n"),
            At(3) + "dpdk: no port uses DPDK (every port is kernel_udp)");
}

TEST(SwitchdConfigTest, ValuesOutOfRange) {
  EXPECT_EQ(ErrorOf(Minimal("aggregators: 0\n")), At(5) + "aggregators: 0 is not in 1..16777216");
  EXPECT_EQ(ErrorOf(Minimal("orphan_timeout_ms: 0\n")),
            At(5) + "orphan_timeout_ms: 0 is not in 1..3600000");
  EXPECT_EQ(ErrorOf(Minimal("base_port: 65530\n")), At(5) + "base_port: 65530 is not in 1..65520");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b,\n     queues: 17}\n")),
            At(6) + "ports[1].queues: 17 is not in 1..16");
}

TEST(SwitchdConfigTest, PortRate) {
  absl::StatusOr<SwitchdConfig> c = ParseSwitchdConfig(
      Minimal("  - {name: b, type: memif, socket: /b, rate_mbps: 100, queue_frames: 256}\n"), kPath);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ports[0].rate_mbps, 0u) << "no rate: as fast as the port takes frames";
  EXPECT_EQ(c->ports[1].rate_mbps, 100u);
  EXPECT_EQ(c->ports[1].queue_frames, 256u);
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b, rate_mbps: 0}\n")),
            At(5) + "ports[1].rate_mbps: 0 is not in 1..1000000");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b, rate_mbps: 5, queue_frames: 0}\n")),
            At(5) + "ports[1].queue_frames: 0 is not in 1..65536");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b, queue_frames: 64}\n")),
            At(5) + "ports[1].queue_frames: only with rate_mbps (a port without a rate holds no "
                    "queue of its own)");
}

// admits: what a port brings in, for every job (a forwarding-only switch's
// check, docs/security.md).
TEST(SwitchdConfigTest, PortAdmits) {
  absl::StatusOr<SwitchdConfig> c = ParseSwitchdConfig(
      Minimal("  - {name: b, type: memif, socket: /b, admits: [gradients]}\n"
              "  - {name: c, type: memif, socket: /c, admits: [parameters]}\n"
              "  - {name: d, type: memif, socket: /d, admits: []}\n"
              "  - {name: e, type: memif, socket: /e, admits: [gradients, parameters]}\n"),
      kPath);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->ports[0].admits_parameters && c->ports[0].admits_gradients) << "default: both";
  EXPECT_TRUE(!c->ports[1].admits_parameters && c->ports[1].admits_gradients);
  EXPECT_TRUE(c->ports[2].admits_parameters && !c->ports[2].admits_gradients);
  EXPECT_TRUE(!c->ports[3].admits_parameters && !c->ports[3].admits_gradients);
  EXPECT_TRUE(c->ports[4].admits_parameters && c->ports[4].admits_gradients);
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b, admits: [acks]}\n")),
            At(5) + "ports[1].admits[0]: expected one of parameters, gradients, got 'acks'");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b, admits: [gradients, gradients]}\n")),
            At(5) + "ports[1].admits[1]: 'gradients' listed twice");
  EXPECT_THAT(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b, admits: gradients}\n")),
              StartsWith(At(5) + "ports[1].admits: "));
}

TEST(SwitchdConfigTest, BadEnumValues) {
  EXPECT_EQ(ErrorOf(Minimal("partition: fixed\n")),
            At(5) + "partition: expected one of dynamic, static, got 'fixed'");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: tap}\n")),
            At(5) + "ports[1].type: expected one of memif, af_packet, af_xdp, pci, kernel_udp, got 'tap'");
  EXPECT_THAT(ErrorOf(Minimal("  - {name: b, type: memif, socket: /b, role: master}\n")),
              StartsWith(At(5) + "ports[1].role: expected one of server, client"));
}

TEST(SwitchdConfigTest, BadAddresses) {
  EXPECT_EQ(ErrorOf("name: s\naddress: 10.0.0.300\nports: []\n"),
            At(2) + "address: '10.0.0.300' is not an IPv4 address (a.b.c.d)");
  EXPECT_THAT(ErrorOf(Minimal("mac: 02:00:zz:00:00:01\n")), StartsWith(At(5) + "mac: "));
  EXPECT_THAT(ErrorOf(Minimal("  - {name: u, type: kernel_udp, bind: '127.0.0.1', peer: "
                              "'127.0.0.1:2000'}\n")),
              StartsWith(At(5) + "ports[1].bind: '127.0.0.1' is not IPv4:port"));
  EXPECT_THAT(ErrorOf(Minimal("  - {name: u, type: kernel_udp, bind: '127.0.0.1:1', peer: "
                              "'127.0.0.1:65530'}\n")),
              StartsWith(At(5) + "ports[1].peer: '127.0.0.1:65530' is not IPv4:port"));
  EXPECT_EQ(ErrorOf(Minimal("  - {name: n, type: pci, pci: '3b:00.0'}\n")),
            At(5) + "ports[1].pci: '3b:00.0' is not a PCI address (0000:3b:00.0)");
}

// A second YAML document would be ignored: refused at the line it starts.
TEST(SwitchdConfigTest, ASecondDocumentIsRefused) {
  const std::string refused =
      "the configuration holds more than one YAML document (another starts on this line); "
      "a configuration is one document";
  EXPECT_EQ(ErrorOf(Minimal("---\nports: []\n")), At(5) + refused);
  EXPECT_EQ(ErrorOf(Minimal("...\n---\nname: t\n")), At(6) + refused);
  EXPECT_EQ(ErrorOf(Minimal("...\nname: t\n")), At(6) + refused);  // no '---' needed after '...'
  EXPECT_EQ(ErrorOf(Minimal("---\n~\n---\n")), At(7) + refused);   // one empty one, then more
}

// A document-end marker, or an empty document at the end (a trailing '---'),
// says nothing: accepted, as before the check.
TEST(SwitchdConfigTest, AnEndMarkerOrATrailingEmptyDocumentIsAccepted) {
  EXPECT_TRUE(ParseSwitchdConfig(Minimal("...\n"), kPath).ok());
  EXPECT_TRUE(ParseSwitchdConfig(Minimal("...\n# the end\n...\n"), kPath).ok());
  EXPECT_TRUE(ParseSwitchdConfig(Minimal("---\n"), kPath).ok());
  EXPECT_TRUE(ParseSwitchdConfig(Minimal("...\n---\n# nothing\n"), kPath).ok());
}

// Inputs on which yaml-cpp's parser hands out empty documents forever (a ','
// outside brackets; YAML::LoadAll never returned, switchd_config_fuzzer):
// refused, not a hang.
TEST(SwitchdConfigTest, ACommaOutsideBracketsIsRefused) {
  EXPECT_THAT(ErrorOf(","), StartsWith(At(1) + "config: expected a mapping"));
  EXPECT_THAT(ErrorOf(Minimal("---\n,")), StartsWith(At(6) + "the configuration holds more"));
  EXPECT_THAT(ErrorOf(Minimal("...\n,")), StartsWith(At(6) + "the configuration holds more"));
}

// What holds no configuration is refused as such, not as documents.
TEST(SwitchdConfigTest, OnlyMarkersOrCommentsAreAnEmptyConfiguration) {
  for (const char* text : {"---", "---\n", "--- \n---", "...", "# a comment\n# another\n"}) {
    EXPECT_THAT(ErrorOf(text), HasSubstr("config: expected a mapping")) << text;
  }
}

// Two ports on one resource would fail to open at start (or share it
// silently), and a kernel UDP port sending into this switch's own socket is
// a loop: refused, blamed on the later port.
TEST(SwitchdConfigTest, PortsOpenDistinctResources) {
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /tmp/a.sock}\n")),
            At(5) + "ports[1].socket: '/tmp/a.sock' id 0 is already port 'a' (line 4)");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /tmp/a.sock, id: 1, role: client}\n")),
            At(5) + "ports[1].socket: '/tmp/a.sock' as both server and client is already port 'a' "
                    "(line 4)");
  // One server socket may carry several interfaces (ids).
  EXPECT_TRUE(ParseSwitchdConfig(Minimal("  - {name: b, type: memif, socket: /tmp/a.sock, id: 1}\n"),
                                 kPath).ok());
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: af_packet, iface: e0}\n"
                            "  - {name: c, type: af_xdp, iface: e0}\n")),
            At(6) + "ports[2].iface: 'e0' is already port 'b' (line 5)");
  EXPECT_TRUE(ParseSwitchdConfig(Minimal("  - {name: b, type: af_packet, iface: e0}\n"
                                         "  - {name: c, type: af_packet, iface: e0, netns: n1}\n"),
                                 kPath).ok());
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: pci, pci: '0000:3b:00.0'}\n"
                            "  - {name: c, type: pci, pci: '0000:3b:00.0'}\n")),
            At(6) + "ports[2].pci: 0000:3b:00.0 is already port 'b' (line 5)");
  // The same resource spelled differently: one file, one device.
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /tmp/./a.sock}\n")),
            At(5) + "ports[1].socket: '/tmp/./a.sock' id 0 is already port 'a' (line 4)");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: memif, socket: /tmp/x/../a.sock}\n")),
            At(5) + "ports[1].socket: '/tmp/x/../a.sock' id 0 is already port 'a' (line 4)");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: pci, pci: '0000:3b:00.0'}\n"
                            "  - {name: c, type: pci, pci: '0000:3B:00.0'}\n")),
            At(6) + "ports[2].pci: 0000:3B:00.0 is already port 'b' (line 5)");
  EXPECT_EQ(ErrorOf(Minimal("  - {name: b, type: kernel_udp, queues: 2, bind: '127.0.0.1:1000', peer: '127.0.0.1:2000'}\n"
                            "  - {name: c, type: kernel_udp, bind: '0.0.0.0:1001', peer: '127.0.0.1:3000'}\n")),
            At(6) + "ports[2].bind: 0.0.0.0:1001..+0 overlaps port 'b' (line 5), which binds "
                    "127.0.0.1:1000..+1");
  EXPECT_TRUE(ParseSwitchdConfig(
                  Minimal("  - {name: b, type: kernel_udp, queues: 2, bind: '127.0.0.1:1000', peer: '127.0.0.1:2000'}\n"
                          "  - {name: c, type: kernel_udp, bind: '127.0.0.2:1000', peer: '127.0.0.1:3000'}\n"),
                  kPath)
                  .ok());
  for (const char* peer : {"0.0.0.0", "255.255.255.255", "239.1.0.1"}) {
    EXPECT_EQ(ErrorOf(Minimal(absl::StrCat("  - {name: b, type: kernel_udp, bind: '127.0.0.1:1000', "
                                           "peer: '", peer, ":2000'}\n"))),
              At(5) + "ports[1].peer: " + peer +
                  " is not one host's address (the port takes datagrams from the peer only)");
  }
  EXPECT_THAT(ErrorOf(Minimal("  - {name: b, type: kernel_udp, bind: '127.0.0.1:1000', peer: '127.0.0.1:1000'}\n")),
              StartsWith(At(5) + "ports[1]: port 'b' would send to 127.0.0.1:1000, which this "
                                 "switch's port 'b' binds itself (a loop"));
  EXPECT_THAT(ErrorOf(Minimal("  - {name: b, type: kernel_udp, bind: '127.0.0.1:1000', peer: '127.0.0.1:2000'}\n"
                              "  - {name: c, type: kernel_udp, bind: '127.0.0.1:2000', peer: '127.0.0.1:3000'}\n")),
              StartsWith(At(6) + "ports[2]: port 'b' would send to 127.0.0.1:2000, which this "
                                 "switch's port 'c' binds itself"));
}

TEST(SwitchdConfigTest, SwitchAddressAndDpdkLogLevel) {
  EXPECT_EQ(ErrorOf("name: s\naddress: 239.0.0.1\nports: []\n"),
            At(2) + "address: 239.0.0.1 is not a unicast host address");
  EXPECT_EQ(ErrorOf("name: s\naddress: 0.0.0.0\nports: []\n"),
            At(2) + "address: 0.0.0.0 is not a unicast host address");
  EXPECT_EQ(ErrorOf(Minimal("mac: '01:00:5e:00:00:01'\n")),
            At(5) + "mac: '01:00:5e:00:00:01' is a multicast MAC (its first byte is odd)");
  EXPECT_EQ(ErrorOf(Minimal("mac: '00:00:00:00:00:00'\n")),
            At(5) + "mac: '00:00:00:00:00:00' is the all-zero MAC, no host's");
  EXPECT_THAT(ErrorOf(Minimal("dpdk: {log_level: loud}\n")),
              StartsWith(At(5) + "dpdk.log_level: expected one of emergency, alert"));
  absl::StatusOr<SwitchdConfig> config = ParseSwitchdConfig(Minimal("dpdk: {log_level: '7'}\n"), kPath);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dpdk.log_level, "7");
  EXPECT_EQ(config->dpdk.rx_interrupts, transport::DpdkRxInterrupts::kIfAvailable);
  EXPECT_THAT(ErrorOf(Minimal("dpdk: {rx_interrupts: sometimes}\n")),
              StartsWith(At(5) + "dpdk.rx_interrupts: expected one of auto, required, off"));
  config = ParseSwitchdConfig(Minimal("dpdk: {rx_interrupts: off}\n"), kPath);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dpdk.rx_interrupts, transport::DpdkRxInterrupts::kOff);
  config = ParseSwitchdConfig(Minimal("dpdk: {rx_interrupts: required}\n"), kPath);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dpdk.rx_interrupts, transport::DpdkRxInterrupts::kRequired);
}

TEST(SwitchdConfigTest, PortNames) {
  EXPECT_EQ(ErrorOf(Minimal("  - {name: a, type: memif, socket: /b}\n")),
            At(5) + "ports[1].name: duplicate port name 'a' (first on line 4)");
  EXPECT_THAT(ErrorOf(Minimal("  - {name: 'a b', type: memif, socket: /b}\n")),
              StartsWith(At(5) + "ports[1].name: 'a b' must be"));
  EXPECT_EQ(ErrorOf("name: s\naddress: 10.255.0.1\nports: []\n"),
            At(3) + "ports: needs at least one port");
}

TEST(SwitchdConfigTest, RoutePrefixSyntax) {
  for (const char* bad : {"10.1.0.0", "10.1.0.0/33", "10.1.0.0/", "10.1.0/24", "10.1.0.0/2x"}) {
    EXPECT_THAT(ErrorOf(Minimal(absl::StrCat("routes:\n  - {prefix: '", bad, "', port: a}\n"))),
                StartsWith(At(6) + "routes[0].prefix: '" + bad + "' is not a.b.c.d/len"))
        << bad;
  }
  EXPECT_EQ(ErrorOf(Minimal("routes:\n  - {prefix: 10.1.0.1/24, port: a}\n")),
            At(6) + "routes[0].prefix: '10.1.0.1/24' has bits set beyond its length");
  EXPECT_EQ(ErrorOf(Minimal("routes:\n  - {prefix: 10.1.0.0/24, port: a}\n"
                            "  - {prefix: 10.1.0.0/24, port: a}\n")),
            At(7) + "routes[1].prefix: '10.1.0.0/24' is already routed (line 6)");
  // Groups go by multicast: only; a default route covering them is fine.
  EXPECT_EQ(ErrorOf(Minimal("routes:\n  - {prefix: 239.1.0.0/16, port: a}\n")),
            At(6) + "routes[0].prefix: '239.1.0.0/16' is multicast (224.0.0.0/4): groups are "
                    "forwarded by multicast:, never by routes");
  EXPECT_TRUE(ParseSwitchdConfig(Minimal("routes:\n  - {prefix: 0.0.0.0/0, port: a}\n"), kPath).ok());
}

TEST(SwitchdConfigTest, RouteToUnknownPort) {
  EXPECT_EQ(ErrorOf(Minimal("routes:\n  - {prefix: 0.0.0.0/0,\n     port: nope}\n")),
            At(7) + "routes[0].port: no port named 'nope'");
}

TEST(SwitchdConfigTest, MulticastTable) {
  EXPECT_EQ(ErrorOf(Minimal("multicast:\n  - {group: 10.1.0.1, ports: [a]}\n")),
            At(6) + "multicast[0].group: 10.1.0.1 is not a multicast address (224.0.0.0/4)");
  EXPECT_EQ(ErrorOf(Minimal("multicast:\n  - {group: 239.1.0.1, ports: [a]}\n"
                            "  - {group: 239.1.0.1, ports: [a]}\n")),
            At(7) + "multicast[1].group: 239.1.0.1 is already listed (line 6)");
  EXPECT_EQ(ErrorOf(Minimal("multicast:\n  - {group: 239.1.0.1,\n     ports: [a, zz]}\n")),
            At(7) + "multicast[0].ports[1]: no port named 'zz'");
  EXPECT_EQ(ErrorOf(Minimal("multicast:\n  - {group: 239.1.0.1, ports: [a, a]}\n")),
            At(6) + "multicast[0].ports[1]: port 'a' is listed twice");
  EXPECT_EQ(ErrorOf(Minimal("multicast:\n  - {group: 239.1.0.1, ports: []}\n")),
            At(6) + "multicast[0].ports: needs at least one port");
}

TEST(SwitchdConfigTest, Jobs) {
  const std::string groups = "multicast:\n  - {group: 239.1.0.1, ports: [a]}\njobs:\n";  // 5..7
  EXPECT_EQ(ErrorOf(Minimal(groups + "  - {id: 0, level: 1, group: 239.1.0.1}\n")),
            At(8) + "jobs[0].id: 0 is not in 1..255");
  EXPECT_EQ(ErrorOf(Minimal(groups + "  - {id: 256, level: 1, group: 239.1.0.1}\n")),
            At(8) + "jobs[0].id: 256 is not in 1..255");
  EXPECT_EQ(ErrorOf(Minimal(groups + "  - {id: 3, level: 1, group: 239.1.0.1}\n"
                                     "  - {id: 3, level: 2, group: 239.1.0.1}\n")),
            At(9) + "jobs[1].id: job 3 is already listed (line 8)");
  EXPECT_EQ(ErrorOf(Minimal(groups + "  - {id: 3, level: 3, group: 239.1.0.1}\n")),
            At(8) + "jobs[0].level: expected one of 1, 2, both, got '3'");
  EXPECT_EQ(ErrorOf(Minimal(groups + "  - {id: 3, level: 1,\n     group: 239.1.0.9}\n")),
            At(9) + "jobs[0].group: 239.1.0.9 is not in the multicast table");
  EXPECT_EQ(ErrorOf(Minimal(groups + "  - {id: 3, level: 1, group: 239.1.0.1,\n"
                                     "     aggregators: {first: 0, count: 1}}\n")),
            At(9) + "jobs[0].aggregators: a slice needs partition: static");
}

// Admission: a ToR with two worker ports, its uplink toward the PS and a
// probe port that no route uses.
std::string AdmissionConfig(const std::string& job_keys) {
  return absl::StrCat(
      "name: tor0\n"                                                    // 1
      "address: 10.255.0.1\n"                                           // 2
      "ports:\n"                                                        // 3
      "  - {name: w0, type: memif, socket: /tmp/w0.sock}\n"             // 4
      "  - {name: w1, type: memif, socket: /tmp/w1.sock}\n"             // 5
      "  - {name: up, type: memif, socket: /tmp/up.sock}\n"             // 6
      "  - {name: probe, type: memif, socket: /tmp/probe.sock}\n"       // 7
      "routes:\n"                                                       // 8
      "  - {prefix: 10.1.0.1/32, port: w0}\n"                           // 9
      "  - {prefix: 10.1.0.2/32, port: w1}\n"                           // 10
      "  - {prefix: 10.1.200.0/24, port: up}\n"                         // 11
      "multicast: [{group: 239.1.0.1, ports: [w0, w1]}]\n"              // 12
      "jobs:\n"                                                         // 13
      "  - {id: 1, level: 1, group: 239.1.0.1", job_keys, "}\n");       // 14
}

TEST(SwitchdConfigTest, AdmissionDefaultsComeFromTheRoutesAndTheGroup) {
  using Ports = std::vector<uint32_t>;
  absl::StatusOr<SwitchdConfig> c = ParseSwitchdConfig(AdmissionConfig(", ps: [10.1.200.1]"), kPath);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->jobs[0].ingress_check);
  EXPECT_EQ(c->jobs[0].parameter_ports, Ports({2})) << "the route toward its PS";
  EXPECT_EQ(c->jobs[0].gradient_ports, Ports({0, 1})) << "its group's ports";
  // Without ps: every port outside the group (the probe included).
  c = ParseSwitchdConfig(AdmissionConfig(""), kPath);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->jobs[0].parameter_ports, Ports({2, 3}));
  EXPECT_EQ(c->jobs[0].gradient_ports, Ports({0, 1}));
  // Explicit lists win.
  c = ParseSwitchdConfig(AdmissionConfig(", parameters_from: [up], gradients_from: [w1]"), kPath);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->jobs[0].parameter_ports, Ports({2}));
  EXPECT_EQ(c->jobs[0].gradient_ports, Ports({1}));
  c = ParseSwitchdConfig(AdmissionConfig(", ingress_check: false"), kPath);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->jobs[0].ingress_check);
}

TEST(SwitchdConfigTest, BadAdmissionIsRefusedNamingTheKey) {
  EXPECT_EQ(ErrorOf(AdmissionConfig(", ps: [10.9.0.1]")),
            At(14) + "jobs[0].ps[0]: no route leads to 10.9.0.1");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", ps: [239.1.0.1]")),
            At(14) + "jobs[0].ps[0]: 239.1.0.1 is not a host address");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", ps: []")), At(14) + "jobs[0].ps: needs at least one address");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", ps: [10.1.200.1, 10.1.200.1]")),
            At(14) + "jobs[0].ps[1]: 10.1.200.1 is listed twice");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", ps: [10.255.0.1]")),
            At(14) + "jobs[0].ps[0]: 10.255.0.1 is this switch's own address");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", ps: [10.1.200.1], parameters_from: [up]")),
            At(14) + "jobs[0].parameters_from: give either it or jobs[0].ps (whose routes name "
                     "the ports), not both");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", parameters_from: [nope]")),
            At(14) + "jobs[0].parameters_from[0]: no port named 'nope'");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", gradients_from: []")),
            At(14) + "jobs[0].gradients_from: needs at least one port");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", gradients_from: [w0, w0]")),
            At(14) + "jobs[0].gradients_from[1]: port 'w0' is listed twice");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", ingress_check: false, gradients_from: [w0]")),
            At(14) + "jobs[0].gradients_from: not with ingress_check: false");
  EXPECT_EQ(ErrorOf(AdmissionConfig(", ingress_check: maybe")),
            At(14) + "jobs[0].ingress_check: expected true or false");
}

TEST(SwitchdConfigTest, StaticSlices) {
  const std::string head =
      "name: s\naddress: 10.255.0.1\naggregators: 100\npartition: static\n"      // 1..4
      "ports: [{name: a, type: memif, socket: /a}]\n"                            // 5
      "multicast: [{group: 239.1.0.1, ports: [a]}]\n"                            // 6
      "jobs:\n";                                                                 // 7
  EXPECT_EQ(ErrorOf(head + "  - {id: 1, level: 1, group: 239.1.0.1}\n"),
            At(8) + "jobs[0]: partition: static needs 'aggregators: {first: N, count: M}'");
  EXPECT_EQ(ErrorOf(head + "  - {id: 1, level: 1, group: 239.1.0.1, aggregators: {first: 100, "
                           "count: 1}}\n"),
            At(8) + "jobs[0].aggregators.first: 100 is not in 0..99");
  EXPECT_EQ(ErrorOf(head + "  - {id: 1, level: 1, group: 239.1.0.1, aggregators: {first: 90, "
                           "count: 20}}\n"),
            At(8) + "jobs[0].aggregators.count: 20 is not in 1..10");
  EXPECT_EQ(ErrorOf(head + "  - {id: 1, level: 1, group: 239.1.0.1, aggregators: {first: 0, "
                           "count: 50}}\n"
                           "  - {id: 2, level: 1, group: 239.1.0.1,\n"
                           "     aggregators: {first: 40, count: 20}}\n"),
            At(10) + "jobs[1].aggregators: [40, 60) overlaps job 1's [0, 50) (line 8)");
  EXPECT_EQ(ErrorOf(head + "  - {id: 1, level: 1, group: 239.1.0.1, aggregators: {first: 0}}\n"),
            At(8) + "jobs[0].aggregators: missing 'count'");
}

TEST(SwitchdConfigTest, LoadReportsUnreadableFile) {
  absl::StatusOr<SwitchdConfig> config = LoadSwitchdConfig("/nonexistent/atp/switchd.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("/nonexistent/atp/switchd.yaml: cannot read"));
}

}  // namespace
}  // namespace atp::switchd
