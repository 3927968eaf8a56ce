#include "lib/capture/capturing_device.h"

#include <time.h>

#include <cstring>
#include <utility>

#include "atp/transport/segmentation.h"

namespace atp::capture {
namespace {

// kFlushIntervalNs: how stale a file may be for a reader while frames flow.
constexpr int64_t kFlushIntervalNs = 1'000'000'000;

int64_t WallClockNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

void Recorder::Record(std::span<const transport::FrameRef> frames) {
  if (frames.empty()) return;
  const int64_t now = WallClockNs();
  std::lock_guard<std::mutex> lock(mu_);
  for (const transport::FrameRef& f : frames) ring_->Write(f.bytes(), now);
  FlushEverySecond(now);
}

void Recorder::RecordBytes(const uint8_t* frames, size_t count, size_t frame_bytes) {
  if (count == 0) return;
  const int64_t now = WallClockNs();
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < count; ++i) ring_->Write({frames + i * frame_bytes, frame_bytes}, now);
  FlushEverySecond(now);
}

void Recorder::FlushEverySecond(int64_t now_ns) {
  if (now_ns - last_flush_ns_ < kFlushIntervalNs) return;
  ring_->Flush();
  last_flush_ns_ = now_ns;
}

void Recorder::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  ring_->Flush();
}

// CapturingQueue: forwards every call to the inner queue, recording frames.
class CapturingDevice::CapturingQueue final : public transport::Queue {
 public:
  CapturingQueue(transport::Queue& inner, Recorder& rx, Recorder& tx) : inner_(inner), rx_(rx), tx_(tx) {}

  uint32_t index() const override { return inner_.index(); }
  const transport::QueueCapabilities& capabilities() const override { return inner_.capabilities(); }

  size_t RxBurst(std::span<transport::FrameRef> frames) override {
    const size_t n = inner_.RxBurst(frames);
    rx_.Record(frames.first(n));
    return n;
  }

  size_t TxBurst(std::span<const transport::FrameRef> frames) override {
    // Copied first: the inner queue may give a taken buffer back at once.
    copies_.resize(frames.size() * transport::kFrameBytes);
    size_t copied = 0;
    for (const transport::FrameRef& f : frames) {
      if (f.length != transport::kFrameBytes) break;  // not an ATP frame: recorded by length below
      std::memcpy(copies_.data() + copied * transport::kFrameBytes, f.data, f.length);
      ++copied;
    }
    if (copied != frames.size()) {
      // Rare (frames of other sizes): record before sending, as offered.
      tx_.Record(frames);
      return inner_.TxBurst(frames);
    }
    const size_t n = inner_.TxBurst(frames);
    tx_.RecordBytes(copies_.data(), n, transport::kFrameBytes);
    return n;
  }

  size_t TxSegmented(const transport::SegmentationJob& job) override {
    const size_t n = inner_.TxSegmented(job);
    // Still inside the caller's call, so the job's memory is valid: the
    // frames taken are rebuilt from it.
    copies_.resize(n * transport::kFrameBytes);
    for (size_t i = 0; i < n; ++i) {
      transport::WriteSegmentFrame(
          job, i, std::span<uint8_t, transport::kFrameBytes>(copies_.data() + i * transport::kFrameBytes,
                                                             transport::kFrameBytes));
    }
    tx_.RecordBytes(copies_.data(), n, transport::kFrameBytes);
    return n;
  }

  size_t Flush() override { return inner_.Flush(); }
  transport::FramePool& rx_pool() override { return inner_.rx_pool(); }
  transport::FramePool& tx_pool() override { return inner_.tx_pool(); }
  transport::QueueStats stats() const override { return inner_.stats(); }
  int wait_fd() const override { return inner_.wait_fd(); }

 private:
  transport::Queue& inner_;
  Recorder& rx_;
  Recorder& tx_;
  std::vector<uint8_t> copies_;  // this queue's thread only
};

CapturingDevice::CapturingDevice(std::unique_ptr<transport::Device> inner,
                                 std::unique_ptr<PcapRing> rx, std::unique_ptr<PcapRing> tx)
    : inner_(std::move(inner)), rx_(std::move(rx)), tx_(std::move(tx)) {
  for (uint32_t i = 0; i < inner_->num_queues(); ++i) {
    queues_.push_back(std::make_unique<CapturingQueue>(inner_->queue(i), rx_, tx_));
  }
}

CapturingDevice::~CapturingDevice() {
  queues_.clear();
  rx_.Flush();
  tx_.Flush();
}

transport::Queue& CapturingDevice::queue(uint32_t index) { return *queues_[index]; }

}  // namespace atp::capture
