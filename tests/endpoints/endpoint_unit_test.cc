// Endpoint flags -> options (examples/common/endpoint.h) and the transport
// factory's DPDK kind (atp/transport_factory.h). No EAL is initialised:
// validation only.
#include <string>

#include "absl/strings/match.h"
#include "atp/capture.h"
#include "atp/config.h"
#include "atp/transport_factory.h"
#include "examples/common/endpoint.h"
#include "examples/common/inputs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace atp::examples {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

wire::Ipv4Address Ip(const char* text) { return *wire::Ipv4Address::Parse(text); }

EndpointFlags MemifFlags() {
  EndpointFlags f;
  f.transport = "dpdk";
  f.dpdk_port = "memif";
  f.memif_socket = "/tmp/tb/w3.sock";
  f.job = 1;
  f.racks = 2;
  f.workers_per_rack = 2;
  f.io_threads = 2;
  return f;
}

// KernelUdpFlags: a worker over the kernel UDP overlay (no DPDK needed).
EndpointFlags KernelUdpFlags() {
  EndpointFlags f = MemifFlags();
  f.memif_socket.clear();
  f.transport = "kernel_udp";
  f.udp_bind = "127.0.0.1:47010";
  f.udp_gateway = "127.0.0.2:47000";
  return f;
}

EndpointPlace Worker(int rank) {
  EndpointPlace p;
  p.role = EndpointRole::kWorker;
  p.rank = rank;
  return p;
}

EndpointPlace Ps(ParameterDelivery delivery) {
  EndpointPlace p;
  p.role = EndpointRole::kParameterServer;
  p.delivery = delivery;
  return p;
}

// The error of BuildEndpoint for `flags` at `place` ("" when it succeeds).
std::string ErrorOf(const EndpointFlags& flags, const EndpointPlace& place) {
  absl::StatusOr<EndpointSpec> spec = BuildEndpoint(flags, place);
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

TEST(TransportKindTest, ParsesAndNamesDpdk) {
  ASSERT_TRUE(ParseTransportKind("dpdk").ok());
  EXPECT_EQ(*ParseTransportKind("dpdk"), TransportKind::kDpdk);
  EXPECT_EQ(TransportKindName(TransportKind::kDpdk), "dpdk");
  absl::StatusOr<TransportKind> bad = ParseTransportKind("rdma");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("dpdk"));
  EXPECT_EQ(TransportAvailable(TransportKind::kDpdk), ATP_HAVE_DPDK == 1);
  EXPECT_TRUE(TransportAvailable(TransportKind::kKernelUdp));
}

TEST(TransportOptionsTest, DpdkValidationNamesTheField) {
  TransportOptions t;
  t.kind = TransportKind::kDpdk;
  t.dpdk.address = {Ip("10.1.0.1"), transport::DefaultMacFor(Ip("10.1.0.1"))};
  t.dpdk.port = "net_memif0";
  if (!ATP_HAVE_DPDK) {
    const absl::Status s = t.Validate();
    EXPECT_THAT(std::string(s.message()), HasSubstr("built without DPDK"));
    GTEST_SKIP() << "libatp built without DPDK: only the refusal is tested";
  }
  EXPECT_TRUE(t.Validate().ok()) << t.Validate();

  TransportOptions bad_port = t;
  bad_port.dpdk.port = "net memif";
  EXPECT_THAT(std::string(bad_port.Validate().message()), StartsWith("TransportOptions.dpdk: "));
  EXPECT_THAT(std::string(bad_port.Validate().message()), HasSubstr("port"));

  TransportOptions bad_eal = t;
  bad_eal.dpdk_eal.memory_mb = 0;
  EXPECT_THAT(std::string(bad_eal.Validate().message()), StartsWith("TransportOptions.dpdk_eal: "));

  TransportOptions bad_queues = t;
  bad_queues.dpdk.device.num_queues = 0;
  EXPECT_THAT(std::string(bad_queues.Validate("Mine").message()), StartsWith("Mine.dpdk: "));
}

