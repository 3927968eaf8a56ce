// transport/kernel/kernel_udp_device.cc: opening the kernel UDP transport:
// options, sockets (one per queue), offload probing and the node table.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "atp/errno_status.h"
#include "atp/transport/kernel_udp.h"
#include "transport/kernel/kernel_udp_queue.h"
#include "transport/kernel/node_table.h"

namespace atp::transport {
namespace {

using internal::KernelUdpQueue;
using internal::KernelUdpQueueConfig;
using internal::NodeTable;

constexpr uint32_t kKernelMaxGsoSegments = 64;  // UDP_MAX_SEGMENTS on older kernels

// FileDescriptor: closes on scope exit unless released.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

absl::Status SetIntOption(int fd, int level, int name, int value, const char* what) {
  if (::setsockopt(fd, level, name, &value, sizeof(value)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("setsockopt(", what, ")"));
  }
  return absl::OkStatus();
}

// OpenQueueSocket: a non-blocking UDP socket bound to `bind`, with the
// options every queue needs. `*gro` comes back false if UDP_GRO was refused.
absl::StatusOr<int> OpenQueueSocket(const KernelUdpOptions& options, const SocketAddress& bind,
                                    bool want_gro, bool* gro) {
  FileDescriptor fd(::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return ErrnoStatus(errno, "socket(AF_INET, SOCK_DGRAM)");
  // The kernel silently caps the buffers at net.core.{r,w}mem_max.
  (void)SetIntOption(fd.get(), SOL_SOCKET, SO_RCVBUF, options.socket_buffer_bytes, "SO_RCVBUF");
  (void)SetIntOption(fd.get(), SOL_SOCKET, SO_SNDBUF, options.socket_buffer_bytes, "SO_SNDBUF");
  if (absl::Status s = SetIntOption(fd.get(), IPPROTO_IP, IP_TOS, wire::kTosEct0, "IP_TOS");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = SetIntOption(fd.get(), IPPROTO_IP, IP_RECVTOS, 1, "IP_RECVTOS"); !s.ok()) {
    return s;
  }
  if (absl::Status s = SetIntOption(fd.get(), SOL_SOCKET, SO_RXQ_OVFL, 1, "SO_RXQ_OVFL");
      !s.ok()) {
    return s;
  }
  *gro = want_gro && SetIntOption(fd.get(), SOL_UDP, UDP_GRO, 1, "UDP_GRO").ok();
  const sockaddr_in address = internal::ToSockaddr(bind);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    std::string why = absl::StrCat("bind(", bind.ToString(), ")");
    if (error == EADDRINUSE) absl::StrAppend(&why, ": the port is in use");
    if (error == EADDRNOTAVAIL) absl::StrAppend(&why, ": not an address of this host/namespace");
    return ErrnoStatus(error, why);
  }
  return fd.release();
}

// GsoSupported: whether the kernel knows UDP_SEGMENT (4.18 and later).
bool GsoSupported(int fd) {
  int value = 0;
  return ::setsockopt(fd, SOL_UDP, UDP_SEGMENT, &value, sizeof(value)) == 0;
}

class KernelUdpDeviceImpl final : public KernelUdpDevice {
 public:
  KernelUdpDeviceImpl(const KernelUdpOptions& options, bool gso, bool gro)
      : options_(options), gso_(gso), gro_(gro) {}

  std::string_view backend() const override { return "kernel_udp"; }
  const DeviceAddress& address() const override { return options_.address; }
  uint16_t base_port() const override { return options_.device.base_port; }
  uint32_t num_queues() const override { return static_cast<uint32_t>(queues_.size()); }
  Queue& queue(uint32_t index) override { return *queues_[index]; }
  const KernelUdpPeer& self() const override { return self_; }
  absl::Status AddPeer(const KernelUdpPeer& peer) override { return table_.Add(peer); }
  KernelUdpEncapsulation encapsulation() const override { return options_.encapsulation; }
  bool gso_enabled() const override { return gso_; }
  bool gro_enabled() const override { return gro_; }

