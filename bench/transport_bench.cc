// Transport throughput in 306-byte ATP frames per second.
//
//   ninja -C build transport_bench
//   build/bench/transport_bench --benchmark_filter=Loopback
//   build/bench/transport_bench --benchmark_filter='Kernel|Raw' --benchmark_min_time=2
//
// - Loopback: one process, one thread sending and receiving in turn (the
//   wire's cost with no thread hand-off), and two threads (sender, receiver).
// - Kernel UDP on 127.0.0.1: a sender thread and a receiver thread in one
//   process (two sockets, the same kernel path as two processes), for libatp's
//   queues and for a raw socket pair written here with nothing but
//   sendmmsg/recvmmsg (+ UDP_SEGMENT / UDP_GRO): the ceiling libatp is held to
//   (kernel GSO/GRO path >= 80% of it).
//
// In the two-thread benchmarks the sender runs on CPU 0 and the receiver on
// CPU 1. The figure is rx_Mpps: frames received per second of real time, from the
// first send to the last receive, with the sender at most 4096 frames ahead
// of the receiver (a flooding sender would only measure how fast a kernel
// socket drops; loss_pct shows any loss). Receivers check every frame (length, job byte, ascending position)
// and fail the benchmark on a wrong one. Run one benchmark at a time on a
// shared 2-core machine: each kernel run keeps two threads busy.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "atp/transport.h"
#include "atp/transport/kernel_udp.h"
#include "atp/transport/loopback.h"
#include "atp/transport/segmentation.h"
#include "atp/wire.h"
#include "benchmark/benchmark.h"

namespace {

using atp::transport::Device;
using atp::transport::DeviceAddress;
using atp::transport::FrameRef;
using atp::transport::KernelUdpDevice;
using atp::transport::KernelUdpOptions;
using atp::transport::Offload;
using atp::transport::Queue;
using atp::transport::ReleaseFrames;
using atp::transport::SegmentationJob;
namespace wire = atp::wire;

constexpr size_t kFrameBytes = wire::kFrameBytes;
constexpr size_t kMessageBytes = wire::kMessageBytes;
constexpr size_t kBurst = 64;  // frames per TxBurst: as many as one GSO send
constexpr size_t kJobSegments = 64;  // one GSO send
constexpr uint8_t kJob = 7;
using Frame = std::array<uint8_t, kFrameBytes>;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "transport_bench: %s\n", what);
  std::abort();
}

template <class T>
T OrDie(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "transport_bench: %s\n", value.status().ToString().c_str());
    std::abort();
  }
  return *std::move(value);
}

DeviceAddress Node(uint32_t n) {
  const wire::Ipv4Address ip{0x0A000000u + n};
  return {ip, atp::transport::DefaultMacFor(ip)};
}

// MakeFrame: a valid gradient frame from node 1 to node 2 at `position`.
Frame MakeFrame(uint32_t position) {
  wire::FrameFields fields;
  fields.src_mac = Node(1).mac;
  fields.dst_mac = Node(2).mac;
  fields.src_ip = Node(1).ipv4;
  fields.dst_ip = Node(2).ipv4;
  fields.header.job = kJob;
  fields.header.seq = wire::MakeSeq(0, position);
  fields.header.bitmap0 = 1;
  fields.header.bitmap1 = 1;
  fields.header.fan_in0 = 2;
  wire::Payload payload;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint32_t>(i * 3 + 1);
  Frame frame{};
  wire::EncodeFrame(fields, payload, wire::kDefaultBasePort, frame);
  return frame;
}

// CopyFrame: what an encoder writing a frame into a pool buffer costs at
// most (a fixed-size memcpy would compile to `rep movsq`, slow at a frame's
// unaligned start).
void CopyFrame(uint8_t* dst, const uint8_t* src) {
  for (size_t i = 0; i + 16 <= kFrameBytes; i += 16) std::memcpy(dst + i, src + i, 16);
  std::memcpy(dst + kFrameBytes - 16, src + kFrameBytes - 16, 16);
}

void SetPosition(uint8_t* frame, uint32_t position) {
  const uint32_t seq = wire::MakeSeq(0, position);
  frame[atp::transport::kSeqOffset] = static_cast<uint8_t>(seq >> 16);
  frame[atp::transport::kSeqOffset + 1] = static_cast<uint8_t>(seq >> 8);
  frame[atp::transport::kSeqOffset + 2] = static_cast<uint8_t>(seq);
}

