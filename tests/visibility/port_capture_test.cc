// atp-switchd's port capture: which ports `pcap: true` selects, and the
// errors for a port asking for capture without --pcap_dir or a missing
// directory (the config's line, the flag's name).
#include <string>

#include "gtest/gtest.h"
#include "switch_emulator/daemon/config.h"
#include "switch_emulator/daemon/port_capture.h"

namespace atp::switchd {
namespace {

SwitchdConfig Parse(const std::string& a_pcap) {
  const std::string text =
      "name: s\n"
      "address: 10.255.0.1\n"
      "ports:\n"
      "  - {name: a, type: kernel_udp, bind: '127.0.0.1:1000', peer: '127.0.0.1:2000'" + a_pcap + "}\n"
      "  - {name: b, type: kernel_udp, bind: '127.0.0.1:1100', peer: '127.0.0.1:2100'}\n";
  absl::StatusOr<SwitchdConfig> config = ParseSwitchdConfig(text, "s.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : SwitchdConfig{};
}

TEST(PortCaptureTest, EveryPortUnlessSomeAreChosen) {
  PortCaptureOptions options;
  options.directory = "/tmp";
  EXPECT_EQ(CapturedPorts(Parse(""), options), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(CapturedPorts(Parse(", pcap: true"), options), (std::vector<size_t>{0}));
  EXPECT_TRUE(CapturedPorts(Parse(", pcap: true"), {}).empty());  // no directory: nothing
}

TEST(PortCaptureTest, APortAskingWithoutADirectoryIsAnErrorAtItsLine) {
  const absl::Status s = CheckPortCapture(Parse(", pcap: true"), {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("s.yaml:4: port 'a' says pcap: true, but --pcap_dir is not set"),
            std::string::npos)
      << s;
  EXPECT_TRUE(CheckPortCapture(Parse(""), {}).ok());
}

// The message names the flag as given, not a field of CaptureOptions behind
// it ("--pcap_dir.directory: ...").
TEST(PortCaptureTest, AMissingDirectoryNamesTheFlag) {
  PortCaptureOptions options;
  options.directory = "/nonexistent/atp";
  const absl::Status s = CheckPortCapture(Parse(""), options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--pcap_dir: '/nonexistent/atp' does not exist");
  options.directory = "/proc/version";
  EXPECT_EQ(CheckPortCapture(Parse(""), options).message(),
            "--pcap_dir: '/proc/version' is not a directory");
}

}  // namespace
}  // namespace atp::switchd