TEST(BuildEndpointTest, WorkerOverMemif) {
  if (!ATP_HAVE_DPDK) GTEST_SKIP() << "libatp built without DPDK";
  absl::StatusOr<EndpointSpec> spec = BuildEndpoint(MemifFlags(), Worker(3));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->rack, 1);
  EXPECT_EQ(spec->worker_in_rack, 1);
  EXPECT_EQ(spec->self.ipv4, Ip("10.1.1.2"));
  EXPECT_EQ(spec->self.mac, transport::DefaultMacFor(Ip("10.1.1.2")));
  EXPECT_EQ(spec->ps.ipv4, Ip("10.1.200.1"));
  EXPECT_EQ(spec->group.ipv4, Ip("239.1.0.1"));
  EXPECT_EQ(spec->group.mac, (wire::MacAddress{{0x01, 0x00, 0x5e, 0x01, 0x00, 0x01}}));
  EXPECT_EQ(spec->job.job_id, 1);
  EXPECT_EQ(spec->job.layout.total_workers(), 4);
  EXPECT_EQ(spec->job.io_threads, 2u);
  const TransportOptions& t = spec->transport;
  EXPECT_EQ(t.kind, TransportKind::kDpdk);
  EXPECT_EQ(t.dpdk.device.num_queues, 2u);
  EXPECT_EQ(t.dpdk.address, spec->self);
  EXPECT_EQ(t.dpdk.source, transport::DpdkPortSource::kCreateVdev);
  EXPECT_THAT(t.dpdk.vdev_args, HasSubstr("role=client"));
  EXPECT_THAT(t.dpdk.vdev_args, HasSubstr("socket=/tmp/tb/w3.sock"));
  EXPECT_THAT(t.dpdk.vdev_args, HasSubstr("socket-abstract=no"));
  EXPECT_EQ(t.dpdk.destinations, transport::DpdkDestinations::kKnownPeers);
  ASSERT_EQ(t.dpdk.peers.size(), 1u);  // the PS
  EXPECT_EQ(t.dpdk.peers[0].address, spec->ps);
  EXPECT_EQ(t.dpdk.peers[0].num_queues, 2u);
  EXPECT_TRUE(t.Validate().ok()) << t.Validate();
}

TEST(BuildEndpointTest, ParameterServerPeers) {
  if (!ATP_HAVE_DPDK) GTEST_SKIP() << "libatp built without DPDK";
  EndpointFlags f = MemifFlags();
  f.job = 2;
  f.memif_role = "server";
  f.memif_socket = "@abstract-name";
  absl::StatusOr<EndpointSpec> multicast = BuildEndpoint(f, Ps(ParameterDelivery::kMulticast));
  ASSERT_TRUE(multicast.ok()) << multicast.status();
  EXPECT_EQ(multicast->self.ipv4, Ip("10.2.200.1"));
  ASSERT_EQ(multicast->transport.dpdk.peers.size(), 1u);  // the group
  EXPECT_EQ(multicast->transport.dpdk.peers[0].address.ipv4, Ip("239.1.0.2"));
  EXPECT_THAT(multicast->transport.dpdk.vdev_args, HasSubstr("role=server"));
  EXPECT_THAT(multicast->transport.dpdk.vdev_args, HasSubstr("socket=abstract-name"));
  EXPECT_THAT(multicast->transport.dpdk.vdev_args, HasSubstr("socket-abstract=yes"));

  absl::StatusOr<EndpointSpec> unicast = BuildEndpoint(f, Ps(ParameterDelivery::kUnicast));
  ASSERT_TRUE(unicast.ok()) << unicast.status();
  ASSERT_EQ(unicast->transport.dpdk.peers.size(), 4u);  // every worker, rack-major
  EXPECT_EQ(unicast->transport.dpdk.peers[0].address.ipv4, Ip("10.2.0.1"));
  EXPECT_EQ(unicast->transport.dpdk.peers[3].address.ipv4, Ip("10.2.1.2"));
}

