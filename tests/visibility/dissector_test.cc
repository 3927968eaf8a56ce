// The Wireshark dissector (tools/wireshark/atp.lua) run by Debian's tshark
// on a capture this test writes (the golden frames of
// tests/vectors/atp-frames.json, through lib/capture's pcap writer): each
// valid frame's fields as tshark prints them equal the vectors' decoded
// fields, and each invalid frame carries the expert info the pipeline's
// reason calls for. Skips when tshark is missing or refuses Lua.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "atp/capture.h"
#include "gtest/gtest.h"
#include "atp/wire.h"
#include "lib/capture/pcap_ring.h"
#include "lib/wire/control_message.h"
#include "nlohmann/json.hpp"

namespace atp {
namespace {

namespace fs = std::filesystem;

struct ShellResult {
  int status = -1;
  std::string output;
};

// Shell: runs `command` (stderr discarded: tshark warns when run as root).
ShellResult Shell(const std::string& command) {
  ShellResult run;
  std::FILE* p = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), p)) > 0) run.output.append(buffer.data(), n);
  run.status = ::pclose(p);
  return run;
}

std::vector<uint8_t> FromHex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

class DissectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CaptureAvailable()) GTEST_SKIP() << "built without libpcap (libpcap-dev)";
    if (Shell("command -v tshark").status != 0) {
      GTEST_SKIP() << "tshark is not installed (Debian package tshark; scripts/install-deps)";
    }
    std::string templ = (fs::temp_directory_path() / "atp_dissector_XXXXXX").string();
    dir_ = ::mkdtemp(templ.data());
    std::ifstream in(kVectors);
    vectors_ = nlohmann::json::parse(in);
    capture::PcapRingOptions options;
    options.directory = dir_;
    options.stem = "vectors.pcap";
    options.single_file = true;
    absl::StatusOr<std::unique_ptr<capture::PcapRing>> ring = capture::PcapRing::Open(options);
    ASSERT_TRUE(ring.ok()) << ring.status();
    int64_t t = 0;
    for (const char* group : {"valid", "invalid"}) {
      for (const auto& v : vectors_[group]) (*ring)->Write(FromHex(v["hex"]), t += 1000);
    }
    pcap_ = dir_ + "/vectors.pcap";
    ring->reset();  // closes the file
    const ShellResult probe = Shell(absl::StrCat("tshark -X lua_script:", kLua, " -r ", pcap_,
                                                 " -c 1 -T fields -e atpagg.job"));
    if (probe.status != 0 || probe.output.empty()) {
      GTEST_SKIP() << "tshark does not load Lua dissectors here (built without Lua, or Lua "
                      "disabled for this user, e.g. root with run_user_scripts_when_superuser "
                      "false)";
    }
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Fields: one line per frame, tab-separated, of `fields`: their first
  // occurrence ('f'), or all of them comma-separated ('a').
  std::vector<std::vector<std::string>> Fields(const std::vector<std::string>& fields,
                                               char occurrence = 'f') {
    std::string command = absl::StrCat("tshark -X lua_script:", kLua, " -r ", pcap_,
                                       " -T fields -E occurrence=", std::string(1, occurrence));
    for (const std::string& f : fields) absl::StrAppend(&command, " -e ", f);
    const ShellResult run = Shell(command);
    EXPECT_EQ(run.status, 0) << command;
    std::vector<std::vector<std::string>> rows;
    for (absl::string_view line : absl::StrSplit(run.output, '\n', absl::SkipEmpty())) {
      rows.push_back(absl::StrSplit(line, '\t'));
    }
    return rows;
  }

  static constexpr const char* kLua = ATP_DISSECTOR_LUA;
  static constexpr const char* kVectors = ATP_FRAME_VECTORS;
  std::string dir_;
  std::string pcap_;
  nlohmann::json vectors_;
};

std::string Bool(const nlohmann::json& fields, const char* name) {
  // The vectors write flags as 0/1 and leave out those that are 0.
  return fields.contains(name) && fields[name].get<int>() != 0 ? "1" : "0";
}

std::string Hex32(uint32_t v) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%08x", v);
  return buffer;
}

TEST_F(DissectorTest, ValidFramesShowEveryHeaderFieldAsTheVectorsDecodeThem) {
  const auto rows = Fields({"atpagg.job", "atpagg.seq", "atpagg.queue", "atpagg.position",
                            "atpagg.bitmap0", "atpagg.bitmap1", "atpagg.fanin0", "atpagg.fanin1",
                            "atpagg.edge", "atpagg.resend", "atpagg.collision", "atpagg.ecn",
                            "atpagg.ack", "atpagg.fp", "atpagg.aggregator", "atpagg.udp_queue",
                            "atpagg.value_int", "atpagg.value_float", "_ws.expert.message"});
  ASSERT_GE(rows.size(), vectors_["valid"].size());
  for (size_t i = 0; i < vectors_["valid"].size(); ++i) {
    const auto& v = vectors_["valid"][i];
    const auto& f = v["fields"];
    const auto& row = rows[i];
    ASSERT_EQ(row.size(), 19u) << v["name"];
    const uint32_t seq = f["seq"];
    char seq_hex[16];
    std::snprintf(seq_hex, sizeof(seq_hex), "0x%06x", seq);
    const bool fp = Bool(f, "fp") == "1";
    const std::vector<std::string> expected = {
        absl::StrCat(f["job"].get<int>()), seq_hex, absl::StrCat(seq >> 20),
        absl::StrCat(seq & 0xFFFFF), Hex32(f["bitmap0"]), Hex32(f["bitmap1"]),
        absl::StrCat(f["fan_in0"].get<int>()), absl::StrCat(f["fan_in1"].get<int>()),
        Bool(f, "edge"), Bool(f, "resend"), Bool(f, "collision"), Bool(f, "ecn"), Bool(f, "ack"),
        Bool(f, "fp"), absl::StrCat(f["aggregator"].get<int>()), absl::StrCat(seq >> 20)};
    for (size_t k = 0; k < expected.size(); ++k) {
      EXPECT_EQ(row[k], expected[k]) << v["name"] << " column " << k;
    }
    // The first value, as int32 or float32 by the fp flag.
    if (fp) {
      EXPECT_EQ(row[16], "") << v["name"];
      EXPECT_DOUBLE_EQ(std::stod(row[17]), f["data"][0].get<double>()) << v["name"];
    } else {
      EXPECT_EQ(row[16], absl::StrCat(f["data"][0].get<int64_t>())) << v["name"];
      EXPECT_EQ(row[17], "") << v["name"];
    }
    // No malformation mark on a valid frame (notes on resend/ecn/collision are fine).
    EXPECT_EQ(row[18].find("never valid"), std::string::npos) << v["name"];
    EXPECT_EQ(row[18].find(">="), std::string::npos) << v["name"];
    EXPECT_EQ(row[18].find("264 bytes"), std::string::npos) << v["name"];
  }
}

