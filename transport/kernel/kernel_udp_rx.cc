// transport/kernel/kernel_udp_rx.cc: a kernel UDP queue's receiving side:
// recvmmsg straight into frames, or with UDP_GRO into 64 KiB buffers cut into
// frames; kAtpMessage rebuilds the 42 bytes of L2-L4 headers in front of each
// message, kWholeFrame checks that a frame came from a configured peer and is
// a whole ATP frame for the queue, and keeps it.
#include <arpa/inet.h>
#include <netinet/udp.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "transport/common/copy.h"
#include "transport/common/frame_layout.h"
#include "transport/kernel/kernel_udp_queue.h"

namespace atp::transport::internal {
namespace {

constexpr size_t kPrefixBytes = wire::kL2L4HeaderBytes;
constexpr size_t kMessageBytes = wire::kMessageBytes;
constexpr size_t kIpChecksumOffset = wire::kIpv4Offset + 10;
constexpr uint8_t kEcnMask = 0x03;

// MarkCongestionExperienced: sets the ECN field of an IPv4 header to CE and
// updates its checksum incrementally (RFC 1624: HC' = ~(~HC + ~m + m')).
void MarkCongestionExperienced(uint8_t* frame) {
  const uint16_t old_word = LoadBig16(frame + wire::kIpv4Offset);  // version/IHL, TOS
  frame[kIpTosOffset] = static_cast<uint8_t>(frame[kIpTosOffset] | wire::kTosCe);
  const uint16_t new_word = LoadBig16(frame + wire::kIpv4Offset);
  uint32_t sum = static_cast<uint16_t>(~LoadBig16(frame + kIpChecksumOffset));
  sum += static_cast<uint16_t>(~old_word);
  sum += new_word;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  const auto checksum = static_cast<uint16_t>(~sum);
  frame[kIpChecksumOffset] = static_cast<uint8_t>(checksum >> 8);
  frame[kIpChecksumOffset + 1] = static_cast<uint8_t>(checksum);
}

}  // namespace

bool KernelUdpQueue::IsWholeFrameFor(const uint8_t* frame) const {
  RoutableFrame route;
  return ClassifyFrame(std::span<const uint8_t>(frame, kFrameBytes), config_.device.base_port,
                       &route) &&
         route.queue == config_.index;
}

bool KernelUdpQueue::AcceptWholeFrame(uint8_t* frame, uint8_t outer_tos) const {
  if (!IsWholeFrameFor(frame)) return false;
  // RFC 6040 (normal mode), as a VXLAN endpoint decapsulates: congestion met
  // on the outer path marks an inner frame that is ECN-capable.
  if ((outer_tos & kEcnMask) == wire::kTosCe && (frame[kIpTosOffset] & kEcnMask) != 0 &&
      (frame[kIpTosOffset] & kEcnMask) != wire::kTosCe) {
    MarkCongestionExperienced(frame);
  }
  return true;
}

bool KernelUdpQueue::FromPeer(const sockaddr_in& from) {
  const uint32_t ip = ntohl(from.sin_addr.s_addr);
  const uint16_t port = ntohs(from.sin_port);
  const uint64_t key = (uint64_t{ip} << 16) | port;
  if (last_peer_valid_ && key == last_peer_key_) return true;
  const bool from_gateway = config_.gateway.has_value() && ip == config_.gateway->ip.value &&
                            port >= config_.gateway->port &&
                            port - config_.gateway->port < static_cast<int>(kMaxQueues);
  if (!from_gateway && !table_->FindSender(ip, port).has_value()) return false;
  last_peer_key_ = key;
  last_peer_valid_ = true;
  return true;
}

void KernelUdpQueue::ReadControl(size_t m, uint8_t* tos, uint32_t* gso_size) {
  *tos = wire::kTosEct0;
  *gso_size = 0;
  msghdr& header = msgs_[m].msg_hdr;
  for (cmsghdr* c = CMSG_FIRSTHDR(&header); c != nullptr; c = CMSG_NXTHDR(&header, c)) {
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      *tos = *CMSG_DATA(c);
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
      uint32_t drops = 0;  // the socket's drops so far, cumulative
      std::memcpy(&drops, CMSG_DATA(c), sizeof(drops));
      socket_drops_ = std::max<uint64_t>(socket_drops_, drops);
    } else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int size = 0;
      std::memcpy(&size, CMSG_DATA(c), sizeof(size));
      *gso_size = size > 0 ? static_cast<uint32_t>(size) : 0;
    }
  }
}