TEST(BuildEndpointTest, OtherPortsAndOverrides) {
  if (!ATP_HAVE_DPDK) GTEST_SKIP() << "libatp built without DPDK";
  EndpointFlags f = MemifFlags();
  f.memif_socket.clear();
  f.dpdk_port = "af_packet";
  f.iface = "veth0";
  f.netns = "atptb-w0";
  f.address = "10.9.9.9";
  f.ps_address = "10.9.200.7";
  f.group = "239.5.6.7";
  absl::StatusOr<EndpointSpec> spec = BuildEndpoint(f, Worker(0));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->self.ipv4, Ip("10.9.9.9"));
  EXPECT_EQ(spec->ps.ipv4, Ip("10.9.200.7"));
  EXPECT_EQ(spec->group.mac, (wire::MacAddress{{0x01, 0x00, 0x5e, 0x05, 0x06, 0x07}}));
  EXPECT_EQ(spec->transport.dpdk.netns, "atptb-w0");
  EXPECT_THAT(spec->transport.dpdk.vdev_args, HasSubstr("iface=veth0"));
  EXPECT_EQ(spec->transport.dpdk.promiscuous, transport::DpdkPromiscuous::kOn);

  f.dpdk_port = "pci";
  f.iface.clear();
  f.netns.clear();
  f.pci = "0000:3b:00.0";
  spec = BuildEndpoint(f, Worker(0));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->transport.dpdk.port, "0000:3b:00.0");
  EXPECT_EQ(spec->transport.dpdk.source, transport::DpdkPortSource::kProbed);
  EXPECT_EQ(spec->transport.dpdk_eal.pci_allow, std::vector<std::string>{"0000:3b:00.0"});
}

TEST(BuildEndpointTest, BadFlagsNameTheFlag) {
  const EndpointFlags good = MemifFlags();
  struct Case {
    const char* flag;
    void (*mutate)(EndpointFlags&);
  };
  const Case cases[] = {
      {"--job", [](EndpointFlags& f) { f.job = 0; }},
      {"--job", [](EndpointFlags& f) { f.job = 256; }},
      {"--racks", [](EndpointFlags& f) { f.racks = 33; }},
      {"--workers_per_rack", [](EndpointFlags& f) { f.workers_per_rack = 0; }},
      {"--io_threads", [](EndpointFlags& f) { f.io_threads = 17; }},
      {"--address", [](EndpointFlags& f) { f.address = "10.1.1"; }},
      {"--address", [](EndpointFlags& f) { f.address = "239.1.0.1"; }},
      {"--ps_address", [](EndpointFlags& f) { f.ps_address = "ps.example"; }},
      // Not a host address, or another node's: frames would go astray.
      {"--address", [](EndpointFlags& f) { f.address = "0.0.0.0"; }},
      {"--address", [](EndpointFlags& f) { f.address = "10.1.0.2"; }},    // worker 1's
      {"--address", [](EndpointFlags& f) { f.address = "10.1.200.1"; }},  // the PS's
      {"--ps_address", [](EndpointFlags& f) { f.ps_address = "10.1.0.1"; }},  // worker 0's
      // Capture sizes without a capture would be ignored.
      {"--pcap_max_files", [](EndpointFlags& f) { f.pcap_max_files = 3; }},
      {"--pcap_max_file_mb", [](EndpointFlags& f) { f.pcap_max_file_mb = 8; }},
      {"--group", [](EndpointFlags& f) { f.group = "10.0.0.1"; }},
      {"--transport", [](EndpointFlags& f) { f.transport = "carrier-pigeon"; }},
      {"--transport", [](EndpointFlags& f) { f.transport = "loopback"; }},
  };
  for (const Case& c : cases) {
    EndpointFlags f = good;
    c.mutate(f);
    EXPECT_THAT(ErrorOf(f, Worker(0)), StartsWith(std::string(c.flag) + ":")) << c.flag;
  }
  EXPECT_THAT(ErrorOf(good, Worker(4)), StartsWith("--rank:"));
  EXPECT_THAT(ErrorOf(good, Worker(-1)), StartsWith("--rank:"));
  if (!ATP_HAVE_DPDK) return;
  const Case dpdk_cases[] = {
      {"--dpdk_port", [](EndpointFlags& f) { f.dpdk_port = "vhost"; }},
      {"--memif_socket", [](EndpointFlags& f) { f.memif_socket.clear(); }},
      {"--memif_socket", [](EndpointFlags& f) { f.memif_socket = "/tmp/a,b.sock"; }},
      {"--memif_role", [](EndpointFlags& f) { f.memif_role = "sideways"; }},
      {"--memif_id", [](EndpointFlags& f) { f.memif_id = -1; }},
      {"--iface", [](EndpointFlags& f) { f.dpdk_port = "af_xdp"; f.memif_socket.clear(); }},
      {"--pci", [](EndpointFlags& f) { f.dpdk_port = "pci"; f.memif_socket.clear(); }},
      {"--memif_socket", [](EndpointFlags& f) { f.dpdk_port = "pci"; f.pci = "0000:3b:00.0"; }},
      {"--netns", [](EndpointFlags& f) { f.netns = "ns0"; }},
      {"--dpdk_memory_mb", [](EndpointFlags& f) { f.dpdk_memory_mb = 8; }},
      {"--udp_bind", [](EndpointFlags& f) { f.udp_bind = "127.0.0.1:47000"; }},
      // Flags of another kind of port would be ignored.
      {"--memif_id", [](EndpointFlags& f) {
         f.dpdk_port = "pci"; f.pci = "0000:3b:00.0"; f.memif_socket.clear(); f.memif_id = 3; }},
      {"--memif_role", [](EndpointFlags& f) {
         f.dpdk_port = "pci"; f.pci = "0000:3b:00.0"; f.memif_socket.clear(); f.memif_role = "server"; }},
      {"--iface", [](EndpointFlags& f) { f.iface = "eth0"; }},
      {"--pci", [](EndpointFlags& f) { f.pci = "0000:3b:00.0"; }},
  };
  for (const Case& c : dpdk_cases) {
    EndpointFlags f = good;
    c.mutate(f);
    EXPECT_THAT(ErrorOf(f, Worker(0)), StartsWith(std::string(c.flag) + ":")) << c.flag;
  }
}

