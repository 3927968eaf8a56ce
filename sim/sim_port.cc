#include "sim/sim_port.h"

#include <cstring>
#include <utility>

namespace atp::sim {

size_t PacketFramePool::AllocBurst(std::span<transport::FrameRef> frames) {
  for (transport::FrameRef& frame : frames) {
    frame = Wrap(pool_->Allocate());
    frame.length = 0;
  }
  return frames.size();
}

void PacketFramePool::FreeBurst(std::span<const transport::FrameRef> frames) {
  for (const transport::FrameRef& frame : frames) Unwrap(frame);  // returns to the PacketPool
}

SimPort::SimPort(PacketFramePool* frames, Link* egress, const transport::DeviceAddress& address,
                 uint16_t base_port, uint32_t queue, TxMode tx_mode)
    : frames_(frames),
      egress_(egress),
      address_(address),
      base_port_(base_port),
      queue_(queue),
      tx_mode_(tx_mode) {
  capabilities_.max_burst = 32;
  capabilities_.tx_segmentation = transport::TxSegmentation::kSoftware;
  capabilities_.steering = transport::Steering::kDirect;
}

SimPort::~SimPort() {
  while (!rx_.empty()) frames_->Unwrap(rx_.pop_front());
}

size_t SimPort::RxBurst(std::span<transport::FrameRef> frames) {
  size_t n = 0;
  while (n < frames.size() && !rx_.empty()) {
    frames[n++] = rx_.pop_front();
  }
  stats_.rx_frames += n;
  return n;
}

size_t SimPort::Room(size_t offered) {
  if (tx_mode_ == TxMode::kTailDrop) return offered;
  const size_t room = egress_->FreeSlots();
  if (room >= offered) return offered;
  refused_ = true;
  ++stats_.tx_backpressure;
  return room;
}

size_t SimPort::TxBurst(std::span<const transport::FrameRef> all_frames) {
  const std::span<const transport::FrameRef> frames = all_frames.first(Room(all_frames.size()));
  for (const transport::FrameRef& frame : frames) {
    if (frame.pool == frames_ && frame.length == wire::kFrameBytes) {
      Send(frames_->Unwrap(frame));
      continue;
    }
    // A frame of another pool (or not a whole ATP frame): copied into a packet.
    if (frame.length != wire::kFrameBytes) {
      ++stats_.tx_bad_frames;
      transport::ReleaseFrames({&frame, 1});
      continue;
    }
    transport::FrameRef copy;
    frames_->AllocBurst({&copy, 1});
    std::memcpy(copy.data, frame.data, wire::kFrameBytes);
    transport::ReleaseFrames({&frame, 1});
    Send(frames_->Unwrap(copy));
  }
  return frames.size();
}

size_t SimPort::TxSegmented(const transport::SegmentationJob& job) {
  if (!transport::IsValidSegmentationJob(job, base_port_)) {
    stats_.tx_bad_frames += job.size();
    return job.size();
  }
  const size_t n = Room(job.size());
  for (size_t i = 0; i < n; ++i) {
    transport::FrameRef frame;
    frames_->AllocBurst({&frame, 1});
    transport::WriteSegmentFrame(job, i, std::span<uint8_t, wire::kFrameBytes>(frame.data, wire::kFrameBytes));
    frame.length = wire::kFrameBytes;
    Send(frames_->Unwrap(frame));
  }
  if (n > 0) ++stats_.tx_segmentation_jobs;
  return n;
}

}  // namespace atp::sim