// FrameChecker: what every receiver checks: whole ATP frames of our job with
// positions that only go up (loss allowed, reordering and corruption not).
class FrameChecker {
 public:
  void Check(const uint8_t* message, size_t length) {
    if (length != kMessageBytes || message[0] != kJob) ++errors_;
    const uint32_t position =
        ((uint32_t{message[1]} << 16) | (uint32_t{message[2]} << 8) | message[3]) &
        wire::kPositionMask;
    const uint32_t ahead = (position - last_) & wire::kPositionMask;
    if (started_ && (ahead == 0 || ahead >= wire::kPositionMask / 2)) ++errors_;
    last_ = position;
    started_ = true;
  }
  uint64_t errors() const { return errors_; }

 private:
  uint32_t last_ = 0;
  bool started_ = false;
  uint64_t errors_ = 0;
};

// PinToCpu: keeps the calling thread on `cpu` (when the machine has it), so
// that a sender and its receiver never share a core: two threads left to the
// scheduler on a 2-core machine with other load measure the scheduler.
void PinToCpu(int cpu) {
  if (cpu >= static_cast<int>(std::thread::hardware_concurrency())) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set);
}

// UnpinThread: back to every CPU.
void UnpinThread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned cpu = 0; cpu < std::thread::hardware_concurrency(); ++cpu) CPU_SET(cpu, &set);
  ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set);
}

// ThreadCpuNs: CPU time the calling thread has used.
int64_t ThreadCpuNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// kWindowFrames: how far a sender may run ahead of its receiver. A sender
// that floods a kernel socket only measures how fast the socket drops;
// windowed, both sides run at the pace of the slower one and nothing is lost
// (ATP's own senders are windowed too). 4096 frames stay far below the 4 MiB
// socket buffers.
constexpr uint64_t kWindowFrames = 4096;

// RunPair: `send()` in the benchmark loop (returns frames sent; waits while
// more than kWindowFrames are unreceived), `receive()` on a second thread
// (returns frames received by one poll) until the sender is done (and
// `finish()` has pushed out what its queue still held) and nothing has come
// for 20 ms. Reports rx_Mpps (frames received per second, first send to last
// receive), tx_Mpps and loss_pct.
template <class Send, class Receive, class Finish>
void RunPair(benchmark::State& state, Send send, Receive receive, Finish finish,
             const FrameChecker& checker) {
  std::atomic<bool> sending_done{false};
  std::atomic<bool> receiver_ready{false};
  std::atomic<uint64_t> received{0};
  int64_t last_rx_ns = 0;
  int64_t receiver_cpu_ns = 0;
  std::thread receiver([&] {
    PinToCpu(1);
    const int64_t cpu_start = ThreadCpuNs();
    receiver_ready.store(true, std::memory_order_release);
    int64_t quiet_since = NowNs();
    uint64_t count = 0;
    for (;;) {
      const size_t n = receive();
      const int64_t now = NowNs();
      if (n > 0) {
        count += n;
        received.store(count, std::memory_order_release);
        last_rx_ns = now;
        quiet_since = now;
      } else if (sending_done.load(std::memory_order_acquire) && now - quiet_since > 20'000'000) {
        break;
      }
    }
    receiver_cpu_ns = ThreadCpuNs() - cpu_start;
  });
  PinToCpu(0);
  while (!receiver_ready.load(std::memory_order_acquire)) std::this_thread::yield();
  const int64_t start_ns = NowNs();
  const int64_t sender_cpu_start = ThreadCpuNs();
  uint64_t sent = 0;
  for (auto _ : state) {
    while (sent - received.load(std::memory_order_acquire) > kWindowFrames) {
      std::this_thread::yield();
    }
    sent += send();
  }
  const int64_t send_end_ns = NowNs();
  finish();
  const int64_t sender_cpu_ns = ThreadCpuNs() - sender_cpu_start;
  sending_done.store(true, std::memory_order_release);
  receiver.join();
  UnpinThread();
  const uint64_t got = received.load(std::memory_order_acquire);
  if (checker.errors() > 0) state.SkipWithError("a receiver saw a wrong or reordered frame");
  const double rx_seconds = static_cast<double>(std::max<int64_t>(last_rx_ns - start_ns, 1)) / 1e9;
  const double tx_seconds = static_cast<double>(std::max<int64_t>(send_end_ns - start_ns, 1)) / 1e9;
  state.counters["rx_Mpps"] = static_cast<double>(got) / rx_seconds / 1e6;
  state.counters["tx_Mpps"] = static_cast<double>(sent) / tx_seconds / 1e6;
  state.counters["loss_pct"] =
      sent == 0 ? 0.0 : 100.0 * static_cast<double>(sent - std::min(sent, got)) / sent;
  // CPU per frame (busy-polling included): what a frame costs, whatever the
  // machine's other load does to the rates.
  const double frames = static_cast<double>(std::max<uint64_t>(got, 1));
  state.counters["tx_cpu_ns"] = static_cast<double>(sender_cpu_ns) / frames;
  state.counters["rx_cpu_ns"] = static_cast<double>(receiver_cpu_ns) / frames;
  state.SetItemsProcessed(static_cast<int64_t>(got));
}

