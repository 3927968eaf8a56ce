// tests/multiprocess/garbage_sender.cc: sends malformed ATP frames into one
// switch port, for the multi-process tests (tests/multiprocess/).
//
// Every frame it sends is classified as ATP by a forwarding element
// (wire::IsAtpFrame: IPv4, UDP, a destination port in the ATP range) and then
// rejected by wire::ValidateFrame for one known reason, so a switch must count
// each one as malformed (ATP-SPEC section 4: "counted and dropped, never touch
// an aggregator") and forward none of them.
//
//   garbage_sender --port=memif --memif_socket=/tmp/tb/sock/tor0-probe.sock --count=10
//   garbage_sender --port=af_packet --iface=probe --netns=atpXXXX-probe0 --count=10
//   garbage_sender --port=udp --udp_bind=127.0.0.1:20027 --udp_target=127.0.0.1:20005 --count=10
//
// --port=udp (the kernel_udp overlay, no DPDK): each frame is one datagram
// from --udp_bind to a kernel_udp switch port's bind address, --udp_target,
// as the switch's overlay peers send them (KernelUdpEncapsulation::kWholeFrame).
//
// It prints one JSON line {"sent": N, "by_reason": {"short_frame": n, ...}},
// then, with --hold_s, stays connected (a memif client owns the shared
// memory: leaving at once could take unread frames with it) until SIGINT or
// SIGTERM or the hold ends. Exit status: 0 every frame was sent; 1 the port
// could not be opened or its link did not come up; 2 bad flags.
//
// It talks to DPDK (garbage_sender_dpdk.cc; or, --port=udp, a plain UDP
// socket) directly, not through atp::transport, because libatp's devices
// refuse to send anything that is not a whole ATP frame. Built without DPDK,
// it has --port=udp only.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "atp/config.h"
#include "atp/transport.h"
#include "atp/wire.h"
#include "tests/multiprocess/garbage_sender.h"

ABSL_FLAG(std::string, port, "memif", "Port kind: memif (no root) or af_packet (root).");
ABSL_FLAG(std::string, memif_socket, "", "memif: the socket file of the switch port (a server).");
ABSL_FLAG(std::string, memif_role, "client",
          "memif: client (the switch port is a server) or server.");
ABSL_FLAG(int, memif_id, 0, "memif: interface id on the socket.");
ABSL_FLAG(std::string, udp_bind, "127.0.0.1:0", "udp: IP:PORT to send from.");
ABSL_FLAG(std::string, udp_target, "", "udp: IP:PORT of the kernel_udp switch port (its bind).");
ABSL_FLAG(std::string, iface, "", "af_packet: the interface to send on.");
ABSL_FLAG(std::string, netns, "",
          "af_packet: network namespace (/var/run/netns/NAME) the interface is in.");
ABSL_FLAG(int, count, 10, "Frames of each malformed kind (8 kinds).");
ABSL_FLAG(int, job, 1,
          "Job id the frames claim (a job the switch aggregates makes the test stricter).");
ABSL_FLAG(std::string, src, "10.1.0.1", "IPv4 source of the frames.");
ABSL_FLAG(std::string, dst, "10.1.200.1", "IPv4 destination of the frames.");
ABSL_FLAG(int, link_timeout_s, 10, "How long to wait for the link to come up.");
ABSL_FLAG(bool, forged, false,
          "Send well-formed forged frames instead (docs/security.md): a parameter packet of "
          "--job from its PS 10.<job>.200.1 to the group 239.1.0.<job>, and a gradient from "
          "--src to --dst claiming every rack complete; result keys parameter_packet, gradient.");
ABSL_FLAG(int, hold_s, 0, "After sending, stay connected this long (or until SIGINT/SIGTERM).");

namespace atp::tests {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true, std::memory_order_relaxed); }

std::array<uint8_t, wire::kFrameBytes> ValidFrame(const wire::FrameFields& fields) {
  std::array<uint8_t, wire::kFrameBytes> frame{};
  wire::Payload payload{};
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint32_t>(i);
  wire::EncodeFrame(fields, payload, wire::kDefaultBasePort, frame);
  return frame;
}