TEST(BuildEndpointTest, KernelUdpOverlay) {
  const EndpointFlags f = KernelUdpFlags();
  absl::StatusOr<EndpointSpec> spec = BuildEndpoint(f, Worker(2));
  ASSERT_TRUE(spec.ok()) << spec.status();
  const TransportOptions& t = spec->transport;
  EXPECT_EQ(t.kind, TransportKind::kKernelUdp);
  EXPECT_EQ(t.kernel_udp.encapsulation, transport::KernelUdpEncapsulation::kWholeFrame);
  EXPECT_EQ(t.kernel_udp.address.ipv4, Ip("10.1.1.1"));
  EXPECT_EQ(t.kernel_udp.bind, (transport::SocketAddress{Ip("127.0.0.1"), 47010}));
  ASSERT_TRUE(t.kernel_udp.gateway.has_value());
  EXPECT_EQ(*t.kernel_udp.gateway, (transport::SocketAddress{Ip("127.0.0.2"), 47000}));
  EXPECT_TRUE(t.kernel_udp.peers.empty());  // everything goes through the gateway
  EXPECT_EQ(t.kernel_udp.device.num_queues, 2u);

  const auto error = [&](void (*mutate)(EndpointFlags&)) {
    EndpointFlags g = f;
    mutate(g);
    return ErrorOf(g, Worker(0));
  };
  EXPECT_THAT(error([](EndpointFlags& g) { g.udp_bind.clear(); }), StartsWith("--udp_bind:"));
  EXPECT_THAT(error([](EndpointFlags& g) { g.udp_bind = "127.0.0.1"; }), StartsWith("--udp_bind:"));
  EXPECT_THAT(error([](EndpointFlags& g) { g.udp_bind = "127.0.0.1:0"; }), StartsWith("--udp_bind:"));
  EXPECT_THAT(error([](EndpointFlags& g) { g.udp_bind = "127.0.0.1:65535"; }),
              StartsWith("--udp_bind:"));  // two queues: 65535 and 65536
  EXPECT_THAT(error([](EndpointFlags& g) { g.udp_gateway.clear(); }), StartsWith("--udp_gateway:"));
  EXPECT_THAT(error([](EndpointFlags& g) { g.udp_gateway = "localhost:1"; }),
              StartsWith("--udp_gateway:"));
  EXPECT_THAT(error([](EndpointFlags& g) { g.memif_socket = "/tmp/x.sock"; }),
              StartsWith("--memif_socket:"));
  // The gateway on one of this node's own sockets (2 queues: 47010, 47011).
  EXPECT_THAT(error([](EndpointFlags& g) { g.udp_gateway = "127.0.0.1:47011"; }),
              StartsWith("--udp_gateway:"));
  EXPECT_THAT(error([](EndpointFlags& g) { g.udp_gateway = "127.0.0.1:47009"; }),
              StartsWith("--udp_gateway:"));
  EXPECT_EQ(error([](EndpointFlags& g) { g.udp_gateway = "127.0.0.1:47012"; }), "");
  // DPDK's flags would be ignored.
  EXPECT_THAT(error([](EndpointFlags& g) { g.dpdk_memory_mb = 512; }), StartsWith("--dpdk_memory_mb:"));
  EXPECT_THAT(error([](EndpointFlags& g) { g.memif_role = "server"; }), StartsWith("--memif_role:"));
  EXPECT_THAT(error([](EndpointFlags& g) { g.dpdk_port = "pci"; }), StartsWith("--dpdk_port:"));
}