const uint8_t* KernelUdpQueue::PrefixFor(const sockaddr_in& from, uint8_t tos) {
  const uint64_t key = (uint64_t{from.sin_addr.s_addr} << 24) | (uint64_t{from.sin_port} << 8) | tos;
  if (!last_prefix_valid_ || key != last_prefix_key_) {
    const auto node = table_->FindSender(ntohl(from.sin_addr.s_addr), ntohs(from.sin_port));
    if (!node) return nullptr;
    WriteL2L4Header(L2L4Addresses{table_->node(*node).address, config_.local}, tos, port_,
                    std::span<uint8_t, kPrefixBytes>(last_prefix_.data(), kPrefixBytes));
    last_prefix_key_ = key;
    last_prefix_valid_ = true;
  }
  return last_prefix_.data();
}

size_t KernelUdpQueue::RxBurst(std::span<FrameRef> frames) {
  return config_.gro ? RxGro(frames) : RxPlain(frames);
}

size_t KernelUdpQueue::RxPlain(std::span<FrameRef> frames) {
  const size_t want = std::min(frames.size(), kMaxMessages);
  size_t allocated = 0;
  while (allocated < want && rx_pool_->Alloc(&frames[allocated])) ++allocated;
  if (allocated == 0) return 0;
  for (size_t j = 0; j < allocated; ++j) {
    iovs_[j] = iovec{frames[j].data + datagram_offset_, datagram_bytes_};
    msghdr& header = msgs_[j].msg_hdr;
    header = msghdr{};
    header.msg_name = &names_[j];
    header.msg_namelen = sizeof(sockaddr_in);
    header.msg_iov = &iovs_[j];
    header.msg_iovlen = 1;
    header.msg_control = controls_[j].bytes;
    header.msg_controllen = sizeof(Control);
  }
  const int received =
      ::recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(allocated), MSG_DONTWAIT, nullptr);
  size_t n = 0;
  for (size_t j = 0; j < static_cast<size_t>(std::max(received, 0)); ++j) {
    uint8_t tos;
    uint32_t gso_size;
    ReadControl(j, &tos, &gso_size);
    const msghdr& header = msgs_[j].msg_hdr;
    const bool whole = msgs_[j].msg_len == datagram_bytes_ && (header.msg_flags & MSG_TRUNC) == 0;
    bool good = false;
    if (whole && whole_frame_) {
      good = FromPeer(names_[j]) && AcceptWholeFrame(frames[j].data, tos);
    } else if (const uint8_t* prefix = whole ? PrefixFor(names_[j], tos) : nullptr;
               prefix != nullptr) {
      CopyBytes<kPrefixBytes>(frames[j].data, prefix);
      good = true;
    }
    if (good) {
      frames[j].length = kFrameBytes;
      std::swap(frames[n], frames[j]);  // keeps frames[0, n) good, in order
      ++n;
    } else {
      ++stats_.rx_bad_frames;
    }
  }
  for (size_t j = n; j < allocated; ++j) rx_pool_->Free(frames[j]);
  stats_.rx_frames += n;
  return n;
}