// WithHeader: a valid frame whose 16 ATP header bytes are `header` (which may
// break ValidateHeader's rules; EncodeHeader only packs fields).
std::vector<uint8_t> WithHeader(const wire::FrameFields& fields, const wire::AtpHeader& header) {
  std::array<uint8_t, wire::kFrameBytes> frame = ValidFrame(fields);
  wire::EncodeHeader(header, std::span<uint8_t, wire::kAtpHeaderBytes>(
                                 frame.data() + wire::kAtpOffset, wire::kAtpHeaderBytes));
  return {frame.begin(), frame.end()};
}

std::vector<Garbage> MakeGarbage(const wire::FrameFields& fields) {
  const std::array<uint8_t, wire::kFrameBytes> valid = ValidFrame(fields);
  std::vector<Garbage> out;
  // Truncated after the ATP header: still classified as ATP (UDP port readable).
  out.push_back({{valid.begin(), valid.begin() + 100}, wire::DecodeError::kShortFrame});
  {
    std::vector<uint8_t> v(valid.begin(), valid.end());
    v.resize(wire::kFrameBytes + 64, 0xAB);
    out.push_back({std::move(v), wire::DecodeError::kLongFrame});
  }
  {
    std::vector<uint8_t> v(valid.begin(), valid.end());
    v[wire::kIpv4Offset + 10] ^= 0x5A;  // IPv4 header checksum
    out.push_back({std::move(v), wire::DecodeError::kBadIpv4Checksum});
  }
  {
    std::vector<uint8_t> v(valid.begin(), valid.end());
    v[wire::kUdpOffset + 5] ^= 0x01;  // UDP length, low byte
    out.push_back({std::move(v), wire::DecodeError::kBadUdpLength});
  }
  wire::AtpHeader h = fields.header;
  h.job = 0;
  out.push_back({WithHeader(fields, h), wire::DecodeError::kJobZero});
  h = fields.header;
  h.bitmap0 = 0;
  out.push_back({WithHeader(fields, h), wire::DecodeError::kEmptyBitmap});
  h = fields.header;
  h.bitmap0 = 1u << 5;  // worker 5 of a rack with fan-in 2
  out.push_back({WithHeader(fields, h), wire::DecodeError::kBitmap0BeyondFanIn});
  h = fields.header;
  h.bitmap1 = 0b11;  // a level-1 gradient naming two racks
  out.push_back({WithHeader(fields, h), wire::DecodeError::kAmbiguousRack});
  for (const Garbage& g : out) {
    const std::span<const uint8_t> bytes(g.bytes);
    if (!wire::IsAtpFrame(bytes, wire::kDefaultBasePort) ||
        wire::ValidateFrame(bytes, wire::kDefaultBasePort) != g.reason) {
      std::fprintf(stderr, "garbage_sender: internal error: frame for %s is not what it claims\n",
                   std::string(wire::DecodeErrorName(g.reason)).c_str());
      std::exit(2);
    }
  }
  return out;
}

// ParseSockaddr: "IP:PORT" -> sockaddr_in.
bool ParseSockaddr(const std::string& text, sockaddr_in* out) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  *out = sockaddr_in{};
  out->sin_family = AF_INET;
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &out->sin_addr) != 1) return false;
  char* end = nullptr;
  const long port = std::strtol(text.c_str() + colon + 1, &end, 10);
  if (end == text.c_str() + colon + 1 || *end != '\0' || port < 0 || port > 65535) return false;
  out->sin_port = htons(static_cast<uint16_t>(port));
  return true;
}

// PrintResult: the JSON line the tests read.
void PrintResult(const std::vector<Garbage>& kinds, const std::vector<int>& sent_by_kind,
                 int sent) {
  std::string by_reason;
  for (size_t k = 0; k < kinds.size(); ++k) {
    const std::string name = kinds[k].name.empty()
                                 ? std::string(wire::DecodeErrorName(kinds[k].reason))
                                 : kinds[k].name;
    absl::StrAppend(&by_reason, k == 0 ? "" : ", ", "\"", name, "\": ", sent_by_kind[k]);
  }
  std::printf("{\"sent\": %d, \"by_reason\": {%s}}\n", sent, by_reason.c_str());
  std::fflush(stdout);
}