// ---------------------------------------------------------------- libatp

// SendBurst: one TxBurst of kBurst frames copied from `frame` (positions
// counting up); frames not taken go back to the pool.
size_t SendBurst(Queue& queue, const Frame& frame, uint32_t* position) {
  FrameRef burst[kBurst];
  const size_t n = queue.tx_pool().AllocBurst(burst);
  for (size_t i = 0; i < n; ++i) {
    CopyFrame(burst[i].data, frame.data());
    SetPosition(burst[i].data, *position + static_cast<uint32_t>(i));
    burst[i].length = kFrameBytes;
  }
  const size_t taken = queue.TxBurst({burst, n});
  ReleaseFrames({burst + taken, n - taken});
  queue.Flush();
  *position += static_cast<uint32_t>(taken);
  return taken;
}

size_t ReceiveBurst(Queue& queue, FrameChecker& checker) {
  FrameRef frames[64];
  const size_t n = queue.RxBurst(frames);
  for (size_t i = 0; i < n; ++i) {
    if (frames[i].length != kFrameBytes) Die("short frame");
    checker.Check(frames[i].data + wire::kAtpOffset, kMessageBytes);
  }
  ReleaseFrames({frames, n});
  return n;
}

// SegmentedSender: TxSegmented of kJobSegments segments per call, with the
// payloads in place in 264-byte messages (zero copy) or behind pointers.
class SegmentedSender {
 public:
  explicit SegmentedSender(bool in_place)
      : in_place_(in_place), first_(MakeFrame(0)), messages_(kJobSegments * kMessageBytes),
        pointers_(kJobSegments) {
    for (size_t i = 0; i < kJobSegments; ++i) {
      std::memcpy(&messages_[i * kMessageBytes], first_.data() + wire::kAtpOffset, kMessageBytes);
      pointers_[i] = &messages_[i * kMessageBytes + wire::kAtpHeaderBytes];
    }
  }
  size_t Send(Queue& queue) {
    SetPosition(first_.data(), position_);
    const SegmentationJob job = in_place_ ? SegmentationJob::FromMessages(first_, messages_)
                                          : SegmentationJob::FromFrame(first_, pointers_);
    const size_t taken = queue.TxSegmented(job);
    queue.Flush();  // taken segments may leave only at Flush (whole frames wait until then)
    position_ += static_cast<uint32_t>(taken);
    return taken;
  }

 private:
  bool in_place_;
  Frame first_;
  std::vector<uint8_t> messages_;
  std::vector<const uint8_t*> pointers_;
  uint32_t position_ = 0;
};

void BM_LoopbackOneThread(benchmark::State& state) {
  auto wire_ = atp::transport::LoopbackWire::Create({});
  atp::transport::LoopbackEndpointOptions options;
  options.address = Node(1);
  auto a = OrDie(wire_->AddEndpoint(options));
  options.address = Node(2);
  auto b = OrDie(wire_->AddEndpoint(options));
  const Frame frame = MakeFrame(0);
  uint32_t position = 0;
  uint64_t received = 0;
  FrameChecker checker;
  for (auto _ : state) {
    SendBurst(a->queue(0), frame, &position);
    received += ReceiveBurst(b->queue(0), checker);
  }
  if (checker.errors() > 0 || received + kBurst < position) state.SkipWithError("frames lost");
  state.counters["Mpps"] =
      benchmark::Counter(static_cast<double>(received) / 1e6, benchmark::Counter::kIsRate);
  state.SetItemsProcessed(static_cast<int64_t>(received));
}
BENCHMARK(BM_LoopbackOneThread)->UseRealTime();