bool KernelUdpQueue::ReceiveGroBatch(bool* drained) {
  const size_t buffers = staged_.size();
  for (size_t j = 0; j < buffers; ++j) {
    iovs_[j] = iovec{&gro_memory_[j * kGroBufferBytes], kGroBufferBytes};
    msghdr& header = msgs_[j].msg_hdr;
    header = msghdr{};
    header.msg_name = &names_[j];
    header.msg_namelen = sizeof(sockaddr_in);
    header.msg_iov = &iovs_[j];
    header.msg_iovlen = 1;
    header.msg_control = controls_[j].bytes;
    header.msg_controllen = sizeof(Control);
  }
  // MSG_TRUNC: msg_len is the datagram's whole length, even past the buffer.
  const int received = ::recvmmsg(fd_, msgs_.data(), static_cast<unsigned>(buffers),
                                  MSG_DONTWAIT | MSG_TRUNC, nullptr);
  *drained = received < static_cast<int>(buffers);
  if (received <= 0) return false;
  for (size_t j = 0; j < static_cast<size_t>(received); ++j) {
    uint8_t tos;
    uint32_t gso_size;
    ReadControl(j, &tos, &gso_size);
    Staged& s = staged_[j];
    s.data = &gro_memory_[j * kGroBufferBytes];
    const size_t bytes = msgs_[j].msg_len;
    s.segment = gso_size != 0 ? gso_size : static_cast<uint32_t>(bytes);
    s.bytes = static_cast<uint32_t>(std::min(bytes, kGroBufferBytes));
    if (bytes > kGroBufferBytes) truncated_ += (bytes - kGroBufferBytes) / datagram_bytes_;
    s.offset = 0;
    s.prefix = nullptr;
    s.tos = tos;
    s.from_peer = false;
    if (whole_frame_) {
      s.from_peer = FromPeer(names_[j]);
    } else if (const uint8_t* prefix = PrefixFor(names_[j], tos); prefix != nullptr) {
      CopyBytes<kPrefixBytes>(prefixes_[j].data(), prefix);
      s.prefix = prefixes_[j].data();
    }
    if (bytes == 0) ++stats_.rx_bad_frames;  // an empty datagram has no segment to count
  }
  staged_count_ = static_cast<size_t>(received);
  staged_next_ = 0;
  return true;
}

size_t KernelUdpQueue::RxGro(std::span<FrameRef> frames) {
  size_t n = 0;
  bool drained = false;  // a recvmmsg of this call found the socket empty
  while (n < frames.size()) {
    if (staged_next_ == staged_count_) {
      if (drained || !ReceiveGroBatch(&drained)) break;
      continue;
    }
    Staged& s = staged_[staged_next_];
    if (s.offset >= s.bytes) {
      ++staged_next_;
      continue;
    }
    const size_t bytes = GroSegmentBytes(s.bytes, s.segment, s.offset);
    const uint8_t* in = s.data + s.offset;
    // A datagram of another size, a stranger, or not a frame for this queue
    // (kWholeFrame).
    if (bytes != datagram_bytes_ ||
        (whole_frame_ ? !(s.from_peer && IsWholeFrameFor(in)) : s.prefix == nullptr)) {
      ++stats_.rx_bad_frames;
      s.offset += static_cast<uint32_t>(bytes);
      continue;
    }
    if (!rx_pool_->Alloc(&frames[n])) break;  // the rest waits in its GRO buffer
    uint8_t* out = frames[n].data;
    if (whole_frame_) {
      CopyBytes<kFrameBytes>(out, in);
      (void)AcceptWholeFrame(out, s.tos);  // checked above; applies the outer CE mark
    } else {
      CopyBytes<kPrefixBytes>(out, s.prefix);
      CopyBytes<kMessageBytes>(out + kPrefixBytes, in);
    }
    frames[n].length = kFrameBytes;
    s.offset += static_cast<uint32_t>(datagram_bytes_);
    ++n;
  }
  stats_.rx_frames += n;
  return n;
}

}  // namespace atp::transport::internal
