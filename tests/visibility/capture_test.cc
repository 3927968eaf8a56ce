// Packet capture: the pcap ring (files, rotation, the bound) and the
// capturing device decorator over a loopback wire (what is received and sent
// is recorded, once, byte for byte), read back with libpcap.
#include <pcap/pcap.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "atp/capture.h"
#include "atp/config.h"
#include "atp/transport/loopback.h"
#include "atp/wire.h"
#include "gtest/gtest.h"
#include "lib/capture/pcap_ring.h"

namespace atp {
namespace {

namespace fs = std::filesystem;

// TempDir: a fresh directory, removed with everything in it (also on failure).
class TempDir {
 public:
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "atp_capture_XXXXXX").string();
    path_ = ::mkdtemp(templ.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ReadFrames: every record of a pcap file, as bytes.
std::vector<std::vector<uint8_t>> ReadFrames(const std::string& path) {
  char error[PCAP_ERRBUF_SIZE];
  pcap_t* p = pcap_open_offline(path.c_str(), error);
  EXPECT_NE(p, nullptr) << error;
  std::vector<std::vector<uint8_t>> frames;
  if (p == nullptr) return frames;
  EXPECT_EQ(pcap_datalink(p), DLT_EN10MB);
  pcap_pkthdr* header;
  const u_char* data;
  while (pcap_next_ex(p, &header, &data) == 1) frames.emplace_back(data, data + header->caplen);
  pcap_close(p);
  return frames;
}

std::array<uint8_t, wire::kFrameBytes> TestFrame(uint32_t position, uint8_t last_ip_byte) {
  wire::FrameFields f;
  f.src_ip = wire::Ipv4Address{0x0A010001};
  f.dst_ip = wire::Ipv4Address{0x0A010000u | last_ip_byte};
  f.src_mac = transport::DefaultMacFor(f.src_ip);
  f.dst_mac = transport::DefaultMacFor(f.dst_ip);
  f.header.job = 7;
  f.header.seq = wire::MakeSeq(0, position);
  f.header.bitmap0 = 1;
  f.header.bitmap1 = 1;
  f.header.aggregator = static_cast<uint16_t>(position);
  wire::Payload payload{};
  payload[0] = position;
  std::array<uint8_t, wire::kFrameBytes> frame;
  wire::EncodeFrame(f, payload, wire::kDefaultBasePort, frame);
  return frame;
}

TEST(PcapRingTest, RotatesAndKeepsAtMostMaxFiles) {
  if (!CaptureAvailable()) GTEST_SKIP() << "built without libpcap (libpcap-dev)";
  TempDir dir;
  capture::PcapRingOptions options;
  options.directory = dir.path();
  options.stem = "p0-rx";
  options.max_file_bytes = 4096;  // 12 frames of 306 bytes (+16 each) per file
  options.max_files = 3;
  absl::StatusOr<std::unique_ptr<capture::PcapRing>> ring = capture::PcapRing::Open(options);
  ASSERT_TRUE(ring.ok()) << ring.status();
  for (uint32_t i = 0; i < 100; ++i) {
    const auto frame = TestFrame(i, 2);
    ASSERT_TRUE((*ring)->Write(frame, int64_t{i} * 1000));
  }
  const std::vector<std::string> files((*ring)->files().begin(), (*ring)->files().end());
  ring->reset();
  ASSERT_EQ(files.size(), 3u);
  size_t on_disk = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    ++on_disk;
    EXPECT_LE(fs::file_size(entry.path()), 4096u) << entry.path();
  }
  EXPECT_EQ(on_disk, 3u);
  // The newest files hold the newest frames, in order, ending with the last.
  std::vector<std::vector<uint8_t>> frames;
  for (const std::string& f : files) {
    for (auto& frame : ReadFrames(f)) frames.push_back(std::move(frame));
  }
  ASSERT_FALSE(frames.empty());
  const auto last = TestFrame(99, 2);
  EXPECT_EQ(frames.back(), std::vector<uint8_t>(last.begin(), last.end()));
  EXPECT_EQ(files.back(), dir.path() + "/p0-rx-00008.pcap");  // 100 frames, 12 per file
}

TEST(CaptureDeviceTest, RecordsWhatIsSentAndReceivedOnce) {
  if (!CaptureAvailable()) GTEST_SKIP() << "built without libpcap (libpcap-dev)";
  TempDir dir;
  std::shared_ptr<transport::LoopbackWire> wire = transport::LoopbackWire::Create({});
  transport::LoopbackEndpointOptions a, b;
  a.address.ipv4 = wire::Ipv4Address{0x0A010001};
  a.address.mac = transport::DefaultMacFor(a.address.ipv4);
  b.address.ipv4 = wire::Ipv4Address{0x0A010002};
  b.address.mac = transport::DefaultMacFor(b.address.ipv4);
  absl::StatusOr<std::unique_ptr<transport::Device>> sender = wire->AddEndpoint(a);
  absl::StatusOr<std::unique_ptr<transport::Device>> receiver = wire->AddEndpoint(b);
  ASSERT_TRUE(sender.ok() && receiver.ok());
  CaptureOptions options;
  options.directory = dir.path();
  options.name = "a";
  absl::StatusOr<std::unique_ptr<transport::Device>> captured_a =
      CaptureDevice(*std::move(sender), options);
  ASSERT_TRUE(captured_a.ok()) << captured_a.status();
  options.name = "b";
  absl::StatusOr<std::unique_ptr<transport::Device>> captured_b =
      CaptureDevice(*std::move(receiver), options);
  ASSERT_TRUE(captured_b.ok()) << captured_b.status();
  EXPECT_NE(&UncapturedDevice(**captured_a), captured_a->get());

  constexpr uint32_t kFrames = 5;
  transport::Queue& tx = (*captured_a)->queue(0);
  std::vector<transport::FrameRef> out(kFrames);
  ASSERT_EQ(tx.tx_pool().AllocBurst(out), kFrames);
  for (uint32_t i = 0; i < kFrames; ++i) {
    const auto frame = TestFrame(i, 2);
    std::memcpy(out[i].data, frame.data(), frame.size());
    out[i].length = wire::kFrameBytes;
  }
  ASSERT_EQ(tx.TxBurst(out), kFrames);
  tx.Flush();
  transport::Queue& rx = (*captured_b)->queue(0);
  std::vector<transport::FrameRef> in(kFrames);
  size_t received = 0;
  for (int tries = 0; tries < 1000 && received < kFrames; ++tries) {
    received += rx.RxBurst(std::span(in).subspan(received));
  }
  ASSERT_EQ(received, kFrames);
  transport::ReleaseFrames(in);
  captured_a->reset();
  captured_b->reset();  // flushes the files

  const auto sent = ReadFrames(dir.path() + "/a-tx-00000.pcap");
  const auto got = ReadFrames(dir.path() + "/b-rx-00000.pcap");
  EXPECT_TRUE(ReadFrames(dir.path() + "/a-rx-00000.pcap").empty());
  ASSERT_EQ(sent.size(), kFrames);
  ASSERT_EQ(got.size(), kFrames);
  for (uint32_t i = 0; i < kFrames; ++i) {
    const auto frame = TestFrame(i, 2);
    EXPECT_EQ(sent[i], std::vector<uint8_t>(frame.begin(), frame.end())) << i;
    EXPECT_EQ(got[i], sent[i]) << i;
  }
}

TEST(CaptureOptionsTest, RefusesAMissingDirectoryNamingTheField) {
  CaptureOptions options;
  options.directory = "/nonexistent/atp-capture";
  const absl::Status s = options.Validate("capture");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("capture.directory"), std::string::npos) << s;
  EXPECT_TRUE(CaptureOptions{}.Validate().ok());  // off
}

}  // namespace
}  // namespace atp