void BM_LoopbackTwoThreads(benchmark::State& state) {
  auto wire_ = atp::transport::LoopbackWire::Create({});
  atp::transport::LoopbackEndpointOptions options;
  options.address = Node(1);
  auto a = OrDie(wire_->AddEndpoint(options));
  options.address = Node(2);
  auto b = OrDie(wire_->AddEndpoint(options));
  const Frame frame = MakeFrame(0);
  uint32_t position = 0;
  FrameChecker checker;
  RunPair(
      state, [&] { return SendBurst(a->queue(0), frame, &position); },
      [&] { return ReceiveBurst(b->queue(0), checker); },
      [&] {
        while (a->queue(0).Flush() > 0) std::this_thread::yield();
      },
      checker);
}
BENCHMARK(BM_LoopbackTwoThreads)->UseRealTime();

// KernelPair: two kernel UDP devices on 127.0.0.1 that know each other.
struct KernelPair {
  std::unique_ptr<KernelUdpDevice> a;
  std::unique_ptr<KernelUdpDevice> b;
};

KernelPair OpenKernelPair(Offload gso, Offload gro,
                          atp::transport::KernelUdpEncapsulation encapsulation) {
  KernelUdpOptions options;
  options.encapsulation = encapsulation;
  options.bind = atp::transport::SocketAddress{*wire::Ipv4Address::Parse("127.0.0.1"), 0};
  options.device.rx_pool_frames = 4096;
  options.gso = gso;
  options.gro = gro;
  options.address = Node(1);
  KernelPair pair;
  pair.a = OrDie(atp::transport::OpenKernelUdpDevice(options));
  options.address = Node(2);
  pair.b = OrDie(atp::transport::OpenKernelUdpDevice(options));
  if (!pair.a->AddPeer(pair.b->self()).ok() || !pair.b->AddPeer(pair.a->self()).ok()) {
    Die("AddPeer");
  }
  return pair;
}

// KernelMode: what the sender does (the receiver is the same queue, with GRO
// whenever the sender uses GSO).
enum class KernelMode {
  kPlain,              // TxBurst, no GSO, no GRO: one datagram per sendmmsg entry
  kBurstGso,           // TxBurst of frames; runs to one queue go out as GSO sends
  kSegmentedGso,       // TxSegmented, payloads in place (the zero-copy form)
  kSegmentedGsoCopied  // TxSegmented, payloads behind pointers (copied once)
};

bool IsSegmented(KernelMode mode) {
  return mode == KernelMode::kSegmentedGso || mode == KernelMode::kSegmentedGsoCopied;
}

// Encapsulation: the benchmarks' second argument, `whole`: 0 = kAtpMessage
// (264-byte datagrams), 1 = kWholeFrame (306-byte datagrams, the overlay).
atp::transport::KernelUdpEncapsulation Encapsulation(const benchmark::State& state) {
  return state.range(1) != 0 ? atp::transport::KernelUdpEncapsulation::kWholeFrame
                             : atp::transport::KernelUdpEncapsulation::kAtpMessage;
}

void BM_KernelUdp(benchmark::State& state) {
  const auto mode = static_cast<KernelMode>(state.range(0));
  const Offload offload = mode == KernelMode::kPlain ? Offload::kOff : Offload::kOn;
  KernelPair pair = OpenKernelPair(offload, offload, Encapsulation(state));
  const Frame frame = MakeFrame(0);
  uint32_t position = 0;
  SegmentedSender segmented(mode == KernelMode::kSegmentedGso);
  FrameChecker checker;
  RunPair(
      state,
      [&]() -> size_t {
        if (IsSegmented(mode)) return segmented.Send(pair.a->queue(0));
        return SendBurst(pair.a->queue(0), frame, &position);
      },
      [&] { return ReceiveBurst(pair.b->queue(0), checker); }, [] {}, checker);
  const atp::transport::QueueStats rx = pair.b->queue(0).stats();
  state.counters["rx_dropped"] = static_cast<double>(rx.rx_dropped);
}
BENCHMARK(BM_KernelUdp)
    ->ArgNames({"mode", "whole"})
    ->ArgsProduct({{static_cast<int>(KernelMode::kPlain), static_cast<int>(KernelMode::kBurstGso),
                    static_cast<int>(KernelMode::kSegmentedGso),
                    static_cast<int>(KernelMode::kSegmentedGsoCopied)},
                   {0, 1}})
    ->UseRealTime();

