// transport/kernel/kernel_udp_tx.cc: a kernel UDP queue's sending side:
// sendmmsg, with UDP_SEGMENT (GSO) for runs of frames to one queue socket and
// for segmentation jobs. A datagram is the frame's ATP message (kAtpMessage)
// or the whole frame (kWholeFrame): datagram_offset_ / datagram_bytes_.
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

bool IsBackpressure(int error) {
  return error == EAGAIN || error == EWOULDBLOCK || error == ENOBUFS;
}

}  // namespace

void KernelUdpQueue::SetControl(size_t m, size_t segments, uint8_t tos) {
  msghdr& header = msgs_[m].msg_hdr;
  uint8_t* control = controls_[m].bytes;
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

KernelUdpQueue::SendOutcome KernelUdpQueue::SendBatch(size_t count) {
  SendOutcome out;
  std::fill_n(msg_failed_.begin(), count, uint8_t{0});
  while (out.messages_done < count) {
    const int sent = ::sendmmsg(fd_, msgs_.data() + out.messages_done,
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
    if (gso_active_ && IsGso(msgs_[out.messages_done].msg_hdr) &&
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

size_t KernelUdpQueue::TxBurstChunk(std::span<const FrameRef> frames, bool* backpressure) {
  const bool coalesce = gso_active_ && config_.tx_coalescing == TxCoalescing::kGsoRuns;
  const size_t limit = std::min(frames.size(), kMaxSegments);
  size_t m = 0;
  size_t iov = 0;
  const sockaddr_in* run_dest = nullptr;
  uint8_t run_tos = 0;
  size_t i = 0;
  for (; i < limit; ++i) {
    const FrameRef& frame = frames[i];
    RoutableFrame route;
    if (!ClassifyFrame(frame.bytes(), config_.device.base_port, &route)) {
      fates_[i] = Fate::kBad;
      continue;
    }
    const sockaddr_in* dest = Resolve(route.dst_ipv4, route.queue);
    if (dest == nullptr) {
      fates_[i] = Fate::kUnroutable;
      continue;
    }
    const bool extend = coalesce && m > 0 && dest == run_dest && route.tos == run_tos &&
                        msgs_[m - 1].msg_hdr.msg_iovlen < config_.max_gso_segments;
    if (!extend) {
      if (m == kMaxMessages) break;  // frame i starts the next chunk
      if (m > 0) SetControl(m - 1, msgs_[m - 1].msg_hdr.msg_iovlen, run_tos);
      msghdr& header = msgs_[m].msg_hdr;
      header = msghdr{};
      header.msg_name = const_cast<sockaddr_in*>(dest);
      header.msg_namelen = sizeof(sockaddr_in);
      header.msg_iov = &iovs_[iov];
      msg_first_[m] = static_cast<uint32_t>(i);
      ++m;
      run_dest = dest;
      run_tos = route.tos;
    }
    fates_[i] = Fate::kSend;
    iovs_[iov++] = iovec{frame.data + datagram_offset_, datagram_bytes_};
    ++msgs_[m - 1].msg_hdr.msg_iovlen;
  }
  if (m > 0) SetControl(m - 1, msgs_[m - 1].msg_hdr.msg_iovlen, run_tos);

  const SendOutcome outcome = m > 0 ? SendBatch(m) : SendOutcome{};
  *backpressure = outcome.backpressure;
  const size_t taken = outcome.messages_done == m ? i : msg_first_[outcome.messages_done];
  for (size_t k = 0; k < outcome.messages_done; ++k) {
    const size_t segments = msgs_[k].msg_hdr.msg_iovlen;
    if (msg_failed_[k]) {
      stats_.tx_errors += segments;
    } else {
      stats_.tx_frames += segments;
      if (segments > 1) stats_.tx_offloaded_segments += segments;
    }
  }
  for (size_t k = 0; k < taken; ++k) {
    if (fates_[k] == Fate::kBad) ++stats_.tx_bad_frames;
    if (fates_[k] == Fate::kUnroutable) ++stats_.tx_unroutable;
    FreeFrame(frames[k]);
  }
  return taken;
}

size_t KernelUdpQueue::TxBurst(std::span<const FrameRef> frames) {
  size_t done = 0;
  bool backpressure = false;
  while (done < frames.size() && !backpressure) {
    done += TxBurstChunk(frames.subspan(done), &backpressure);
  }
  if (done < frames.size()) ++stats_.tx_backpressure;
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
    // pieces). Whole frames are always built in the staging area.
    uint8_t* run;
    if (whole_frame_) {
      run = &staging_[segment * kFrameBytes];
      for (size_t j = 0; j < k; ++j) {
        WriteSegmentFrame(job, first + segment + j,
                          std::span<uint8_t, kFrameBytes>(run + j * kFrameBytes, kFrameBytes));
      }
    } else if (job.messages.empty()) {
      run = &staging_[segment * kMessageBytes];
      WriteSegmentMessages(job, first + segment, k, run);
    } else {
      run = WriteSegmentHeadersInPlace(job, first + segment, k);
    }
    iovs_[iov] = iovec{run, k * datagram_bytes_};
    header.msg_iov = &iovs_[iov++];
    header.msg_iovlen = 1;
    SetControl(m, k, tos);
    segment += k;
    ++m;
  }
  const SendOutcome outcome = SendBatch(m);
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
  bool backpressure = false;
  while (done < job.size() && !backpressure) {
    done += TxSegmentedChunk(job, done, dest, header[kIpTosOffset], &backpressure);
  }
  if (done > 0) ++stats_.tx_segmentation_jobs;
  if (done < job.size()) ++stats_.tx_backpressure;
  return done;
}

}  // namespace atp::transport::internal