// SendUdp: --port=udp: one datagram per frame, paced; then holds.
int SendUdp(const std::vector<Garbage>& kinds, int count) {
  sockaddr_in bind_addr{};
  sockaddr_in target{};
  if (!ParseSockaddr(absl::GetFlag(FLAGS_udp_bind), &bind_addr) ||
      !ParseSockaddr(absl::GetFlag(FLAGS_udp_target), &target) || target.sin_port == 0) {
    std::fprintf(stderr, "garbage_sender: --udp_bind and --udp_target must be IP:PORT\n");
    return 2;
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::bind(fd, reinterpret_cast<const sockaddr*>(&bind_addr), sizeof(bind_addr)) != 0) {
    std::fprintf(stderr, "garbage_sender: binding %s: %s\n", absl::GetFlag(FLAGS_udp_bind).c_str(),
                 strerror(errno));
    if (fd >= 0) ::close(fd);
    return 1;
  }
  const auto send = [&](const Garbage& garbage) {
    const ssize_t n = ::sendto(fd, garbage.bytes.data(), garbage.bytes.size(), 0,
                               reinterpret_cast<const sockaddr*>(&target), sizeof(target));
    const bool whole = n == static_cast<ssize_t>(garbage.bytes.size());
    if (!whole)
      std::fprintf(stderr, "garbage_sender: sendto: %s\n", n < 0 ? strerror(errno) : "short");
    // Paced: a burst of garbage must not be lost to a full socket buffer.
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    return whole;
  };
  const auto drain = [fd] {
    std::array<uint8_t, 2048> buffer{};
    while (::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT) > 0) {
    }
  };
  const int status = SendAndHold(kinds, count, send, drain);
  ::close(fd);
  return status;
}

// GarbageFrames: the malformed frames the flags describe.
std::vector<Garbage> GarbageFrames(wire::Ipv4Address src, wire::Ipv4Address dst) {
  wire::FrameFields fields;
  fields.src_ip = src;
  fields.dst_ip = dst;
  fields.src_mac = transport::DefaultMacFor(src);
  fields.dst_mac = transport::DefaultMacFor(dst);
  fields.header.job = static_cast<uint8_t>(absl::GetFlag(FLAGS_job));
  fields.header.seq = wire::MakeSeq(0, 7);
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  fields.header.fan_in0 = 2;
  fields.header.fan_in1 = 2;
  return MakeGarbage(fields);
}