TEST_F(DissectorTest, InvalidFramesCarryTheExpertInfoOfTheirReason) {
  const auto rows = Fields({"atpagg.job", "_ws.expert.message"}, 'a');
  const size_t first = vectors_["valid"].size();
  ASSERT_EQ(rows.size(), first + vectors_["invalid"].size());
  // What the dissector marks for each reason the vectors name (Wireshark
  // itself reports IPv4/UDP length problems; checksums are not verified by
  // default).
  const std::vector<std::pair<std::string, std::string>> marks = {
      {"job_zero", "Job 0 is never valid on the wire"},
      {"bitmap0_beyond_fan_in", "Bitmap0 names a worker >= fanIn0"},
      {"bitmap1_beyond_fan_in", "Bitmap1 names a rack >= fanIn1"},
      {"short_frame", "An ATP message is 264 bytes"},
      {"bad_udp_length", "An ATP message is 264 bytes"}};
  int checked = 0;
  for (size_t i = 0; i < vectors_["invalid"].size(); ++i) {
    const std::string name = vectors_["invalid"][i]["name"];
    for (const auto& [reason, mark] : marks) {
      if (name != reason) continue;
      ASSERT_GE(rows[first + i].size(), 2u) << name;
      EXPECT_NE(rows[first + i][1].find(mark), std::string::npos) << name << ": " << rows[first + i][1];
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5);
}

TEST_F(DissectorTest, VerboseTreeNamesTheProtocolAndValues) {
  const ShellResult run = Shell(absl::StrCat("tshark -X lua_script:", kLua, " -r ", pcap_, " -V -c 1"));
  ASSERT_EQ(run.status, 0);
  EXPECT_NE(run.output.find("ATP in-network aggregation"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("FanIn0 (workers in the rack): 4"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("Values: 62 x int32"), std::string::npos) << run.output;
}

TEST_F(DissectorTest, ControlFramesShowAsControlWithTheirTypeSenderAndIncarnation) {
  // A kJoin from worker 1 of a rack of 2 (job 3), as a Worker sends it: its
  // header has fp, resend and collision set, which no data packet has.
  wire::ControlMessage control;
  control.type = wire::ControlType::kJoin;
  control.sender = 1;
  control.incarnation = 0x1122334455667788;
  wire::FrameFields frame;
  frame.src_ip = *wire::Ipv4Address::Parse("10.3.0.2");
  frame.dst_ip = *wire::Ipv4Address::Parse("10.3.200.1");
  const wire::AtpMessage message = wire::MakeWorkerControl(
      3, {.worker_in_rack = 1, .fan_in0 = 2}, /*queue=*/0, /*position=*/0, control);
  frame.header = message.header;
  std::vector<uint8_t> bytes(wire::kFrameBytes);
  wire::EncodeFrame(frame, message.payload, wire::kDefaultBasePort,
                    std::span<uint8_t, wire::kFrameBytes>(bytes.data(), wire::kFrameBytes));
  capture::PcapRingOptions options;
  options.directory = dir_;
  options.stem = "control.pcap";
  options.single_file = true;
  absl::StatusOr<std::unique_ptr<capture::PcapRing>> ring = capture::PcapRing::Open(options);
  ASSERT_TRUE(ring.ok()) << ring.status();
  (*ring)->Write(bytes, 1000);
  ring->reset();
  pcap_ = dir_ + "/control.pcap";

  const auto rows = Fields({"atpagg.kind", "atpagg.control_type", "atpagg.control_sender",
                            "atpagg.control_incarnation", "atpagg.value_float",
                            "_ws.expert.message"},
                           'a');
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_GE(rows[0].size(), 5u);
  EXPECT_EQ(rows[0][0], "control (worker to PS): join");
  EXPECT_EQ(rows[0][1], "2");
  EXPECT_EQ(rows[0][2], "0x00000001");
  EXPECT_EQ(rows[0][3], "0x1122334455667788");
  EXPECT_EQ(rows[0][4], "") << "a control payload decoded as float32 values";
  const std::string experts = rows[0].size() > 5 ? rows[0][5] : "";
  EXPECT_EQ(experts.find("Retransmission"), std::string::npos) << experts;
  EXPECT_EQ(experts.find("collision"), std::string::npos) << experts;
  EXPECT_EQ(experts.find("magic"), std::string::npos) << experts;
}

}  // namespace
}  // namespace atp