// --pcap_dir's directory is refused as the flag's value, not as the field of
// CaptureOptions it fills ("--pcap_dir: capture.directory: ...").
TEST(BuildEndpointTest, ACaptureDirectoryIsCheckedAsTheFlag) {
  EndpointFlags f = KernelUdpFlags();
  f.pcap_dir = "/nonexistent-atp-dir";
  EXPECT_EQ(ErrorOf(f, Worker(0)), "--pcap_dir: '/nonexistent-atp-dir' does not exist");
  f.pcap_dir = ::testing::TempDir();
  if (!CaptureAvailable()) {
    EXPECT_THAT(ErrorOf(f, Worker(0)),
                StartsWith("--pcap_dir: this libatp was built without libpcap"));
    return;
  }
  absl::StatusOr<EndpointSpec> spec = BuildEndpoint(f, Worker(0));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->transport.capture.directory, f.pcap_dir);
  EXPECT_EQ(spec->transport.capture.name, "w0");
}

TEST(InputsTest, ExactSumsForEveryJobSize) {
  for (int workers : {1, 2, 4, 16, 64, 1024}) {
    const int32_t a = InputAmplitude(workers);
    // The sum of `workers` values of magnitude <= a / 256 stays quantizable
    // at the default scale (|sum| * 1e8 < 2^31).
    EXPECT_LT(static_cast<double>(workers) * a / 256.0 * kDefaultScale, 2147483647.0) << workers;
    std::vector<float> in(1000), sum(1000), expected(1000, 0.0f);
    for (int r = 0; r < workers && r < 8; ++r) {
      FillInput(7, 1, static_cast<uint32_t>(r), 3, workers, in);
      for (size_t i = 0; i < in.size(); ++i) {
        EXPECT_LE(std::abs(in[i]), a / 256.0f);
        // Quantization is exact: x * 1e8 is an integer.
        const double q = static_cast<double>(in[i]) * kDefaultScale;
        EXPECT_EQ(q, std::round(q));
      }
    }
  }
  // FillExpectedSum is the plain sum of every rank's FillInput.
  std::vector<float> in(257), expected(257), sum(257, 0.0f);
  for (uint32_t r = 0; r < 4; ++r) {
    FillInput(7, 2, r, 5, 4, in);
    for (size_t i = 0; i < in.size(); ++i) sum[i] += in[i];
  }
  FillExpectedSum(7, 2, 5, 4, expected);
  EXPECT_EQ(sum, expected);
  // Different ranks, iterations and seeds give different inputs.
  std::vector<float> other(257);
  FillInput(7, 2, 1, 5, 4, in);
  FillInput(7, 2, 2, 5, 4, other);
  EXPECT_NE(in, other);
  FillInput(8, 2, 1, 5, 4, other);
  EXPECT_NE(in, other);
}

}  // namespace
}  // namespace atp::examples