// BM_KernelUdpOneThread: the same paths with one thread sending a batch and
// then receiving it. On 127.0.0.1 the kernel delivers in the sender's context,
// so this is the whole send + receive cost of a frame on one core, with no
// polling and no scheduling in it: items_per_second is frames per CPU-second
// (Google Benchmark's default CPU-time clock), stable on a shared machine.
void BM_KernelUdpOneThread(benchmark::State& state) {
  const auto mode = static_cast<KernelMode>(state.range(0));
  const Offload offload = mode == KernelMode::kPlain ? Offload::kOff : Offload::kOn;
  KernelPair pair = OpenKernelPair(offload, offload, Encapsulation(state));
  const Frame frame = MakeFrame(0);
  uint32_t position = 0;
  SegmentedSender segmented(mode == KernelMode::kSegmentedGso);
  FrameChecker checker;
  uint64_t sent = 0;
  uint64_t received = 0;
  for (auto _ : state) {
    sent += IsSegmented(mode) ? segmented.Send(pair.a->queue(0))
                              : SendBurst(pair.a->queue(0), frame, &position);
    while (received < sent) {
      const size_t n = ReceiveBurst(pair.b->queue(0), checker);
      if (n == 0) break;  // anything missing shows as loss below
      received += n;
    }
  }
  if (checker.errors() > 0 || received != sent) state.SkipWithError("frames lost or wrong");
  state.SetItemsProcessed(static_cast<int64_t>(received));
}
BENCHMARK(BM_KernelUdpOneThread)
    ->ArgNames({"mode", "whole"})
    ->ArgsProduct({{static_cast<int>(KernelMode::kPlain), static_cast<int>(KernelMode::kBurstGso),
                    static_cast<int>(KernelMode::kSegmentedGso),
                    static_cast<int>(KernelMode::kSegmentedGsoCopied)},
                   {0, 1}});

// ---------------------------------------------------------------- raw ceiling

// RawSocket: a non-blocking UDP socket on 127.0.0.1 with a kernel-chosen port.
int RawSocket(bool gro, sockaddr_in* bound) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  if (fd < 0) Die("socket");
  const int buffer = 4 << 20;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
  const int on = 1;
  if (gro && ::setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) != 0) Die("UDP_GRO");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) Die("bind");
  socklen_t length = sizeof(*bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(bound), &length);
  return fd;
}

// RawReceiver: recvmmsg into 64 KiB buffers, counting 264-byte messages (cut
// at the GRO segment size), checking each like libatp's receivers do.
class RawReceiver {
 public:
  RawReceiver(int fd, FrameChecker* checker)
      : fd_(fd), checker_(checker), memory_(kMessages * kBuffer), msgs_(kMessages),
        iovs_(kMessages), controls_(kMessages) {}

  size_t Receive() {
    for (size_t i = 0; i < kMessages; ++i) {
      iovs_[i] = iovec{&memory_[i * kBuffer], kBuffer};
      msgs_[i].msg_hdr = msghdr{};
      msgs_[i].msg_hdr.msg_iov = &iovs_[i];
      msgs_[i].msg_hdr.msg_iovlen = 1;
      msgs_[i].msg_hdr.msg_control = controls_[i].bytes;
      msgs_[i].msg_hdr.msg_controllen = sizeof(Control);
    }
    const int got = ::recvmmsg(fd_, msgs_.data(), kMessages, MSG_DONTWAIT, nullptr);
    size_t frames = 0;
    for (int i = 0; i < got; ++i) {
      size_t segment = msgs_[i].msg_len;
      msghdr& h = msgs_[i].msg_hdr;
      for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
        if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
          int size = 0;
          std::memcpy(&size, CMSG_DATA(c), sizeof(size));
          segment = static_cast<size_t>(size);
        }
      }
      const uint8_t* data = &memory_[static_cast<size_t>(i) * kBuffer];
      for (size_t offset = 0; offset < msgs_[i].msg_len; offset += segment) {
        checker_->Check(data + offset, std::min(segment, msgs_[i].msg_len - offset));
        ++frames;
      }
    }
    return frames;
  }

 private:
  static constexpr unsigned kMessages = 8;
  static constexpr size_t kBuffer = 65536;
  struct alignas(alignof(cmsghdr)) Control {
    uint8_t bytes[64];
  };
  int fd_;
  FrameChecker* checker_;
  std::vector<uint8_t> memory_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  std::vector<Control> controls_;
};