  // Open: binds the sockets and builds the table.
  absl::Status Open() {
    self_.address = options_.address;
    std::vector<int> fds;
    for (uint32_t q = 0; q < options_.device.num_queues; ++q) {
      SocketAddress bind = options_.bind;
      if (bind.port != 0) bind.port = static_cast<uint16_t>(bind.port + q);
      bool gro = false;
      absl::StatusOr<int> fd = OpenQueueSocket(options_, bind, gro_, &gro);
      if (!fd.ok()) {
        for (int open_fd : fds) ::close(open_fd);
        absl::Status named(fd.status().code(),
                           absl::StrCat("kernel UDP queue ", q, ": ", fd.status().message()));
        // Keeps ErrnoStatus's errno (atp/errno_status.h) for the caller.
        fd.status().ForEachPayload([&named](absl::string_view url, const absl::Cord& payload) {
          named.SetPayload(url, payload);
        });
        return named;
      }
      fds.push_back(*fd);
      if (gso_ && !GsoSupported(*fd)) gso_ = false;
      if (!gro) gro_ = false;
      sockaddr_in bound{};
      socklen_t length = sizeof(bound);
      ::getsockname(*fd, reinterpret_cast<sockaddr*>(&bound), &length);
      self_.queue_sockets.push_back(internal::FromSockaddr(bound));
    }
    if ((options_.gso == Offload::kOn && !gso_) || (options_.gro == Offload::kOn && !gro_)) {
      for (int fd : fds) ::close(fd);
      return absl::UnimplementedError(absl::StrCat(
          "kernel UDP: ", !gso_ ? "UDP_SEGMENT (GSO)" : "UDP_GRO",
          " was asked for (Offload::kOn) but this kernel refuses it (needs Linux 5.0 or later)"));
    }
    for (size_t q = 0; q < fds.size(); ++q) {
      KernelUdpQueueConfig config;
      config.index = static_cast<uint32_t>(q);
      config.device = options_.device;
      config.local = options_.address;
      config.gso = gso_;
      config.gro = gro_;
      config.tx_coalescing = options_.tx_coalescing;
      config.max_gso_segments = options_.max_gso_segments;
      config.gro_buffers = options_.gro_buffers;
      config.encapsulation = options_.encapsulation;
      config.gateway = options_.gateway;
      absl::StatusOr<std::unique_ptr<KernelUdpQueue>> queue =
          KernelUdpQueue::Create(fds[q], &table_, config);
      if (!queue.ok()) {
        for (size_t rest = q + 1; rest < fds.size(); ++rest) ::close(fds[rest]);
        return queue.status();
      }
      queues_.push_back(*std::move(queue));
    }
    if (absl::Status s = table_.Add(self_); !s.ok()) return s;
    for (size_t i = 0; i < options_.peers.size(); ++i) {
      // A peer that repeats a node or a socket is a mistake in the options
      // (not a runtime conflict): named by its index.
      if (absl::Status s = table_.Add(options_.peers[i]); !s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("KernelUdpOptions.peers[", i, "]: ", s.message()));
      }
    }
    return absl::OkStatus();
  }

 private:
  const KernelUdpOptions options_;
  bool gso_;
  bool gro_;
  KernelUdpPeer self_;
  NodeTable table_;  // before queues_: they point at it
  std::vector<std::unique_ptr<KernelUdpQueue>> queues_;
};

}  // namespace

absl::Status KernelUdpOptions::Validate() const {
  if (absl::Status s = device.Validate(); !s.ok()) return s;
  if (address.ipv4.value == 0) {
    return absl::InvalidArgumentError("KernelUdpOptions.address.ipv4 must be set (this node)");
  }
  if (bind.ip.value == 0) {
    return absl::InvalidArgumentError(
        "KernelUdpOptions.bind.ip must be set (the local IPv4 to bind, e.g. 127.0.0.1)");
  }
  if (bind.port != 0 && uint32_t{bind.port} + device.num_queues - 1 > 0xFFFF) {
    return absl::InvalidArgumentError(absl::StrCat("KernelUdpOptions.bind.port = ", bind.port,
                                                   ": the last queue's port exceeds 65535"));
  }
  if (max_gso_segments < 1 || max_gso_segments > kKernelMaxGsoSegments) {
    return absl::InvalidArgumentError(absl::StrCat("KernelUdpOptions.max_gso_segments = ",
                                                   max_gso_segments, ": must be in [1, ",
                                                   kKernelMaxGsoSegments, "]"));
  }
  if (gro_buffers < 1 || gro_buffers > KernelUdpQueue::kMaxMessages) {
    return absl::InvalidArgumentError(absl::StrCat("KernelUdpOptions.gro_buffers = ", gro_buffers,
                                                   ": must be in [1, ",
                                                   KernelUdpQueue::kMaxMessages, "]"));
  }
  if (gateway.has_value()) {
    if (encapsulation != KernelUdpEncapsulation::kWholeFrame) {
      return absl::InvalidArgumentError(
          "KernelUdpOptions.gateway is set but encapsulation is kAtpMessage: a gateway (a switch "
          "process routing by the frames' IPv4 destinations) needs kWholeFrame, whose datagrams "
          "carry the frames' own headers");
    }
    if (gateway->ip.value == 0 || gateway->port == 0) {
      return absl::InvalidArgumentError(absl::StrCat("KernelUdpOptions.gateway = ",
                                                     gateway->ToString(), ": not an address"));
    }
    if (uint32_t{gateway->port} + kMaxQueues - 1 > 0xFFFF) {
      return absl::InvalidArgumentError(
          absl::StrCat("KernelUdpOptions.gateway.port = ", gateway->port,
                       ": the gateway's queue 15 socket (port + 15) exceeds 65535"));
    }
  }
  if (socket_buffer_bytes < 4096) {
    return absl::InvalidArgumentError(absl::StrCat("KernelUdpOptions.socket_buffer_bytes = ",
                                                   socket_buffer_bytes, ": must be >= 4096"));
  }
  return absl::OkStatus();
}

std::string_view KernelUdpEncapsulationName(KernelUdpEncapsulation value) {
  switch (value) {
    case KernelUdpEncapsulation::kAtpMessage: return "atp_message";
    case KernelUdpEncapsulation::kWholeFrame: return "whole_frame";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<KernelUdpDevice>> OpenKernelUdpDevice(
    const KernelUdpOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  auto device = std::make_unique<KernelUdpDeviceImpl>(options, options.gso != Offload::kOff,
                                                      options.gro != Offload::kOff);
  if (absl::Status s = device->Open(); !s.ok()) return s;
  return device;
}

}  // namespace atp::transport
