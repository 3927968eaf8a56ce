// The DPDK backend's options: EAL command lines, device options, memif
// arguments. No EAL needed.
#include <cstdlib>
#include <string>
#include <vector>

#include "atp/transport/dpdk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace atp::transport {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(DpdkEalOptions, DefaultsRunWithoutHugepagesPciOrSharedFiles) {
  DpdkEalOptions options;
  ASSERT_TRUE(options.Validate().ok());
  const std::vector<std::string> args = options.ToArgs();
  EXPECT_THAT(args, Contains("--no-huge"));
  EXPECT_THAT(args, Contains("--no-shconf"));
  EXPECT_THAT(args, Contains("--no-pci"));
  EXPECT_THAT(args, Contains("-m256"));
  EXPECT_THAT(args, Contains("--no-telemetry"));
  EXPECT_THAT(args, Not(Contains("--in-memory"))) << "--no-huge --in-memory is rejected by the EAL";
}

TEST(DpdkEalOptions, EmptyLcoresFloatOverTheAffinityInsteadOfPinning) {
  DpdkEalOptions options;
  const std::vector<std::string> args = options.ToArgs();
  ASSERT_FALSE(args.empty());
  EXPECT_THAT(args[0], HasSubstr("--lcores=0@("));
  options.lcores = "1";
  EXPECT_EQ(options.ToArgs()[0], "--lcores=1");
}

TEST(DpdkEalOptions, SharedHugepagesAlwaysUnlinkTheirFiles) {
  DpdkEalOptions options;
  options.memory = DpdkMemory::kHugePagesShared;
  EXPECT_FALSE(options.Validate().ok()) << "a file prefix is required";
  options.file_prefix = "atp1";
  ASSERT_TRUE(options.Validate().ok());
  const std::vector<std::string> args = options.ToArgs();
  EXPECT_THAT(args, Contains("--file-prefix=atp1"));
  EXPECT_THAT(args, Contains("--huge-unlink")) << "--file-prefix alone leaks hugepages";
  EXPECT_THAT(args, Not(Contains("--no-huge")));
}

TEST(DpdkEalOptions, InMemoryHugepagesNeverComeWithNoHuge) {
  DpdkEalOptions options;
  options.memory = DpdkMemory::kHugePagesInMemory;
  ASSERT_TRUE(options.Validate().ok());
  EXPECT_THAT(options.ToArgs(), Contains("--in-memory"));
  EXPECT_THAT(options.ToArgs(), Not(Contains("--no-huge")));
  options.file_prefix = "x";
  EXPECT_FALSE(options.Validate().ok()) << "a file prefix only with shared hugepages";
}

TEST(DpdkEalOptions, PciAllowListReplacesNoPci) {
  DpdkEalOptions options;
  options.pci_allow = {"0000:3b:00.0", "3b:00.1"};
  ASSERT_TRUE(options.Validate().ok());
  EXPECT_THAT(options.ToArgs(), Contains("--allow=0000:3b:00.0"));
  EXPECT_THAT(options.ToArgs(), Contains("--allow=3b:00.1"));
  EXPECT_THAT(options.ToArgs(), Not(Contains("--no-pci")));
  options.pci_allow = {"eth0"};
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("pci_allow"));
}

TEST(DpdkEalOptions, ValidationNamesTheOffendingField) {
  const auto message = [](DpdkEalOptions options) {
    return std::string(options.Validate().message());
  };
  DpdkEalOptions options;
  options.memory_mb = 8;
  EXPECT_THAT(message(options), HasSubstr("memory_mb"));
  options = {};
  options.vdevs = {"net_memif0,role=server socket=x"};
  EXPECT_THAT(message(options), HasSubstr("vdevs"));
  options = {};
  options.vdevs = {"net_memif0,role=server,socket=/run/a.sock", "net_ring0"};
  EXPECT_TRUE(options.Validate().ok());
  EXPECT_THAT(options.ToArgs(), Contains("--vdev=net_memif0,role=server,socket=/run/a.sock"));
  options = {};
  options.lcores = "0;rm";
  EXPECT_THAT(message(options), HasSubstr("lcores"));
  options = {};
  options.extra_args = {"--no-huge"};
  EXPECT_THAT(message(options), HasSubstr("set by a field")) << "the fields own the memory flags";
  options.extra_args = {"-v"};
  EXPECT_THAT(message(options), HasSubstr("extra_args"));
  options.extra_args = {"--iova-mode=va"};
  EXPECT_TRUE(options.Validate().ok());
}

TEST(DpdkOptions, ValidationNamesTheOffendingField) {
  DpdkOptions options;
  options.port = "net_ring_x_a";
  EXPECT_TRUE(options.Validate().ok());
  options.vdev_args = "role=server";
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("vdev_args"));
  options.source = DpdkPortSource::kCreateVdev;
  EXPECT_TRUE(options.Validate().ok());
  options.port = "memif0";
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("net_<driver>"));
  options.port = "";
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("port"));
  options.port = "net_memif0";
  options.device.num_queues = 17;
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("num_queues"));
  options.device.num_queues = 1;
  options.mempool_cache = 1000;
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("mempool_cache"));
  options.mempool_cache = 256;
  options.peers.push_back(DpdkPeer{{}, 0});
  EXPECT_THAT(std::string(options.Validate().message()), HasSubstr("peers"));
}

TEST(DpdkOptions, OpeningBeforeTheEalFailsWithTheReason) {
  DpdkOptions options;
  options.port = "net_ring_x_a";
  // This binary never initialises the EAL.
  const absl::StatusOr<std::unique_ptr<DpdkDevice>> device = OpenDpdkDevice(options);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(device.status().message()), HasSubstr("InitDpdkEal"));
  EXPECT_FALSE(DpdkRingLink::Create({"x", 1, 64}).ok());
  EXPECT_TRUE(DpdkEalArgs().empty());
}

TEST(DpdkEalOptions, AFailedInitialisationIsNotRetried) {
  // In a child process (this binary never initialises the EAL itself): an
  // init that fails leaves the EAL unusable, so a second call, even with good
  // options, returns the first error again.
  EXPECT_EXIT(
      {
        DpdkEalOptions bad;
        bad.lcores = "1000";  // no such CPU
        bad.log_level = "emergency";
        const absl::Status first = InitDpdkEal(bad);
        const absl::Status second = InitDpdkEal(DpdkEalOptions{});
        const bool ok = !first.ok() && !second.ok() &&
                        std::string(second.message()).find("cannot be initialised again") !=
                            std::string::npos &&
                        DpdkEalArgs().empty();
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(MemifVdevArgs, NameRoleSocketIdAndRingSize) {
  MemifOptions options;
  options.role = MemifRole::kClient;
  options.socket = "/atp7";
  options.id = 3;
  options.ring_frames = 256;
  EXPECT_EQ(MemifVdevArgs(options), "role=client,id=3,socket=/atp7,socket-abstract=yes,rsize=8");
  options.socket_kind = MemifSocket::kFile;
  options.role = MemifRole::kServer;
  options.ring_frames = 1000;  // rounded down to a power of two
  EXPECT_EQ(MemifVdevArgs(options), "role=server,id=3,socket=/atp7,socket-abstract=no,rsize=9");
}

}  // namespace
}  // namespace atp::transport