// RawSender: sends kJobSegments 264-byte messages per call: one UDP_SEGMENT
// send (gso) or one sendmmsg of separate datagrams (plain).
class RawSender {
 public:
  RawSender(int fd, const sockaddr_in& to, bool gso)
      : fd_(fd), to_(to), gso_(gso), messages_(kJobSegments * kMessageBytes),
        msgs_(kJobSegments), iovs_(kJobSegments) {
    const Frame frame = MakeFrame(0);
    for (size_t i = 0; i < kJobSegments; ++i) {
      std::memcpy(&messages_[i * kMessageBytes], frame.data() + wire::kAtpOffset, kMessageBytes);
    }
  }

  size_t Send() {
    for (size_t i = 0; i < kJobSegments; ++i) {  // positions count up, like libatp's
      uint8_t* m = &messages_[i * kMessageBytes];
      const uint32_t seq = wire::MakeSeq(0, position_ + static_cast<uint32_t>(i));
      m[1] = static_cast<uint8_t>(seq >> 16);
      m[2] = static_cast<uint8_t>(seq >> 8);
      m[3] = static_cast<uint8_t>(seq);
    }
    int sent = 0;
    if (gso_) {
      iovs_[0] = iovec{messages_.data(), messages_.size()};
      alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(uint16_t))] = {};
      msghdr h{};
      h.msg_name = &to_;
      h.msg_namelen = sizeof(to_);
      h.msg_iov = iovs_.data();
      h.msg_iovlen = 1;
      h.msg_control = control;
      h.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = SOL_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
      const uint16_t segment = kMessageBytes;
      std::memcpy(CMSG_DATA(c), &segment, sizeof(segment));
      sent = ::sendmsg(fd_, &h, MSG_DONTWAIT) > 0 ? static_cast<int>(kJobSegments) : 0;
    } else {
      for (size_t i = 0; i < kJobSegments; ++i) {
        iovs_[i] = iovec{&messages_[i * kMessageBytes], kMessageBytes};
        msgs_[i].msg_hdr = msghdr{};
        msgs_[i].msg_hdr.msg_name = &to_;
        msgs_[i].msg_hdr.msg_namelen = sizeof(to_);
        msgs_[i].msg_hdr.msg_iov = &iovs_[i];
        msgs_[i].msg_hdr.msg_iovlen = 1;
      }
      sent = std::max(::sendmmsg(fd_, msgs_.data(), kJobSegments, MSG_DONTWAIT), 0);
    }
    position_ += static_cast<uint32_t>(sent);
    return static_cast<size_t>(sent);
  }

 private:
  int fd_;
  sockaddr_in to_;
  bool gso_;
  std::vector<uint8_t> messages_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  uint32_t position_ = 0;
};

void BM_RawUdpCeiling(benchmark::State& state) {
  const bool offload = state.range(0) != 0;
  sockaddr_in rx_address{};
  sockaddr_in tx_address{};
  const int rx_fd = RawSocket(offload, &rx_address);
  const int tx_fd = RawSocket(false, &tx_address);
  FrameChecker checker;
  RawReceiver receiver(rx_fd, &checker);
  RawSender sender(tx_fd, rx_address, offload);
  RunPair(
      state, [&] { return sender.Send(); }, [&] { return receiver.Receive(); }, [] {}, checker);
  ::close(rx_fd);
  ::close(tx_fd);
}
BENCHMARK(BM_RawUdpCeiling)->ArgName("gso_gro")->Arg(0)->Arg(1)->UseRealTime();

void BM_RawUdpCeilingOneThread(benchmark::State& state) {
  const bool offload = state.range(0) != 0;
  sockaddr_in rx_address{};
  sockaddr_in tx_address{};
  const int rx_fd = RawSocket(offload, &rx_address);
  const int tx_fd = RawSocket(false, &tx_address);
  FrameChecker checker;
  RawReceiver receiver(rx_fd, &checker);
  RawSender sender(tx_fd, rx_address, offload);
  uint64_t sent = 0;
  uint64_t received = 0;
  for (auto _ : state) {
    sent += sender.Send();
    while (received < sent) {
      const size_t n = receiver.Receive();
      if (n == 0) break;
      received += n;
    }
  }
  if (checker.errors() > 0 || received != sent) state.SkipWithError("frames lost or wrong");
  state.SetItemsProcessed(static_cast<int64_t>(received));
  ::close(rx_fd);
  ::close(tx_fd);
}
BENCHMARK(BM_RawUdpCeilingOneThread)->ArgName("gso_gro")->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
