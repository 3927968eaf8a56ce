// transport/kernel/kernel_udp_tx.cc: a kernel UDP queue's sending side:
// TxBurst and whole-frame segmentation jobs take datagrams into pending_;
// Flush, or kSendAtSegments of them waiting, sends them: sendmmsg, with
// UDP_SEGMENT (GSO) for runs to one queue socket. kAtpMessage segmentation
// jobs leave at once. A datagram is the frame's ATP message (kAtpMessage) or
// the whole frame (kWholeFrame): datagram_offset_ / datagram_bytes_.
#include <netinet/udp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transport/common/frame_layout.h"
#include "transport/kernel/kernel_udp_queue.h"

namespace atp::transport::internal {
namespace {

constexpr size_t kMessageBytes = wire::kMessageBytes;

// IsGso: the message carries a UDP_SEGMENT control message.
bool IsGso(const msghdr& header) {
  return header.msg_controllen > 0 &&
         reinterpret_cast<const cmsghdr*>(header.msg_control)->cmsg_type == UDP_SEGMENT &&
         reinterpret_cast<const cmsghdr*>(header.msg_control)->cmsg_level == SOL_UDP;
}

bool SameDestination(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

bool IsBackpressure(int error) {
  return error == EAGAIN || error == EWOULDBLOCK || error == ENOBUFS;
}

}  // namespace

void KernelUdpQueue::SetControl(msghdr& header, Control& control_buffer, size_t segments,
                                uint8_t tos) {
  uint8_t* control = control_buffer.bytes;
  size_t used = 0;
  if (segments > 1) {  // only ever with gso_active_
    auto* c = reinterpret_cast<cmsghdr*>(control + used);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    const auto segment_bytes = static_cast<uint16_t>(datagram_bytes_);
    std::memcpy(CMSG_DATA(c), &segment_bytes, sizeof(uint16_t));
    used += CMSG_SPACE(sizeof(uint16_t));
  }
  if (tos != wire::kTosEct0) {  // the socket's default TOS is ECT(0)
    auto* c = reinterpret_cast<cmsghdr*>(control + used);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int value = tos;
    std::memcpy(CMSG_DATA(c), &value, sizeof(int));
    used += CMSG_SPACE(sizeof(int));
  }
  header.msg_control = used > 0 ? control : nullptr;
  header.msg_controllen = used;
}

KernelUdpQueue::SendOutcome KernelUdpQueue::SendBatch(mmsghdr* msgs, size_t count) {
  SendOutcome out;
  std::fill_n(msg_failed_.begin(), count, uint8_t{0});
  while (out.messages_done < count) {
    const int sent = ::sendmmsg(fd_, msgs + out.messages_done,
                                static_cast<unsigned>(count - out.messages_done), MSG_DONTWAIT);
    if (sent > 0) {
      out.messages_done += static_cast<size_t>(sent);
      continue;
    }
    const int error = errno;
    if (error == EINTR) continue;
    if (IsBackpressure(error)) {
      out.backpressure = true;
      break;
    }
    // A route whose device cannot checksum refuses GSO (EIO): send one by
    // one from now on, starting again with this message.
    if (gso_active_ && IsGso(msgs[out.messages_done].msg_hdr) &&
        (error == EIO || error == EINVAL || error == EOPNOTSUPP)) {
      gso_active_ = false;
      out.gso_refused = true;
      break;
    }
    // A hard error belongs to the first unsent message: drop it, go on.
    msg_failed_[out.messages_done] = 1;
    ++out.messages_done;
  }
  return out;
}

size_t KernelUdpQueue::BuildPendingChunk(size_t first, size_t* segments) {
  const bool coalesce = gso_active_ && config_.tx_coalescing == TxCoalescing::kGsoRuns;
  size_t m = 0;
  size_t i = first;
  for (; i < pending_.size(); ++i) {
    PendingSegment& p = pending_[i];
    msghdr* last = m > 0 ? &tx_msgs_[m - 1].msg_hdr : nullptr;
    const bool extend = coalesce && last != nullptr && p.tos == pending_[i - 1].tos &&
                        SameDestination(p.dest, pending_[i - 1].dest) &&
                        last->msg_iovlen < config_.max_gso_segments;
    if (!extend) {
      if (m == kMaxMessages) break;  // segment i starts the next chunk
      if (last != nullptr) {
        SetControl(*last, tx_controls_[m - 1], last->msg_iovlen, pending_[i - 1].tos);
      }
      msghdr& header = tx_msgs_[m].msg_hdr;
      header = msghdr{};
      header.msg_name = &p.dest;
      header.msg_namelen = sizeof(sockaddr_in);
      header.msg_iov = &tx_iovs_[i - first];
      ++m;
    }
    tx_iovs_[i - first] = iovec{const_cast<uint8_t*>(p.data), datagram_bytes_};
    ++tx_msgs_[m - 1].msg_hdr.msg_iovlen;
  }
  if (m > 0) {
    msghdr& last = tx_msgs_[m - 1].msg_hdr;
    SetControl(last, tx_controls_[m - 1], last.msg_iovlen, pending_[i - 1].tos);
  }
  *segments = i - first;
  return m;
}

bool KernelUdpQueue::SendPending() {
  size_t done = 0;  // pending_[0, done) sent or dropped
  bool backpressure = false;
  while (done < pending_.size() && !backpressure) {
    size_t segments = 0;
    const size_t m = BuildPendingChunk(done, &segments);
    const SendOutcome outcome = SendBatch(tx_msgs_.data(), m);
    backpressure = outcome.backpressure;
    // A refused GSO send was not sent: the next chunk starts with it, one
    // datagram per message (gso_active_ is off now).
    for (size_t k = 0; k < outcome.messages_done; ++k) {
      const size_t count = tx_msgs_[k].msg_hdr.msg_iovlen;
      if (msg_failed_[k]) {
        stats_.tx_errors += count;
      } else {
        stats_.tx_frames += count;
        if (count > 1) stats_.tx_offloaded_segments += count;
      }
      for (size_t j = 0; j < count; ++j) {
        const FrameRef& frame = pending_[done + j].frame;
        if (frame.pool != nullptr) FreeFrame(frame);
      }
      done += count;
    }
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(done));
  if (pending_.empty()) pending_staged_ = 0;
  return !backpressure;
}

size_t KernelUdpQueue::Flush() {
  if (!pending_.empty()) (void)SendPending();
  return pending_.size();
}

size_t KernelUdpQueue::TxBurst(std::span<const FrameRef> frames) {
  size_t i = 0;
  for (; i < frames.size(); ++i) {
    if (pending_.size() == kMaxPendingSegments) {
      (void)SendPending();
      if (pending_.size() == kMaxPendingSegments) break;  // the socket is full
    }
    const FrameRef& frame = frames[i];
    RoutableFrame route;
    if (!ClassifyFrame(frame.bytes(), config_.device.base_port, &route)) {
      ++stats_.tx_bad_frames;
      FreeFrame(frame);
      continue;
    }
    const sockaddr_in* dest = Resolve(route.dst_ipv4, route.queue);
    if (dest == nullptr) {
      ++stats_.tx_unroutable;
      FreeFrame(frame);
      continue;
    }
    pending_.push_back(PendingSegment{frame.data + datagram_offset_, frame, *dest, route.tos});
    if (pending_.size() >= kSendAtSegments) (void)SendPending();
  }
  if (i < frames.size()) ++stats_.tx_backpressure;
  return i;
}

size_t KernelUdpQueue::TxSegmentedDeferred(const SegmentationJob& job, const sockaddr_in& dest,
                                           uint8_t tos) {
  size_t done = 0;
  while (done < job.size()) {
    if (pending_.size() == kMaxPendingSegments || pending_staged_ == kMaxPendingSegments) {
      (void)SendPending();
      if (pending_.size() == kMaxPendingSegments || pending_staged_ == kMaxPendingSegments) {
        break;  // the socket is full
      }
    }
    // At most up to the send threshold (at least one): a full GSO send
    // leaves as soon as it is built.
    const size_t to_threshold = kSendAtSegments - std::min(pending_.size(), kSendAtSegments - 1);
    const size_t k = std::min({job.size() - done, kMaxPendingSegments - pending_.size(),
                               kMaxPendingSegments - pending_staged_, to_threshold});
    for (size_t j = 0; j < k; ++j) {
      uint8_t* frame = &staging_[(pending_staged_ + j) * kFrameBytes];
      WriteSegmentFrame(job, done + j, std::span<uint8_t, kFrameBytes>(frame, kFrameBytes));
      pending_.push_back(PendingSegment{frame, FrameRef{}, dest, tos});
    }
    pending_staged_ += k;
    done += k;
    if (pending_.size() >= kSendAtSegments) (void)SendPending();
  }
  return done;
}

size_t KernelUdpQueue::TxSegmentedChunk(const SegmentationJob& job, size_t first,
                                        const sockaddr_in* dest, uint8_t tos, bool* backpressure) {
  const size_t per_message = gso_active_ ? config_.max_gso_segments : 1;
  size_t m = 0;
  size_t iov = 0;
  size_t segment = 0;  // within this chunk
  while (first + segment < job.size() && m < kMaxMessages && segment < kMaxSegments) {
    const size_t k =
        std::min({per_message, job.size() - first - segment, kMaxSegments - segment});
    msghdr& header = msgs_[m].msg_hdr;
    header = msghdr{};
    header.msg_name = const_cast<sockaddr_in*>(dest);
    header.msg_namelen = sizeof(sockaddr_in);
    // One contiguous run of k datagrams per send: the caller's own messages
    // (the `messages` form, headers written in place: no copy), or the
    // staging area's (much cheaper for the kernel to copy than 2k small
    // pieces). Whole frames go through pending_ (TxSegmentedDeferred).
    uint8_t* run;
    if (job.messages.empty()) {
      run = &staging_[segment * kMessageBytes];
      WriteSegmentMessages(job, first + segment, k, run);
    } else {
      run = WriteSegmentHeadersInPlace(job, first + segment, k);
    }
    iovs_[iov] = iovec{run, k * datagram_bytes_};
    header.msg_iov = &iovs_[iov++];
    header.msg_iovlen = 1;
    SetControl(header, controls_[m], k, tos);
    segment += k;
    ++m;
  }
  const SendOutcome outcome = SendBatch(msgs_.data(), m);
  *backpressure = outcome.backpressure;
  size_t taken = 0;
  for (size_t k = 0; k < outcome.messages_done; ++k) {
    const size_t segments = msgs_[k].msg_hdr.msg_iov[0].iov_len / datagram_bytes_;
    taken += segments;
    if (msg_failed_[k]) {
      stats_.tx_errors += segments;
    } else {
      stats_.tx_frames += segments;
      if (segments > 1) stats_.tx_offloaded_segments += segments;
    }
  }
  return taken;
}

size_t KernelUdpQueue::TxSegmented(const SegmentationJob& job) {
  if (job.empty()) return 0;
  if (!IsValidSegmentationJob(job, config_.device.base_port)) {
    stats_.tx_bad_frames += job.size();
    return job.size();
  }
  const uint8_t* header = job.header.data();
  const uint32_t queue = uint32_t{LoadBig16(header + kUdpDstPortOffset)} - config_.device.base_port;
  const sockaddr_in* dest = Resolve(LoadBig32(header + kIpDstOffset), queue);
  if (dest == nullptr) {
    stats_.tx_unroutable += job.size();
    return job.size();
  }
  size_t done = 0;
  if (whole_frame_) {
    done = TxSegmentedDeferred(job, *dest, header[kIpTosOffset]);
  } else if (pending_.empty() || SendPending()) {
    // The job's datagrams leave now, after what TxBurst took before it (the
    // `messages` form points into the caller's memory).
    bool backpressure = false;
    while (done < job.size() && !backpressure) {
      done += TxSegmentedChunk(job, done, dest, header[kIpTosOffset], &backpressure);
    }
  }
  if (done > 0) ++stats_.tx_segmentation_jobs;
  if (done < job.size()) ++stats_.tx_backpressure;
  return done;
}

}  // namespace atp::transport::internal