// ForgedFrames: --forged: well-formed frames no switch port of the job may
// bring in from where they are sent.
std::vector<Garbage> ForgedFrames(wire::Ipv4Address src, wire::Ipv4Address dst) {
  const uint8_t job = static_cast<uint8_t>(absl::GetFlag(FLAGS_job));
  wire::FrameFields ack;
  ack.src_ip = wire::Ipv4Address{0x0A00C801u | (uint32_t{job} << 16)};  // 10.<job>.200.1
  ack.dst_ip = wire::Ipv4Address{0xEF010000u | job};                    // 239.1.0.<job>
  ack.src_mac = transport::DefaultMacFor(ack.src_ip);
  ack.dst_mac = transport::DefaultMacFor(ack.dst_ip);
  ack.header.job = job;
  ack.header.seq = wire::MakeSeq(0, 7);
  ack.header.ack = true;
  ack.header.fan_in0 = 2;
  ack.header.fan_in1 = 2;
  wire::FrameFields gradient;
  gradient.src_ip = src;
  gradient.dst_ip = dst;
  gradient.src_mac = transport::DefaultMacFor(src);
  gradient.dst_mac = transport::DefaultMacFor(dst);
  gradient.header.job = job;
  gradient.header.seq = wire::MakeSeq(0, 7);
  gradient.header.edge = true;  // "both racks are complete"
  gradient.header.bitmap0 = 3;
  gradient.header.bitmap1 = 3;
  gradient.header.fan_in0 = 2;
  gradient.header.fan_in1 = 2;
  const auto bytes = [](const wire::FrameFields& f) {
    const std::array<uint8_t, wire::kFrameBytes> frame = ValidFrame(f);
    return std::vector<uint8_t>(frame.begin(), frame.end());
  };
  return {{bytes(ack), wire::DecodeError::kOk, "parameter_packet"},
          {bytes(gradient), wire::DecodeError::kOk, "gradient"}};
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "sends malformed ATP frames into a switch port (multi-process tests).\n"
      "  e.g. garbage_sender --port=memif --memif_socket=DIR/sock/tor0-probe.sock --count=10");
  absl::ParseCommandLine(argc, argv);
  const std::string kind = absl::GetFlag(FLAGS_port);
  const int count = absl::GetFlag(FLAGS_count);
  if (count < 1 || (kind != "memif" && kind != "af_packet" && kind != "udp")) {
    std::fprintf(stderr, "garbage_sender: --port must be memif, af_packet or udp, --count >= 1\n");
    return 2;
  }
  absl::StatusOr<wire::Ipv4Address> src = wire::Ipv4Address::Parse(absl::GetFlag(FLAGS_src));
  absl::StatusOr<wire::Ipv4Address> dst = wire::Ipv4Address::Parse(absl::GetFlag(FLAGS_dst));
  if (!src.ok() || !dst.ok() || absl::GetFlag(FLAGS_job) < 1 || absl::GetFlag(FLAGS_job) > 255) {
    std::fprintf(stderr, "garbage_sender: --src and --dst must be IPv4 addresses, --job 1..255\n");
    return 2;
  }
  const std::vector<Garbage> kinds =
      absl::GetFlag(FLAGS_forged) ? ForgedFrames(*src, *dst) : GarbageFrames(*src, *dst);
  if (kind == "udp") return SendUdp(kinds, count);

#if ATP_HAVE_DPDK
  DpdkPort port;
  port.kind = kind;
  port.memif_socket = absl::GetFlag(FLAGS_memif_socket);
  port.memif_server = absl::GetFlag(FLAGS_memif_role) == "server";
  port.memif_id = static_cast<uint32_t>(absl::GetFlag(FLAGS_memif_id));
  port.iface = absl::GetFlag(FLAGS_iface);
  port.netns = absl::GetFlag(FLAGS_netns);
  port.link_timeout_s = absl::GetFlag(FLAGS_link_timeout_s);
  return SendThroughDpdk(port, kinds, count);
#else
  std::fprintf(stderr, "garbage_sender: --port=%s: built without DPDK; --port=udp only\n",
               kind.c_str());
  return 2;
#endif
}

}  // namespace

// SendAndHold: `count` rounds of every kind through `send` (true when the
// frame left), the result line, then `drain` every 5 ms until --hold_s has
// passed or a signal came. The exit status: 0 iff every frame left.
int SendAndHold(const std::vector<Garbage>& kinds, int count,
                const std::function<bool(const Garbage&)>& send,
                const std::function<void()>& drain) {
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::vector<int> sent_by_kind(kinds.size(), 0);
  int sent = 0;
  for (int round = 0; round < count; ++round) {
    for (size_t k = 0; k < kinds.size(); ++k) {
      if (send(kinds[k])) {
        ++sent;
        ++sent_by_kind[k];
      }
    }
  }
  PrintResult(kinds, sent_by_kind, sent);
  const auto hold_until =
      std::chrono::steady_clock::now() + std::chrono::seconds(absl::GetFlag(FLAGS_hold_s));
  while (!g_stop.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < hold_until) {
    drain();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return sent == count * static_cast<int>(kinds.size()) ? 0 : 1;
}

}  // namespace atp::tests

int main(int argc, char** argv) { return atp::tests::Main(argc, argv); }
